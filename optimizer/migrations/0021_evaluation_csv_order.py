"""An index in the CSV export's order (optimizer.export.run_export_csv_stream:
split, task key in code point order, candidate; the score along), so the
export streams rows as the index holds them instead of sorting every
evaluation of the run before the first row.

Raw SQL: PostgreSQL builds it with CREATE INDEX CONCURRENTLY (writes to
evaluations go on meanwhile; hence a migration outside a transaction) and
the task key in the "C" collation; SQLite's default collation already is
code point order. Django's model state does not track it."""

from django.db import migrations

NAME = "evaluation_csv_order"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NAME} ON optimizer_evaluation "
            '(split, task_key COLLATE "C", candidate_id) INCLUDE (score)'
        )
    else:
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {NAME} ON optimizer_evaluation "
            "(split, task_key, candidate_id, score)"
        )


def drop(apps, schema_editor):
    concurrently = "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""
    schema_editor.execute(f"DROP INDEX {concurrently}IF EXISTS {NAME}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("optimizer", "0020_scoring_heartbeat"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
