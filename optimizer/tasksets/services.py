"""Writes to task sets: preview and import (all-or-nothing), export, duplicate,
delete, edit one task, assign splits."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

from django.db import transaction

from dashboard.lib.api_errors import split_problem
from dashboard.lib.storable import storage_problems, without_nul
from optimizer.models import Run
from optimizer.tasksets.files import (
    DefaultSplit,
    FieldMapping,
    ScanReport,
    TaskFile,
    deal_splits,
    iter_task_rows,
    scan_task_file,
)
from optimizer.tasksets.models import Split, Task, TaskSet
from verifiers_app.engine import SpecError, validate_task
from verifiers_app.engine.json_types import JSONObject

if TYPE_CHECKING:
    from django.contrib.auth.models import User

#: The rows of a set by task_id: (primary key, the row's stored fields).
ExistingRows = dict[str, tuple[int, JSONObject]]

_ROW_FIELDS = ("input", "expected", "params", "metadata", "verifier", "split")
_WRITE_BATCH = 1000


@dataclass
class ImportPreview:
    """An import as it would happen: the scan report plus what it would do to
    the set `name` (new / updated / unchanged) and the final split of every row."""

    name: str
    report: ScanReport
    default_split: DefaultSplit
    problems: list[str]
    counts: dict[str, int] = field(
        default_factory=lambda: {"created": 0, "updated": 0, "unchanged": 0}
    )
    split_counts: dict[str, int] = field(default_factory=dict)  # rows of the file, by final split
    dealt_counts: dict[str, int] = field(
        default_factory=dict
    )  # rows that had no split, by dealt split
    rows: list[JSONObject] = field(default_factory=list)  # the requested page, as stored
    page: int = 1
    page_size: int = 20
    _dealt: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def dealt_rows(self) -> int:
        """Rows the default split deals: new rows without a split (existing ones keep theirs)."""
        return sum(self.dealt_counts.values())

    @property
    def split_rule(self) -> str:
        """How the rows without a split are dealt, in words, with what they got."""
        return split_statement(self.default_split, self.dealt_counts)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def pages(self) -> int:
        return max(1, -(-self.report.total // self.page_size))

    def as_json(self) -> JSONObject:
        r = self.report
        return {
            "ok": self.ok,
            "name": self.name,
            "filename": r.filename,
            "format": r.format,
            "delimiter": r.delimiter,
            "columns": r.columns,
            "rows_total": r.total,
            "mapping": r.mapping,
            # The API's problem shape: "<file> line N" as the field, the rest as the message.
            "problems": [dict(zip(("field", "message"), split_problem(p))) for p in self.problems],
            "kept_in_metadata": r.kept_in_metadata,
            "read_by": r.read_by,
            **self.counts,
            "split_counts": self.split_counts,
            "default_split": {
                "ratios": self.default_split.ratios_for(self.dealt_rows),
                "by_rule": self.default_split.by_rule,
                "seed": self.default_split.seed,
                "rows": len(r.unsplit_ids),
                "dealt": self.dealt_counts,
                "rule": self.split_rule,
            },
            "page": self.page,
            "page_size": self.page_size,
            "pages": self.pages,
            "rows": self.rows,
        }


def split_statement(default_split: DefaultSplit, dealt: dict[str, int]) -> str:
    """ "4 rows without a split dealt by the rule: 60/40/0 below 10 rows, seed 0
    (2 train, 2 val)", or that there was no row to deal."""
    rows = sum(dealt.values())
    if not rows:
        return "no row to deal: each names its split or keeps the one it has"
    counts = ", ".join(f"{n} {s}" for s, n in dealt.items() if n)
    return (
        f"{rows} row{'s' if rows != 1 else ''} without a split dealt "
        f"{default_split.describe(rows)} ({counts})"
    )


class ImportCounts(dict[str, int]):
    """{"created", "updated", "unchanged"}, and in `split_rule` how the rows
    without a split were dealt (`split_statement`)."""

    split_rule: str = ""


