"""Migration 0022_evaluation_run's PostgreSQL path (the column and its foreign
key added NOT VALID, the backfill in batches, NOT NULL by way of a validated
check) and 0023's index built concurrently: the test of
tests/optimizer/test_evaluation_run_migration.py, on PostgreSQL."""

from __future__ import annotations

import pytest

from tests.optimizer.test_evaluation_run_migration import (  # noqa: F401 (collected here)
    test_existing_evaluations_get_their_candidates_run_and_the_column_ends_not_null,
)

pytestmark = pytest.mark.django_db(transaction=True)
