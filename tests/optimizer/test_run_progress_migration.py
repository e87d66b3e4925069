"""Runs recorded before the progress row existed keep their heartbeat, budget,
usage, cost and last event number through the migration (and back)."""

from __future__ import annotations

import pytest

from tests.migrating import migrate, migrate_to_latest

BEFORE = [("optimizer", "0009_i16a_backfill_val_summary")]
AFTER = [("optimizer", "0010_i16n_run_progress")]

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_recorded_before_the_progress_row_keeps_its_figures_both_ways(django_user_model):
    apps = migrate(BEFORE)
    try:
        owner = apps.get_model("auth", "User").objects.create(username="old")
        usage = {"total": {"calls": 3, "tokens_in": 40, "tokens_out": 9, "cost": 0.25}}
        run = apps.get_model("optimizer", "Run").objects.create(
            owner_id=owner.pk, budget_used=17, usage=usage, cost=0.25, last_seq=42, name="old run"
        )

        apps = migrate(AFTER)
        progress = apps.get_model("optimizer", "RunProgress").objects.get(run_id=run.pk)
        assert (progress.budget_used, progress.usage, progress.cost, progress.last_seq) == (
            17,
            usage,
            0.25,
            42,
        )

        apps = migrate(BEFORE)
        back = apps.get_model("optimizer", "Run").objects.get(pk=run.pk)
        assert (back.budget_used, back.usage, back.cost, back.last_seq) == (17, usage, 0.25, 42)
    finally:
        migrate_to_latest()