def _check_name(name: str) -> tuple[str, list[str]]:
    name = name.strip()
    if not name:
        return name, ["name: a task set needs a name"]
    if len(name) > 200:
        return name, ["name: at most 200 characters"]
    return name, storage_problems(name, "name")


def _existing_rows(task_set: TaskSet | None) -> ExistingRows:
    if task_set is None:
        return {}
    return {
        t["task_id"]: (t.pop("id"), t) for t in task_set.tasks.values("id", "task_id", *_ROW_FIELDS)
    }


def _plan(
    *,
    owner: User,
    name: str,
    task_file: TaskFile,
    fmt: str,
    mapping: FieldMapping | None,
    default_split: DefaultSplit | None,
    page: int = 1,
    page_size: int = 20,
) -> tuple[ImportPreview, ExistingRows]:
    """The first pass: scan the file, compare with the owner's set `name`, deal
    the rows without a split. Nothing is written."""
    name, problems = _check_name(name)
    default_split = default_split or DefaultSplit()
    page, page_size = max(1, page), min(max(1, page_size), 200)
    # A name with a problem (a NUL, which PostgreSQL refuses even in a query) names no set.
    existing = _existing_rows(
        TaskSet.objects.filter(owner=owner, name=name).first() if name and not problems else None
    )
    counts = {"created": 0, "updated": 0, "unchanged": 0}

    def visit(row: JSONObject) -> None:
        old = existing.get(row["task_id"])
        if old is None:
            counts["created"] += 1
            return
        # An existing task keeps its split when the file names none.
        same = all(
            old[1][f] == (row[f] if f != "split" or row[f] is not None else old[1]["split"])
            for f in _ROW_FIELDS
        )
        counts["unchanged" if same else "updated"] += 1

    report = scan_task_file(
        task_file, fmt=fmt, mapping=mapping, page=((page - 1) * page_size, page_size), visit=visit
    )
    preview = ImportPreview(
        name,
        report,
        default_split,
        problems + report.problem_lines(),
        page=page,
        page_size=page_size,
    )
    new_unsplit = [task_id for task_id in report.unsplit_ids if task_id not in existing]
    dealt = deal_splits(new_unsplit, default_split.ratios_for(len(new_unsplit)), default_split.seed)
    preview._dealt = {task_id: split for split, ids in dealt.items() for task_id in ids}
    preview.dealt_counts = {split: len(ids) for split, ids in dealt.items() if ids}
    kept = Counter(existing[t][1]["split"] for t in report.unsplit_ids if t in existing)
    preview.split_counts = {
        s: report.split_counts.get(s, 0) + preview.dealt_counts.get(s, 0) + kept.get(s, 0)
        for s in Split.values
    }
    preview.counts = counts
    preview.rows = [
        {**row, "split": _final_split(row, preview._dealt, existing)} for row in report.page_rows
    ]
    return preview, existing


def _final_split(row: JSONObject, dealt: dict[str, str], existing: ExistingRows) -> str:
    split: str | None = row["split"]
    if split is not None:
        return split
    if row["task_id"] in existing:
        existing_split: str = existing[row["task_id"]][1]["split"]
        return existing_split
    # Dealt in the check pass; a task deleted from the set since then lands in train.
    return dealt.get(row["task_id"], Split.TRAIN)


def taskset_import_preview(
    *,
    owner: User,
    name: str,
    filename: str,
    content: bytes | str | BinaryIO,
    fmt: str = "",
    mapping: FieldMapping | None = None,
    default_split: DefaultSplit | None = None,
    page: int = 1,
    page_size: int = 20,
) -> ImportPreview:
    """What `taskset_import` would do with the same arguments, without writing:
    rows `page` as they would be stored, counts, every problem by line and field."""
    return _plan(
        owner=owner,
        name=name,
        task_file=TaskFile(filename, content),
        fmt=fmt,
        mapping=mapping,
        default_split=default_split,
        page=page,
        page_size=page_size,
    )[0]


