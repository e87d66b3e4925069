"""Moving the test database to a migration and back, for the tests of data migrations."""

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(target):
    """Migrate to `target` ([(app, migration)]; a None migration: before the
    app's first) and return the apps as they are there, for the test's rows."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state([node for node in target if node[1] is not None]).apps


def migrate_to_latest() -> None:
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
