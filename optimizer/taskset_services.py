"""Writes to task sets: import (all-or-nothing), edit one task, assign splits."""

from __future__ import annotations

import math
import random

from django.db import transaction

from optimizer.models import Split, Task, TaskSet
from optimizer.tasksets import CsvMapping, parse_task_file
from verifiers_app.engine import SpecError, validate_task
from verifiers_app.storable import storage_problems, without_nul

_ROW_FIELDS = ("input", "expected", "params", "metadata", "verifier", "split")


@transaction.atomic
def taskset_import(
    *, owner, name: str, filename: str, content: bytes | str, fmt: str = "",
    mapping: CsvMapping | None = None, shared: bool | None = None,
) -> tuple[TaskSet, dict[str, int]]:
    """Import a task file into the owner's set `name` (created if new): rows are
    added or updated by task_id, other tasks are kept. All or nothing: any
    problem raises `SpecError` before a single row is written. Returns the set
    and counts {"created", "updated", "unchanged"}."""
    name = name.strip()
    if not name:
        raise SpecError("name: a task set needs a name")
    if len(name) > 200:
        raise SpecError("name: at most 200 characters")
    problems = storage_problems(name, "name")
    if problems:
        raise SpecError(problems)
    rows = parse_task_file(filename, content, fmt=fmt, mapping=mapping)
    task_set, _ = TaskSet.objects.get_or_create(owner=owner, name=name)
    # Lock the set: two imports into it at once (a double submit) would both see a
    # task_id as new and the second insert would fail on the unique constraint.
    task_set = TaskSet.objects.select_for_update().get(pk=task_set.pk)
    if shared is not None and task_set.shared != shared:
        task_set.shared = shared
        task_set.save(update_fields=["shared", "updated_at"])
    existing = {task.task_id: task for task in task_set.tasks.all()}
    position = max((task.position for task in existing.values()), default=-1) + 1
    counts = {"created": 0, "updated": 0, "unchanged": 0}
    for row in rows:
        task = existing.get(row["task_id"])
        if task is None:
            Task.objects.create(task_set=task_set, task_id=row["task_id"], position=position,
                                **{f: row[f] for f in _ROW_FIELDS})
            position += 1
            counts["created"] += 1
        elif any(getattr(task, f) != row[f] for f in _ROW_FIELDS):
            for f in _ROW_FIELDS:
                setattr(task, f, row[f])
            task.save()
            counts["updated"] += 1
        else:
            counts["unchanged"] += 1
    if counts["created"] or counts["updated"]:
        task_set.save(update_fields=["updated_at"])
    return task_set, counts


def task_update(*, task: Task, input: str, expected, params: dict, metadata: dict, verifier: dict | None, split: str) -> Task:
    """Save an edited task after the same checks as an import (`SpecError` naming the field)."""
    if not isinstance(input, str) or not input.strip():
        raise SpecError("input: must be non-empty text")
    if split not in Split.values:
        raise SpecError(f"split: must be one of {', '.join(Split.values)}")
    row = {"task_id": task.task_id, "input": input, "expected": expected, "params": params,
           "metadata": metadata, "verifier": verifier, "split": split}
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
    return task_set.tasks.filter(task_id__in=[without_nul(t) for t in task_ids]).exclude(split=split).update(split=split)


@transaction.atomic
def taskset_split(*, task_set: TaskSet, ratios: dict[str, float], seed: int) -> dict[str, int]:
    """Shuffle the tasks with `seed` and deal them into splits by `ratios`
    (e.g. {"train": 0.6, "val": 0.4}); the same seed gives the same split.
    Returns how many tasks each split got."""
    unknown = set(ratios) - set(Split.values)
    if unknown:
        raise SpecError(f"ratios: unknown split {sorted(unknown)[0]!r}; use {', '.join(Split.values)}")
    if any(not isinstance(r, (int, float)) or not math.isfinite(r) or r < 0 for r in ratios.values()) or sum(ratios.values()) <= 0:
        raise SpecError("ratios: each ratio must be a number ≥ 0 and they must not all be 0")
    tasks = list(task_set.tasks.order_by("position", "id"))
    random.Random(seed).shuffle(tasks)
    total, names = sum(ratios.values()), [s for s in Split.values if ratios.get(s, 0) > 0]
    counts, start = {}, 0
    for i, split in enumerate(names):
        # The last split takes the remainder, so rounding never drops a task.
        end = len(tasks) if i == len(names) - 1 else start + round(len(tasks) * ratios[split] / total)
        ids = [t.pk for t in tasks[start:end]]
        Task.objects.filter(pk__in=ids).update(split=split)
        counts[split] = len(ids)
        start = end
    return counts