@transaction.atomic
def taskset_import(
    *,
    owner: User,
    name: str,
    filename: str,
    content: bytes | str | BinaryIO,
    fmt: str = "",
    mapping: FieldMapping | None = None,
    default_split: DefaultSplit | None = None,
    shared: bool | None = None,
) -> tuple[TaskSet, ImportCounts]:
    """Import a task file into the owner's set `name` (created if new): rows are
    added or updated by task_id, other tasks are kept; new rows without a split
    are dealt by `default_split` (by default the rule of `rule_ratios`), existing
    ones keep theirs. All or nothing: any problem raises `SpecError` before a
    single row is written. Two passes over the file (check, then write in
    batches), so memory stays bounded. Returns the set and counts {"created",
    "updated", "unchanged"} saying in `split_rule` how rows were dealt."""
    task_file = TaskFile(filename, content)
    preview, _ = _plan(
        owner=owner,
        name=name,
        task_file=task_file,
        fmt=fmt,
        mapping=mapping,
        default_split=default_split,
        page_size=1,
    )
    if preview.problems:
        raise SpecError(preview.problems)
    task_set, _ = TaskSet.objects.get_or_create(owner=owner, name=preview.name)
    # Lock the set: two imports into it at once (a double submit) would both see a
    # task_id as new and the second insert would fail on the unique constraint.
    task_set = TaskSet.objects.select_for_update().get(pk=task_set.pk)
    if shared is not None and task_set.shared != shared:
        task_set.shared = shared
        task_set.save(update_fields=["shared", "updated_at"])
    existing = _existing_rows(task_set)  # again, under the lock
    position = task_set.tasks.order_by("-position").values_list("position", flat=True).first()
    position = -1 if position is None else position
    counts = ImportCounts(created=0, updated=0, unchanged=0)
    counts.split_rule = preview.split_rule
    new: list[Task] = []
    changed: list[Task] = []
    for row in iter_task_rows(task_file, fmt=fmt, mapping=mapping):
        row["split"] = _final_split(row, preview._dealt, existing)
        old = existing.get(row["task_id"])
        if old is None:
            position += 1
            new.append(
                Task(
                    task_set=task_set,
                    task_id=row["task_id"],
                    position=position,
                    **{f: row[f] for f in _ROW_FIELDS},
                )
            )
            counts["created"] += 1
        elif any(old[1][f] != row[f] for f in _ROW_FIELDS):
            changed.append(Task(pk=old[0], **{f: row[f] for f in _ROW_FIELDS}))
            counts["updated"] += 1
        else:
            counts["unchanged"] += 1
        if len(new) >= _WRITE_BATCH:
            Task.objects.bulk_create(new)
            new = []
        if len(changed) >= _WRITE_BATCH:
            Task.objects.bulk_update(changed, _ROW_FIELDS)
            changed = []
    Task.objects.bulk_create(new)
    Task.objects.bulk_update(changed, _ROW_FIELDS)
    if counts["created"] or counts["updated"]:
        task_set.save(update_fields=["updated_at"])
    return task_set, counts


def taskset_export_lines(*, task_set: TaskSet) -> Iterator[str]:
    """The set as JSONL, one task per line in order, each row as the importer
    reads it back (empty fields left out), so re-importing gives an identical set."""
    for task in task_set.tasks.order_by("position", "id").iterator(chunk_size=_WRITE_BATCH):
        row: JSONObject = {"task_id": task.task_id, "input": task.input}
        if task.expected is not None:
            row["expected"] = task.expected
        for name in ("params", "metadata", "verifier"):
            if getattr(task, name):
                row[name] = getattr(task, name)
        row["split"] = task.split
        yield json.dumps(row, ensure_ascii=False) + "\n"


