"""The CSV export on PostgreSQL: rows streamed in the order of the
evaluation_csv_order_by_run index (task keys in the "C" collation, whatever
the database's own) are the file a pivot of the whole run gives; the
export's query reads one range of that index, with or without the tables'
statistics."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

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


def test_the_csv_order_index_is_built_and_valid_and_led_by_the_run():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'evaluation_csv_order_by_run'"
        )
        valid, definition = cursor.fetchone()
        cursor.execute("SELECT count(*) FROM pg_class WHERE relname = 'evaluation_csv_order'")
        assert cursor.fetchone()[0] == 0
    assert valid
    assert '(run_id, split, task_key COLLATE "C", candidate_id) INCLUDE (score)' in definition


@pytest.mark.parametrize("analysed", [True, False])
def test_the_exports_query_reads_the_runs_range_of_the_index_without_a_join_or_a_sort(
    user, other_user, analysed
):
    """Whatever the planner knows of the tables (analysed, or never: just
    after a big import), and with other runs' evaluations beside it."""
    run = recorded_run(user, candidates=3, val_tasks=4)
    for owner in (user, other_user):
        recorded_run(owner, candidates=3, val_tasks=4, task_prefix="a")
    with connection.cursor() as cursor:
        if analysed:
            cursor.execute("ANALYZE optimizer_evaluation, optimizer_candidate")
        cursor.execute(
            "SELECT count(*) FROM pg_stats WHERE tablename IN ('optimizer_evaluation', 'optimizer_candidate')"
        )
        assert bool(cursor.fetchone()[0]) == analysed
    with CaptureQueriesContext(connection) as queries:
        run_export_csv(run)
    sql = next(
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("DECLARE") and "= 'val'" in q["sql"]
    )
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a handful of rows: a seq scan is cheaper
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "evaluation_csv_order_by_run" in plan, plan
    assert "Sort" not in plan and "Join" not in plan and "Nested Loop" not in plan, plan
