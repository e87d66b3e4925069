"""/api/tasksets: import a task file, list sets, get one set with its tasks."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal


from django.shortcuts import get_object_or_404
from ninja import Field, Router, Schema, Status

from optimizer.models import TaskSet
from optimizer.selectors import taskset_list
from optimizer.taskset_services import taskset_import
from optimizer.tasksets import MAX_FILE_BYTES, CsvMapping
from verifiers_app.storable import without_nul

router = Router()
#: Rows a task set can hold is far below this; a larger offset reads as "past the end"
#: (an offset beyond 2**63 - 1 was a database error, a 500).
MAX_OFFSET = 2**31 - 1


class CsvMappingIn(Schema):
    input: str = ""
    task_id: str = ""
    expected: str = ""
    split: str = ""
    metadata: list[str] = []


class ImportIn(Schema):
    name: str = Field(..., description="Task set name (created if new; rows are added or updated by task_id)")
    filename: str = Field(..., description="Its extension picks the format: .jsonl, .yaml/.yml or .csv")
    content: str = Field(..., max_length=MAX_FILE_BYTES)
    format: Literal["jsonl", "yaml", "csv", ""] = ""
    mapping: CsvMappingIn | None = None
    shared: bool | None = None


class ImportOut(Schema):
    id: int
    name: str
    created: int
    updated: int
    unchanged: int


class TaskSetOut(Schema):
    id: int
    name: str
    description: str
    owner: str
    shared: bool
    task_count: int
    updated_at: datetime


class TaskOut(Schema):
    task_id: str
    input: str
    expected: Any
    params: dict
    metadata: dict
    verifier: dict | None
    split: str


class TaskSetDetail(TaskSetOut):
    tasks: list[TaskOut]


def _out(ts: TaskSet) -> dict:
    return {"id": ts.pk, "name": ts.name, "description": ts.description, "owner": ts.owner.get_username(),
            "shared": ts.shared, "task_count": ts.task_count, "updated_at": ts.updated_at}


def _visible(request):
    return taskset_list(user=request.user)


@router.post("/import", response={201: ImportOut})
def import_tasks(request, body: ImportIn):
    """All or nothing: a 400 lists every problem as `<file> line N: field: message`."""
    mapping = CsvMapping(**{**body.mapping.dict(), "metadata": tuple(body.mapping.metadata)}) if body.mapping else None
    task_set, counts = taskset_import(owner=request.user, name=body.name, filename=body.filename,
                                      content=body.content, fmt=body.format, mapping=mapping, shared=body.shared)
    return Status(201, {"id": task_set.pk, "name": task_set.name, **counts})


@router.get("/", response=list[TaskSetOut])
def list_tasksets(request, q: str = ""):
    sets = _visible(request)
    q = without_nul(q)
    if q:
        sets = sets.filter(name__icontains=q)
    return [_out(ts) for ts in sets]


@router.get("/{int:taskset_id}", response=TaskSetDetail)
def get_taskset(request, taskset_id: int, split: str = "", limit: int = 1000, offset: int = 0):
    """One task set with its tasks (optionally one split), `limit` (at most 5000) rows from `offset`."""
    limit, offset = min(max(limit, 1), 5000), min(max(offset, 0), MAX_OFFSET)
    task_set = get_object_or_404(_visible(request), pk=taskset_id)
    tasks = task_set.tasks.all()
    if split:
        tasks = tasks.filter(split=without_nul(split))
    rows = [{**t.as_row(), "verifier": t.verifier, "split": t.split} for t in tasks[offset:offset + limit]]
    return {**_out(task_set), "tasks": rows}