@transaction.atomic
def taskset_duplicate(*, task_set: TaskSet, owner: User, name: str = "") -> TaskSet:
    """A private copy of a set the owner can see, with every task; named
    "<name> (copy)" (then "(copy 2)" …) unless `name` is given."""
    name, problems = _check_name(name or f"{task_set.name} (copy)")
    if problems:
        raise SpecError(problems)
    base, number = name, 1
    while TaskSet.objects.filter(owner=owner, name=name).exists():
        number += 1
        name = (
            f"{base.removesuffix(' (copy)')} (copy {number})"
            if base.endswith(" (copy)")
            else f"{base} ({number})"
        )
    copy = TaskSet.objects.create(owner=owner, name=name[:200], description=task_set.description)
    batch = []
    for task in task_set.tasks.order_by("position", "id").iterator(chunk_size=_WRITE_BATCH):
        batch.append(
            Task(
                task_set=copy,
                task_id=task.task_id,
                position=task.position,
                **{f: getattr(task, f) for f in _ROW_FIELDS},
            )
        )
        if len(batch) >= _WRITE_BATCH:
            Task.objects.bulk_create(batch)
            batch = []
    Task.objects.bulk_create(batch)
    return copy


class TaskSetInUse(SpecError):
    """The set is used by a run that has not finished."""


@transaction.atomic
def taskset_delete(*, task_set: TaskSet) -> None:
    """Delete a set and its tasks; refused while a queued or running run uses it.
    Finished runs keep their frozen `tasks_snapshot` (and lose only the link)."""
    task_set = TaskSet.objects.select_for_update().get(pk=task_set.pk)
    active = list(Run.objects.filter(task_set=task_set).active().values_list("pk", flat=True)[:5])
    if active:
        raise TaskSetInUse(
            f"task set: used by active run{'s' if len(active) > 1 else ''} "
            f"{', '.join(f'#{pk}' for pk in active)}; stop {'them' if len(active) > 1 else 'it'} first"
        )
    task_set.delete()


def task_update(
    *,
    task: Task,
    input: str,
    expected: Any,
    params: JSONObject,
    metadata: JSONObject,
    verifier: JSONObject | None,
    split: str,
) -> Task:
    """Save an edited task after the same checks as an import (`SpecError` naming the field)."""
    if not isinstance(input, str) or not input.strip():
        raise SpecError("input: must be non-empty text")
    if split not in Split.values:
        raise SpecError(f"split: must be one of {', '.join(Split.values)}")
    row = {
        "task_id": task.task_id,
        "input": input,
        "expected": expected,
        "params": params,
        "metadata": metadata,
        "verifier": verifier,
        "split": split,
    }
    for name in ("params", "metadata"):
        if not isinstance(row[name], dict):
            raise SpecError(f"{name}: must be a JSON object")
    validate_task(row)
    problems = [p for f in _ROW_FIELDS for p in storage_problems(row[f], f)]
    if problems:
        raise SpecError(problems)
    for f in _ROW_FIELDS:
        setattr(task, f, row[f])
    task.save()
    return task


@transaction.atomic
def taskset_assign_split(*, task_set: TaskSet, task_ids: list[str], split: str) -> int:
    """Put the named tasks in `split` by hand; returns how many changed."""
    if split not in Split.values:
        raise SpecError(f"split: must be one of {', '.join(Split.values)}")
    return (
        task_set.tasks.filter(task_id__in=[without_nul(t) for t in task_ids])
        .exclude(split=split)
        .update(split=split)
    )


@transaction.atomic
def taskset_split(
    *, task_set: TaskSet, ratios: dict[str, float] | None, seed: int
) -> dict[str, int]:
    """Shuffle the tasks with `seed` and deal them into splits by `ratios`
    (e.g. {"train": 0.6, "val": 0.4}; None: by the default rule for this many
    tasks); the same seed gives the same split. Returns how many tasks each split got."""
    tasks = list(task_set.tasks.order_by("position", "id").values_list("pk", flat=True))
    counts: dict[str, int] = {}
    chosen = DefaultSplit(ratios, seed).ratios_for(len(tasks))
    for split, ids in deal_splits(tasks, chosen, seed).items():
        for start in range(0, len(ids), _WRITE_BATCH):
            Task.objects.filter(pk__in=ids[start : start + _WRITE_BATCH]).update(split=split)
        counts[split] = len(ids)
    return counts
