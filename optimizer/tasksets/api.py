"""/api/tasksets: import (or dry-run) a task file, list sets, get one set with
its tasks, export it as JSONL, duplicate and delete it."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from ninja import Field, Router, Schema, Status

from dashboard.lib.api_errors import ErrorOut, Problem
from dashboard.lib.authenticated import AuthenticatedHttpRequest
from dashboard.lib.storable import without_nul
from optimizer.selectors import taskset_for_user, taskset_list
from optimizer.tasksets.files import (
    MAX_FILE_BYTES,
    SPLITS,
    DefaultSplit,
    FieldMapping,
)
from optimizer.tasksets.services import (
    taskset_delete,
    taskset_duplicate,
    taskset_export_lines,
    taskset_import,
    taskset_import_preview,
)
from verifiers_app.engine.json_types import JSONObject

if TYPE_CHECKING:
    from optimizer.selectors import CountedTaskSet

router = Router()
#: Rows a task set can hold is far below this; a larger offset reads as "past the end"
#: (an offset beyond 2**63 - 1 was a database error, a 500).
MAX_OFFSET = 2**31 - 1


class MappingIn(Schema):
    """Source field (JSON/YAML key or CSV column) of each task field; empty = the usual names."""

    task_id: str = ""
    input: str = ""
    instruction: str = ""
    expected: str = ""
    split: str = ""


class DefaultSplitIn(Schema):
    """How rows without a split are dealt (seeded). No ratio given: by the rule,
    train/val/holdout 50/30/20 from 10 rows to deal, 60/40/0 below; once one
    ratio is given, a missing one is 0."""

    train: float | None = None
    val: float | None = None
    holdout: float | None = None
    seed: int = 0


class ImportIn(Schema):
    name: str = Field(
        ..., description="Task set name (created if new; rows are added or updated by task_id)"
    )
    filename: str = Field(
        ..., description="Its extension picks the format: .jsonl, .json, .yaml/.yml, .csv or .tsv"
    )
    content: str = Field(..., max_length=MAX_FILE_BYTES)
    format: Literal["jsonl", "json", "yaml", "csv", "tsv", ""] = ""
    mapping: MappingIn | None = None
    default_split: DefaultSplitIn | None = None
    shared: bool | None = None
    dry_run: bool = Field(False, description="Return the preview report (200) and write nothing")
    page: int = Field(1, description="dry_run: which page of preview rows")
    page_size: int = Field(20, description="dry_run: preview rows per page (at most 200)")


class PreviewRowOut(Schema):
    line: int
    task_id: str
    input: str
    expected: Any = None
    params: JSONObject
    metadata: JSONObject
    verifier: JSONObject | None = None
    split: str


class DefaultSplitOut(Schema):
    ratios: dict[str, float] = Field(..., description="the ratios that deal the rows")
    by_rule: bool = Field(
        ..., description="true: no ratios were given, the default rule chose them"
    )
    rule: str = Field(..., description="how the rows without a split are dealt, in words")
    seed: int
    rows: int = Field(..., description="rows of the file without a split")
    dealt: dict[str, int] = Field(..., description="how the new ones among them were dealt")


class ImportPreviewOut(Schema):
    """What the import would do; nothing is written."""

    ok: bool
    name: str
    filename: str
    format: str
    delimiter: str
    columns: list[str]
    rows_total: int
    mapping: dict[str, list[str]] = Field(
        ..., description="task field → the source fields it was read from"
    )
    problems: list[Problem]
    kept_in_metadata: list[str]
    read_by: dict[str, str] = Field(
        ...,
        description="stored task field the rows carry → what reads it when a run scores an "
        "output (expected: only row verifiers); a dry run of a launch warns when no chosen "
        "verifier reads it",
    )
    created: int
    updated: int
    unchanged: int
    split_counts: dict[str, int]
    default_split: DefaultSplitOut
    page: int
    page_size: int
    pages: int
    rows: list[PreviewRowOut]


class ImportOut(Schema):
    id: int
    name: str
    created: int
    updated: int
    unchanged: int
    split_rule: str = Field("", description="how the rows without a split were dealt, in words")


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
    params: JSONObject
    metadata: JSONObject
    verifier: JSONObject | None
    split: str


class TaskSetDetail(TaskSetOut):
    tasks: list[TaskOut]


def _out(ts: CountedTaskSet) -> JSONObject:
    return {
        "id": ts.pk,
        "name": ts.name,
        "description": ts.description,
        "owner": ts.owner.get_username(),
        "shared": ts.shared,
        "task_count": ts.task_count,
        "updated_at": ts.updated_at,
    }


def _visible(request: AuthenticatedHttpRequest) -> QuerySet[CountedTaskSet]:
    return taskset_list(user=request.user)


@router.post("/import", response={201: ImportOut, 200: ImportPreviewOut})
def import_tasks(request: AuthenticatedHttpRequest, body: ImportIn) -> Status[JSONObject]:
    """All or nothing: a 400 lists every problem as `<file> line N: field: message`.
    With `dry_run`, a 200 with the preview report (`ok`, `problems`, counts,
    `split_counts`, the mapping used, one page of `rows` as they would be stored)."""
    mapping = FieldMapping(**body.mapping.dict()) if body.mapping else None
    default_split = None
    if body.default_split:
        split = body.default_split.dict()
        given = {s: split[s] for s in SPLITS}
        default_split = DefaultSplit(
            ratios=None
            if all(r is None for r in given.values())
            else {s: r or 0.0 for s, r in given.items()},
            seed=split["seed"],
        )
    args: dict[str, Any] = {
        "owner": request.user,
        "name": body.name,
        "filename": body.filename,
        "content": body.content,
        "fmt": body.format,
        "mapping": mapping,
        "default_split": default_split,
    }
    if body.dry_run:
        return Status(
            200, taskset_import_preview(**args, page=body.page, page_size=body.page_size).as_json()
        )
    task_set, counts = taskset_import(**args, shared=body.shared)
    return Status(
        201,
        {"id": task_set.pk, "name": task_set.name, **counts, "split_rule": counts.split_rule},
    )


@router.get("/", response=list[TaskSetOut])
def list_tasksets(request: AuthenticatedHttpRequest, q: str = "") -> list[JSONObject]:
    sets = _visible(request)
    q = without_nul(q)
    if q:
        sets = sets.filter(name__icontains=q)
    return [_out(ts) for ts in sets]


@router.get("/{int:taskset_id}", response=TaskSetDetail)
def get_taskset(
    request: AuthenticatedHttpRequest,
    taskset_id: int,
    split: str = "",
    limit: int = 1000,
    offset: int = 0,
) -> JSONObject:
    """One task set with its tasks (optionally one split), `limit` (at most 5000) rows from `offset`."""
    limit, offset = min(max(limit, 1), 5000), min(max(offset, 0), MAX_OFFSET)
    task_set = taskset_for_user(request.user, taskset_id)
    tasks = task_set.tasks.all()
    if split:
        tasks = tasks.filter(split=without_nul(split))
    rows = [
        {**t.as_row(), "verifier": t.verifier, "split": t.split}
        for t in tasks[offset : offset + limit]
    ]
    return {**_out(task_set), "tasks": rows}


@router.get("/{int:taskset_id}/export.jsonl")
def export_taskset(request: AuthenticatedHttpRequest, taskset_id: int) -> StreamingHttpResponse:
    """The set as JSONL (one task per line, in order); importing it gives an identical set."""
    task_set = taskset_for_user(request.user, taskset_id)
    response = StreamingHttpResponse(
        taskset_export_lines(task_set=task_set), content_type="application/x-ndjson"
    )
    response["Content-Disposition"] = f'attachment; filename="taskset-{task_set.pk}.jsonl"'
    return response


class DuplicateIn(Schema):
    name: str = Field("", description='Name of the copy (default: "<name> (copy)")')


@router.post("/{int:taskset_id}/duplicate", response={201: TaskSetOut})
def duplicate_taskset(
    request: AuthenticatedHttpRequest, taskset_id: int, body: DuplicateIn
) -> Status[JSONObject]:
    """A private copy (yours) of a set you can see, with every task."""
    task_set = taskset_for_user(request.user, taskset_id)
    copy = taskset_duplicate(task_set=task_set, owner=request.user, name=body.name)
    return Status(201, _out(_visible(request).get(pk=copy.pk)))


@router.delete("/{int:taskset_id}", response={204: None, 409: ErrorOut})
def delete_taskset(request: AuthenticatedHttpRequest, taskset_id: int) -> Status[None]:
    """Delete a set you own; 409 while a queued or running run uses it."""
    task_set = taskset_for_user(request.user, taskset_id, edit=True)
    taskset_delete(task_set=task_set)
    return Status(204, None)
