"""Evaluation.run: the candidate's run, stored again on each evaluation, so
the CSV export reads one run's evaluations from an index led by the run
(migration 0023_evaluation_csv_order_by_run) without a join to its candidates.

Written for a big table that workers keep writing to. On PostgreSQL:

1. ADD COLUMN run_id, nullable and without a default (a catalogue change,
   no rewrite), then its foreign key NOT VALID (checked for new rows only).
   Each takes the table's ACCESS EXCLUSIVE lock for milliseconds, but must
   wait for every transaction reading the table (a CSV download reads in
   one) while everyone else queues behind it: so each waits at most
   LOCK_TIMEOUT and is tried again, up to TRIES times.
2. The backfill, UPDATE … FROM optimizer_candidate, BATCH evaluation ids
   at a time, each batch its own transaction: row locks on those rows
   only, reads and writes of the others go on. Rows written meanwhile
   without a run (a worker still on the code before this change) are
   filled in by a last pass over the ids written since the backfill began.
3. CHECK (run_id IS NOT NULL) NOT VALID, then VALIDATE it and the foreign
   key (SHARE UPDATE EXCLUSIVE: scans of the table while reads and writes
   go on), SET NOT NULL (ACCESS EXCLUSIVE, but without a scan: the
   validated check proves it), the check dropped, and VACUUM ANALYZE
   (the backfill left a dead copy of every row; the export's index-only
   scan needs the visibility map VACUUM sets).

From step 3's check on, a worker on the code before this change fails to
write evaluations: deploy the workers with the migration (docker-compose's
`migrate` step runs before they start).

Measured on 2,000,000 evaluations (3.6 GB with indexes;
bench/evaluation_run_migration.py, two shared cores at load 4-5) while
probes read and updated random evaluations: ACCESS EXCLUSIVE held for at
most 1.1 ms by each statement of steps 1 and 3; the backfill 103 s in 201
batches, each holding its rows for 0.49 s (max 1.03 s): an update of one
of them waited at most 0.47 s (with batches of 50,000, 3.6 s), reads are
never blocked; the validations 14 s and 6 s and VACUUM ANALYZE 63 s, with
reads and writes going on (the slowest read, 191 ms during the VACUUM,
waited for the disk). About 5× that on 10,000,000: ~9 minutes of backfill.

On SQLite (development, tests, `frontier serve`'s own file) Django's own
AddField and AlterField (a table rebuild) with the same backfill between.
"""

import importlib
import time

import django.db.models.deletion
from django.db import migrations, models, transaction
from django.db.utils import OperationalError

BATCH = 10_000
LOCK_TIMEOUT = "2s"
TRIES = 30
FOREIGN_KEY = "optimizer_evaluation_run_id_fk_optimizer_run_id"
NOT_NULL = "optimizer_evaluation_run_id_not_null"


def _briefly(connection, *statements: str) -> None:
    """`statements` in one transaction that gives up waiting for a lock after
    LOCK_TIMEOUT (PostgreSQL's lock_not_available) and is tried again."""
    for attempt in range(TRIES):
        try:
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                for sql in statements:
                    cursor.execute(sql)
            return
        except OperationalError as error:
            if getattr(error.__cause__, "sqlstate", None) != "55P03" or attempt == TRIES - 1:
                raise
            time.sleep(1)


def _fill(connection, low: int, high: int) -> int:
    """Set run_id on the evaluations with low < id <= high that have none."""
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE optimizer_evaluation SET run_id = c.run_id FROM optimizer_candidate c "
            "WHERE c.id = optimizer_evaluation.candidate_id "
            "AND optimizer_evaluation.id > %s AND optimizer_evaluation.id <= %s "
            "AND optimizer_evaluation.run_id IS NULL",
            [low, high],
        )
        return cursor.rowcount


def _top(connection) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(max(id), 0) FROM optimizer_evaluation")
        return cursor.fetchone()[0]


def backfill(apps, schema_editor) -> None:
    """Every evaluation's run_id from its candidate, BATCH ids at a time; then
    the ids written since, until a pass finds none."""
    connection = schema_editor.connection
    low, top = 0, _top(connection)
    while low < top:
        _fill(connection, low, min(low + BATCH, top))
        low += BATCH
    while (newer := _top(connection)) > top:
        _fill(connection, top, newer)
        top = newer
    if connection.vendor == "postgresql":
        # From here on a row without a run is refused; the last pass catches
        # any written between the loop above and the check.
        _briefly(
            connection,
            f"ALTER TABLE optimizer_evaluation ADD CONSTRAINT {NOT_NULL} "
            "CHECK (run_id IS NOT NULL) NOT VALID",
        )
        _fill(connection, top, _top(connection))


class AddRun(migrations.AddField):
    """AddField; on PostgreSQL the column, then its foreign key NOT VALID (step 1)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        connection = schema_editor.connection
        if connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        _briefly(connection, "ALTER TABLE optimizer_evaluation ADD COLUMN run_id bigint NULL")
        _briefly(
            connection,
            f"ALTER TABLE optimizer_evaluation ADD CONSTRAINT {FOREIGN_KEY} FOREIGN KEY (run_id) "
            "REFERENCES optimizer_run (id) DEFERRABLE INITIALLY DEFERRED NOT VALID",
        )

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        super().database_backwards(app_label, schema_editor, from_state, to_state)
        if schema_editor.connection.vendor != "postgresql":
            # SQLite rebuilt the table (here and in RunNotNull), without the
            # index 0021 made in raw SQL: made again, as 0021 left the table.
            importlib.import_module("optimizer.migrations.0021_evaluation_csv_order").create(
                None, schema_editor
            )


class RunNotNull(migrations.AlterField):
    """AlterField to NOT NULL; on PostgreSQL by way of the validated check (step 3)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        connection = schema_editor.connection
        if connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE optimizer_evaluation VALIDATE CONSTRAINT {NOT_NULL}")
            cursor.execute(f"ALTER TABLE optimizer_evaluation VALIDATE CONSTRAINT {FOREIGN_KEY}")
        _briefly(
            connection,
            "ALTER TABLE optimizer_evaluation ALTER COLUMN run_id SET NOT NULL",
            f"ALTER TABLE optimizer_evaluation DROP CONSTRAINT {NOT_NULL}",
        )
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE optimizer_evaluation")

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        connection = schema_editor.connection
        if connection.vendor != "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        _briefly(connection, "ALTER TABLE optimizer_evaluation ALTER COLUMN run_id DROP NOT NULL")


def forget(apps, schema_editor) -> None:
    """Backwards from the backfill: nothing to undo (the column goes next)."""


def run_field(*, null: bool) -> models.ForeignKey:
    return models.ForeignKey(
        db_index=False,
        null=null,
        on_delete=django.db.models.deletion.CASCADE,
        related_name="evaluations",
        to="optimizer.run",
    )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("optimizer", "0021_evaluation_csv_order"),
    ]

    operations = [
        AddRun(model_name="evaluation", name="run", field=run_field(null=True)),
        migrations.RunPython(backfill, forget, elidable=False),
        RunNotNull(model_name="evaluation", name="run", field=run_field(null=False)),
    ]
