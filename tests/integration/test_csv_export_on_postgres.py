"""The CSV export on PostgreSQL: rows streamed in the order of the
evaluation_csv_order index (task keys in the "C" collation, whatever the
database's own) are the file a pivot of the whole run gives."""

from __future__ import annotations

import pytest
from django.db import connection

from optimizer.export import run_export_csv
from optimizer.models import Evaluation
from tests.factories import recorded_run
from tests.optimizer.test_export import _csv_as_a_whole_table

pytestmark = pytest.mark.django_db


def test_the_csv_on_postgresql_is_the_whole_table_in_code_point_order(user, other_user):
    run = recorded_run(user, candidates=4, val_tasks=6, holdout_tasks=3, task_prefix="val-")
    recorded_run(other_user, candidates=2, val_tasks=6, task_prefix="val-")
    for n, key in enumerate(["b", "B", "a", "ä", "_x", "=1+1"]):
        Evaluation.objects.filter(candidate__run=run, task_key=f"val-00{n}").update(task_key=key)
    Evaluation.objects.filter(candidate__run=run, task_key="a", candidate__index=2).delete()
    first = run.candidates.get(index=0)
    for key, split in [("t", "train"), ("odd", "Val"), ("x", "dev"), ("y", "trains")]:
        Evaluation.objects.create(
            candidate=first, run=run, task_key=key, split=split, score=0.5, verdict="pass"
        )
    text = run_export_csv(run)
    assert text == _csv_as_a_whole_table(run)
    keys = [line.split(",")[0] for line in text.splitlines()[1:] if ",val," in line]
    assert keys == ["'=1+1", "B", "_x", "a", "b", "ä"]
    others = [line.split(",")[:2] for line in text.splitlines()[-3:]]
    assert others == [["odd", "Val"], ["x", "dev"], ["y", "trains"]]


def test_the_csv_order_index_is_built_and_valid():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'evaluation_csv_order'"
        )
        valid, definition = cursor.fetchone()
    assert valid
    assert 'task_key COLLATE "C"' in definition and "INCLUDE (score)" in definition
