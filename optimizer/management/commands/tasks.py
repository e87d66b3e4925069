"""`manage.py tasks import FILE --set NAME [--owner USERNAME] [CSV mapping]`.

All or nothing: a bad file exits with status 2 and lists every problem, each
naming the file line and field; nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from optimizer.taskset_services import taskset_import
from optimizer.tasksets import MAX_FILE_BYTES, CsvMapping
from verifiers_app.engine import SpecError
from verifiers_app.management.owner import command_owner


class Command(BaseCommand):
    help = "Import task rows (JSONL, YAML or CSV) into a task set."

    def add_arguments(self, parser) -> None:
        subparsers = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
        imp = subparsers.add_parser("import", help="import a .jsonl, .yaml/.yml or .csv file into a task set")
        imp.add_argument("file", metavar="FILE")
        imp.add_argument("--set", dest="set_name", required=True, metavar="NAME",
                         help="task set name (created if new; rows are added or updated by task_id)")
        imp.add_argument("--owner", default=None, metavar="USERNAME", help="owner of the set (default: the first superuser)")
        imp.add_argument("--shared", action="store_true", help="let every user see and use the set")
        imp.add_argument("--format", default="", choices=["", "jsonl", "yaml", "csv"], help="default: from the extension")
        for field in ("input", "task-id", "expected", "split"):
            imp.add_argument(f"--{field}-column", default="", metavar="COLUMN", help=f"CSV column holding {field}")
        imp.add_argument("--metadata-columns", default="", metavar="A,B", help="CSV columns copied into metadata")

    def handle(self, *args, subcommand: str, **options: Any) -> None:
        path = Path(options["file"])
        try:
            with path.open("rb") as handle:
                content = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise CommandError(f"{path}: cannot be read ({exc.strerror})", returncode=2) from None
        mapping = CsvMapping(
            input=options["input_column"], task_id=options["task_id_column"], expected=options["expected_column"],
            split=options["split_column"],
            metadata=tuple(c.strip() for c in options["metadata_columns"].split(",") if c.strip()),
        )
        try:
            task_set, counts = taskset_import(
                owner=command_owner(options["owner"]), name=options["set_name"], filename=path.name,
                content=content, fmt=options["format"], mapping=mapping, shared=options["shared"] or None,
            )
        except SpecError as exc:
            raise CommandError("nothing imported:\n" + "\n".join(exc.problems), returncode=2) from None
        self.stdout.write(f"Imported {path.name} into task set {task_set.name!r} (id {task_set.pk}): "
                          f"{counts['created']} created, {counts['updated']} updated, {counts['unchanged']} unchanged")
