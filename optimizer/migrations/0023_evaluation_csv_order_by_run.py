"""The CSV export's index led by the run: (run, split, task key in code point
order, candidate), the score along (optimizer.export.run_export_csv_stream).
One run's evaluations of a split are one range of it, already in the file's
order: the export streams them without a sort, without a join to the run's
candidates and without walking other runs' entries, whatever the planner
knows of the tables (migration 0021's index, which it replaces, held every
run's evaluations of a split together). It also serves as the index of
Evaluation.run (a run's deletion finds its evaluations by it).

Raw SQL as in 0021: PostgreSQL builds it with CREATE INDEX CONCURRENTLY
(writes to evaluations go on meanwhile; hence a migration outside a
transaction) and the task key in the "C" collation; SQLite's default
collation already is code point order. The new index is built before the
old one is dropped, so the export always has one. Django's model state does
not track either.

Measured (bench/evaluation_run_migration.py): building it concurrently on
2,000,000 evaluations took 6.7 s, 15 s at load 4-5; dropping the old one
0.1-0.2 s."""

from django.db import migrations

NAME = "evaluation_csv_order_by_run"
OLD = "evaluation_csv_order"


COLUMNS = {
    NAME: (
        '(run_id, split, task_key COLLATE "C", candidate_id) INCLUDE (score)',
        "(run_id, split, task_key, candidate_id, score)",
    ),
    OLD: (
        '(split, task_key COLLATE "C", candidate_id) INCLUDE (score)',
        "(split, task_key, candidate_id, score)",
    ),
}


def create(schema_editor, name: str = NAME) -> None:
    postgres, sqlite = COLUMNS[name]
    if schema_editor.connection.vendor == "postgresql":
        # A build that failed half-way leaves an INVALID index of that name behind.
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY {name} ON optimizer_evaluation {postgres}"
        )
    else:
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON optimizer_evaluation {sqlite}")


def drop(schema_editor, name: str = NAME) -> None:
    concurrently = "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""
    schema_editor.execute(f"DROP INDEX {concurrently}IF EXISTS {name}")


def forwards(apps, schema_editor) -> None:
    create(schema_editor, NAME)
    drop(schema_editor, OLD)


def backwards(apps, schema_editor) -> None:
    create(schema_editor, OLD)
    drop(schema_editor, NAME)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("optimizer", "0022_evaluation_run"),
    ]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
