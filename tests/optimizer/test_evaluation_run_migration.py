"""Migration 0022_evaluation_run on a database made before it: every
existing evaluation gets its candidate's run, batch by batch, rows written
while the backfill runs too; the column ends NOT NULL; migration 0023 puts
the CSV export's index led by the run in place of the old one; and both go
back. (Run on PostgreSQL too: tests/integration/test_evaluation_run_on_postgres.py.)"""

from __future__ import annotations

import importlib

import pytest
from django.db import IntegrityError, connection, transaction

from tests.migrating import migrate, migrate_to_latest

BEFORE = [("optimizer", "0021_evaluation_csv_order")]
AFTER = [("optimizer", "0023_evaluation_csv_order_by_run")]
BACKFILL = importlib.import_module("optimizer.migrations.0022_evaluation_run")

pytestmark = pytest.mark.django_db(transaction=True)


def indexes() -> dict[str, list[str]]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, "optimizer_evaluation")
    return {name: info["columns"] for name, info in found.items() if info["index"]}


def evaluation_row(candidate_id: int, key: str) -> None:
    """An evaluation as the code before Evaluation.run wrote it (no run)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO optimizer_evaluation (candidate_id, task_key, split, output, score, "
            "verdict, passed, result, feedback, attempts, latency_ms, tokens_in, tokens_out, "
            "judge_tokens_in, judge_tokens_out, cost, created_at) "
            "VALUES (%s, %s, 'val', '', 0.5, 'pass', true, '{}', '', '[]', 0, 0, 0, 0, 0, 0, %s)",
            [candidate_id, key, "2026-01-01T00:00:00Z"],
        )


def test_existing_evaluations_get_their_candidates_run_and_the_column_ends_not_null(
    monkeypatch,
):
    apps = migrate(BEFORE)
    try:
        user = apps.get_model("auth", "User").objects.create(username="old")
        Run = apps.get_model("optimizer", "Run")
        Candidate = apps.get_model("optimizer", "Candidate")
        runs = [Run.objects.create(owner_id=user.pk, name=f"run {n}") for n in range(3)]
        candidates = [
            Candidate.objects.create(run_id=run.pk, index=i, components={"i": "x"})
            for i in range(2)
            for run in runs
        ]
        for n in range(7):  # ids of the runs interleaved, across several batches
            for candidate in candidates:
                evaluation_row(candidate.pk, f"t{n}")
        written_meanwhile = []
        fill = BACKFILL._fill

        def fill_and_write(connection_, low, high):
            if not written_meanwhile:  # a worker on the old code, while the backfill runs
                evaluation_row(candidates[-1].pk, "late")
                written_meanwhile.append(True)
            return fill(connection_, low, high)

        monkeypatch.setattr(BACKFILL, "BATCH", 5)
        monkeypatch.setattr(BACKFILL, "_fill", fill_and_write)
        assert "evaluation_csv_order" in indexes()

        apps = migrate(AFTER)

        Evaluation = apps.get_model("optimizer", "Evaluation")
        rows = list(Evaluation.objects.values_list("run_id", "candidate__run_id", "task_key"))
        assert len(rows) == 7 * len(candidates) + 1
        assert all(run_id == of_candidate for run_id, of_candidate, _ in rows)
        assert ("late" in {key for *_, key in rows}) and written_meanwhile
        assert {run_id for run_id, *_ in rows} == {run.pk for run in runs}
        with pytest.raises(IntegrityError), transaction.atomic():
            evaluation_row(candidates[0].pk, "no run")
        if connection.vendor == "postgresql":  # the NOT VALID constraints were validated
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT conname, contype, convalidated FROM pg_constraint "
                    "WHERE conrelid = 'optimizer_evaluation'::regclass AND contype IN ('f', 'c')"
                )
                constraints = cursor.fetchall()
            assert all(valid for *_, valid in constraints), constraints
            assert "run_id IS NOT NULL" not in str(constraints)  # the check was dropped
        found = indexes()
        assert "evaluation_csv_order" not in found
        assert found["evaluation_csv_order_by_run"][:4] == [
            "run_id",
            "split",
            "task_key",
            "candidate_id",
        ]

        apps = migrate(BEFORE)  # and back: the column and the new index gone, the old one back
        found = indexes()
        assert "evaluation_csv_order" in found and "evaluation_csv_order_by_run" not in found
        with connection.cursor() as cursor:
            columns = connection.introspection.get_table_description(cursor, "optimizer_evaluation")
        assert "run_id" not in {c.name for c in columns}
        assert apps.get_model("optimizer", "Evaluation").objects.count() == len(rows)
    finally:
        migrate_to_latest()
