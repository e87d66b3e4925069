"""Task sets from the command line.

- `tasks import FILE --set NAME [--owner USERNAME] [--dry-run] [--input-field F …] [--split-ratios train=0.6,val=0.4 --split-seed 0]`
- `tasks export SET [--out FILE]` (JSONL; re-imports to an identical set)
- `tasks split SET [--split-ratios …] [--split-seed N]` (a seeded random split of every task)

All or nothing: a bad file exits with status 2 and lists every problem, each
naming the file line and field; nothing is written. `--dry-run` prints the
preview report (the JSON the API's `dry_run` returns) and writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from optimizer.tasksets.files import (
    FORMATS,
    DefaultSplit,
    FieldMapping,
    rule_text,
)
from optimizer.tasksets.models import TaskSet
from optimizer.tasksets.services import (
    taskset_export_lines,
    taskset_import,
    taskset_import_preview,
    taskset_split,
)
from verifiers_app.engine import SpecError
from verifiers_app.management.owner import command_owner


def parse_ratios(text: str) -> dict[str, float]:
    """`train=0.6,val=0.4` → {"train": 0.6, "val": 0.4}."""
    ratios: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        split, _, value = part.partition("=")
        try:
            ratios[split.strip()] = float(value)
        except ValueError:
            raise CommandError(
                f"--split-ratios: {part!r} is not split=number (e.g. train=0.6,val=0.4)",
                returncode=2,
            ) from None
    return ratios


def _default_split(options: dict[str, Any]) -> DefaultSplit:
    try:
        ratios = parse_ratios(options["split_ratios"])
        return DefaultSplit(ratios=ratios or None, seed=options["split_seed"])
    except SpecError as exc:
        raise CommandError(f"--split-ratios: {exc}", returncode=2) from None


class Command(BaseCommand):
    help = "Import (or preview) a task file, export a task set as JSONL, or split a set."

    def add_arguments(self, parser: CommandParser) -> None:
        subparsers = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
        imp = subparsers.add_parser(
            "import", help="import a .jsonl, .json, .yaml/.yml, .csv or .tsv file into a task set"
        )
        imp.add_argument("file", metavar="FILE", help="the task file")
        imp.add_argument(
            "--set",
            dest="set_name",
            required=True,
            metavar="NAME",
            help="task set name (created if new; rows are added or updated by task_id)",
        )
        imp.add_argument(
            "--owner",
            default=None,
            metavar="USERNAME",
            help="owner of the set (default: the first superuser)",
        )
        imp.add_argument("--shared", action="store_true", help="let every user see and use the set")
        imp.add_argument(
            "--format", default="", choices=["", *FORMATS], help="default: from the extension"
        )
        imp.add_argument(
            "--dry-run",
            action="store_true",
            help="print the preview report (JSON) and write nothing",
        )
        for name in FieldMapping.names():
            flag = name.replace("_", "-")
            imp.add_argument(
                f"--{flag}-field",
                f"--{flag}-column",
                dest=f"{name}_field",
                default="",
                metavar="FIELD",
                help=f"source field (key or CSV column) holding {name} (default: a usual name)",
            )
        split = subparsers.add_parser("split", help="deal every task of a set into splits, seeded")
        for cmd in (imp, split):
            cmd.add_argument(
                "--split-ratios",
                default="",
                metavar="train=R,val=R[,holdout=R]",
                help="how rows without a split are dealt (default: by the rule, "
                f"train/val/holdout {rule_text()}; a split not named gets 0)",
            )
            cmd.add_argument(
                "--split-seed",
                type=int,
                default=0,
                metavar="N",
                help="the same seed gives the same split",
            )
        split.add_argument("set_ref", metavar="SET", help="task set name or id")
        split.add_argument(
            "--owner",
            default=None,
            metavar="USERNAME",
            help="find the set among those this user can see (default: the first superuser)",
        )
        exp = subparsers.add_parser("export", help="write a task set as JSONL")
        exp.add_argument("set_ref", metavar="SET", help="task set name or id")
        exp.add_argument(
            "--owner",
            default=None,
            metavar="USERNAME",
            help="find the set among those this user can see (default: the first superuser)",
        )
        exp.add_argument("--out", default="-", metavar="FILE", help="default: standard output")

    def handle(self, *args: Any, subcommand: str, **options: Any) -> None:
        getattr(self, f"_{subcommand}")(options)

    def _task_set(self, options: dict[str, Any]) -> TaskSet:
        owner = command_owner(options["owner"])
        ref = options["set_ref"]
        sets = TaskSet.objects.visible_to(owner)
        task_set = sets.filter(name=ref).first() or (
            sets.filter(pk=int(ref)).first() if ref.isdigit() else None
        )
        if task_set is None:
            raise CommandError(f"SET: no task set named or numbered {ref!r}", returncode=2)
        return task_set

    def _import(self, options: dict[str, Any]) -> None:
        path = Path(options["file"])
        mapping = FieldMapping(
            **{name: options[f"{name}_field"].strip() for name in FieldMapping.names()}
        )
        default_split = _default_split(options)
        owner = command_owner(options["owner"])
        try:
            with path.open("rb") as handle:
                if options["dry_run"]:
                    preview = taskset_import_preview(
                        owner=owner,
                        name=options["set_name"],
                        filename=path.name,
                        content=handle,
                        fmt=options["format"],
                        mapping=mapping,
                        default_split=default_split,
                        page_size=5,
                    )
                else:
                    task_set, counts = taskset_import(
                        owner=owner,
                        name=options["set_name"],
                        filename=path.name,
                        content=handle,
                        fmt=options["format"],
                        mapping=mapping,
                        default_split=default_split,
                        shared=options["shared"] or None,
                    )
        except OSError as exc:
            raise CommandError(f"{path}: cannot be read ({exc.strerror})", returncode=2) from None
        except SpecError as exc:
            raise CommandError(
                "nothing imported:\n" + "\n".join(exc.problems), returncode=2
            ) from None
        if options["dry_run"]:
            self.stdout.write(json.dumps(preview.as_json(), ensure_ascii=False, indent=2))
            if not preview.ok:
                raise CommandError(
                    "dry run: the import would be refused:\n" + "\n".join(preview.problems),
                    returncode=2,
                )
            self.stderr.write(
                f"dry run: nothing written; {preview.report.total} rows would give "
                f"{preview.counts['created']} created, {preview.counts['updated']} updated, "
                f"{preview.counts['unchanged']} unchanged; {preview.split_rule}"
            )
            return
        self.stdout.write(
            f"Imported {path.name} into task set {task_set.name!r} (id {task_set.pk}): "
            f"{counts['created']} created, {counts['updated']} updated, {counts['unchanged']} unchanged; "
            f"{counts.split_rule}"
        )

    def _export(self, options: dict[str, Any]) -> None:
        task_set = self._task_set(options)
        if options["out"] == "-":
            for line in taskset_export_lines(task_set=task_set):
                self.stdout.write(line, ending="")
            return
        with open(options["out"], "w", encoding="utf-8") as out:
            out.writelines(taskset_export_lines(task_set=task_set))
        self.stderr.write(
            f"wrote {task_set.tasks.count()} tasks of {task_set.name!r} to {options['out']}"
        )

    def _split(self, options: dict[str, Any]) -> None:
        task_set = self._task_set(options)
        default_split = _default_split(options)
        counts = taskset_split(
            task_set=task_set, ratios=default_split.ratios, seed=default_split.seed
        )
        self.stdout.write(
            f"Split {task_set.name!r} {default_split.describe(sum(counts.values()))}: "
            + ", ".join(f"{n} {s}" for s, n in counts.items())
        )
