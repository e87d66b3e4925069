"""Task-set pages: browse (paginated, searchable), import (upload → preview →
confirm), export, duplicate, delete, view and edit one task, assign splits by
hand or by a seeded random split."""

from __future__ import annotations

import json

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from dashboard.forms import (
    AssignSplitForm,
    SplitForm,
    TaskForm,
    TaskImportConfirmForm,
    TaskImportForm,
    TaskImportUploadForm,
)
from dashboard.lib.storable import without_nul
from optimizer import selectors
from optimizer.downloads import streaming_download
from optimizer.import_uploads import upload_discard, upload_keep, upload_path
from optimizer.tasksets.files import (
    DEFAULT_SOURCES,
    FORMATS,
    MAX_FILE_BYTES,
    DefaultSplit,
    FieldMapping,
    rule_text,
)
from optimizer.tasksets.models import Split, Task, TaskSet
from optimizer.tasksets.services import (
    TaskSetInUse,
    task_update,
    taskset_assign_split,
    taskset_delete,
    taskset_duplicate,
    taskset_export_lines,
    taskset_import,
    taskset_split,
)
from optimizer.tasksets.services import (
    taskset_import_preview as services_import_preview,
)
from verifiers_app.engine import SpecError

SPLITS = Split.values
PREVIEW_PAGE_SIZE = 20


def _can_edit(request, task_set: TaskSet) -> bool:
    return TaskSet.objects.editable_by(request.user).filter(pk=task_set.pk).exists()


def taskset_list(request):
    query = without_nul(request.GET.get("q", "").strip())
    task_sets = selectors.taskset_list(user=request.user)
    if query:
        task_sets = task_sets.filter(Q(name__icontains=query) | Q(description__icontains=query))
    page = Paginator(task_sets, 25).get_page(request.GET.get("page"))
    return render(request, "tasksets/list.html", {"page": page, "query": query})


def _import_options(data) -> tuple[dict, list[str]]:
    """The import options (TaskImportForm) from the import form (GET or POST),
    and the problems reading them, each naming its field."""
    form = TaskImportForm(data)
    if not form.is_valid():
        return TaskImportForm.defaults(), form.problems()
    return form.options(), []


def _form_context(data) -> dict:
    """What the import options fieldset shows (the same on the upload and the preview page)."""
    hints = {name: " / ".join(DEFAULT_SOURCES[name]) for name in FieldMapping.names()}
    return {
        "form": data,
        "formats": FORMATS,
        "mapping_inputs": [
            (name, f"{name}_field", data.get(f"{name}_field", ""), hints[name])
            for name in FieldMapping.names()
        ],
        # Empty inputs: the default rule deals the rows (its words under them).
        "ratio_inputs": [(s, f"default_{s}", data.get(f"default_{s}", "")) for s in SPLITS],
        "split_rule": rule_text(),
    }


def _page_number(data) -> int:
    try:
        return max(1, int(data.get("page") or 1))
    except ValueError:
        return 1


def taskset_import_view(request):
    """Step 1: choose the file and options. The upload is kept aside (not saved)
    and the browser goes to the preview."""
    problems = []
    if request.method == "POST":
        form = TaskImportUploadForm(request.POST, request.FILES, max_bytes=MAX_FILE_BYTES)
        problems = [] if form.is_valid() else form.problems()
        if not problems:
            token = upload_keep(user=request.user, upload=form.cleaned_data["file"])
            query = {
                k: v for k, v in request.POST.items() if k not in ("csrfmiddlewaretoken", "file")
            }
            return redirect(
                f"{reverse('tasksets:import_preview')}?{urlencode({**query, 'token': token})}"
            )
    form = request.POST if request.method == "POST" else request.GET
    return render(
        request,
        "tasksets/import.html",
        {"problems": problems, **_form_context(form)},
        status=400 if problems else 200,
    )


def taskset_import_preview(request):
    """Step 2: the first rows exactly as they will be stored, the mapping, counts
    per split and every problem; change the options and preview again, or confirm.
    Rows are paged on the server (`page`), so a big file never reaches the browser whole."""
    data = request.GET
    token = data.get("token", "")
    options, problems = _import_options(data)
    preview = None
    try:
        filename, path = upload_path(user=request.user, token=token)
        if not problems:
            with open(path, "rb") as handle:
                preview = services_import_preview(
                    owner=request.user,
                    filename=filename,
                    content=handle,
                    page=_page_number(data),
                    page_size=PREVIEW_PAGE_SIZE,
                    **options,
                )
            problems = preview.problems
    except SpecError as exc:
        problems = problems + exc.problems
    query = {k: v for k, v in data.items() if k not in ("page", "csrfmiddlewaretoken")}
    return render(
        request,
        "tasksets/import_preview.html",
        {
            "preview": preview,
            "problems": problems,
            "token": token,
            "query": urlencode(query),
            **_form_context(data),
            "read_by": _read_by(preview) if preview else [],
            "rows": [
                {
                    **row,
                    "expected_json": _json_text(row["expected"]),
                    "params_json": _json_text(row["params"] or None),
                    "metadata_json": _json_text(row["metadata"] or None),
                    "verifier_json": _json_text(row["verifier"]),
                }
                for row in (preview.rows if preview else [])
            ],
        },
        status=400 if problems and preview is None else 200,
    )


def _read_by(preview) -> list[dict]:
    """Each stored field the rows carry, the file's fields it comes from, and what reads it."""
    report = preview.report
    sources = {
        "input": report.mapping.get("instruction", []) + report.mapping.get("input", []),
        "expected": report.mapping.get("expected", []),
        "metadata": report.kept_in_metadata,
    }
    return [
        {"name": name, "sources": sources.get(name, []), "text": text}
        for name, text in report.read_by.items()
    ]


@require_POST
def taskset_import_confirm(request):
    """Step 3: import the kept upload with the options shown in the preview."""
    form = TaskImportConfirmForm(request.POST)
    problems = [] if form.is_valid() else form.problems()
    back = f"{reverse('tasksets:import_preview')}?" + urlencode(
        {k: v for k, v in request.POST.items() if k != "csrfmiddlewaretoken"}
    )
    if problems:
        messages.error(request, "Nothing was imported: " + "; ".join(problems))
        return redirect(back)
    token = form.cleaned_data["token"]
    try:
        filename, path = upload_path(user=request.user, token=token)
        with open(path, "rb") as handle:
            task_set, counts = taskset_import(
                owner=request.user,
                filename=filename,
                content=handle,
                shared=form.cleaned_data["shared"],
                **form.options(),
            )
    except SpecError as exc:
        messages.error(request, "Nothing was imported: " + "; ".join(exc.problems[:3]))
        return redirect(back)
    upload_discard(user=request.user, token=token)
    messages.success(
        request,
        f"Imported {filename} into {task_set.name}: {counts['created']} new, "
        f"{counts['updated']} updated, {counts['unchanged']} unchanged; {counts.split_rule}.",
    )
    return redirect("tasksets:detail", pk=task_set.pk)


def taskset_export(request, pk):
    task_set = selectors.taskset_for_user(request.user, pk)
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in task_set.name)[:80] or "tasks"
    return streaming_download(
        request,
        taskset_export_lines(task_set=task_set),
        content_type="application/x-ndjson",
        filename=f"{safe}.jsonl",
    )


@require_POST
def taskset_duplicate_view(request, pk):
    task_set = selectors.taskset_for_user(request.user, pk)
    try:
        copy = taskset_duplicate(task_set=task_set, owner=request.user)
    except SpecError as exc:
        messages.error(request, f"Not duplicated: {exc}.")
        return redirect("tasksets:detail", pk=pk)
    messages.success(request, f"Duplicated {task_set.name} as {copy.name}.")
    return redirect("tasksets:detail", pk=copy.pk)


@require_POST
def taskset_delete_view(request, pk):
    task_set = selectors.taskset_for_user(request.user, pk, edit=True)
    name = task_set.name
    try:
        taskset_delete(task_set=task_set)
    except TaskSetInUse as exc:
        messages.error(request, f"Not deleted: {exc}.")
        return redirect("tasksets:detail", pk=pk)
    messages.success(request, f"Deleted task set {name}.")
    return redirect("tasksets:list")


def taskset_detail(request, pk):
    task_set = selectors.taskset_for_user(request.user, pk)
    query, split = without_nul(request.GET.get("q", "").strip()), request.GET.get("split", "")
    tasks = task_set.tasks.all()
    if query:
        tasks = tasks.filter(Q(task_id__icontains=query) | Q(input__icontains=query))
    if split in SPLITS:
        tasks = tasks.filter(split=split)
    counts = dict(task_set.tasks.values_list("split").annotate(n=Count("id")))
    return render(
        request,
        "tasksets/detail.html",
        {
            "task_set": task_set,
            "page": Paginator(tasks, 50).get_page(request.GET.get("page")),
            "query": query,
            "split": split,
            "splits": SPLITS,
            "split_counts": [(s, counts.get(s, 0)) for s in SPLITS],
            "split_rule": rule_text(),
            "can_edit": _can_edit(request, task_set),
        },
    )


@require_POST
def taskset_split_view(request, pk):
    task_set = selectors.taskset_for_user(request.user, pk, edit=True)
    form = SplitForm(request.POST)
    try:
        if not form.is_valid():
            raise SpecError(form.problems())
        seed = form.cleaned_data["seed"] or 0
        counts = taskset_split(task_set=task_set, ratios=form.ratios(), seed=seed)
    except SpecError as exc:
        messages.error(request, f"Not split: {exc}.")
    else:
        how = DefaultSplit(form.ratios(), seed).describe(sum(counts.values()))
        messages.success(
            request, f"Split {how}: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + "."
        )
    return redirect("tasksets:detail", pk=pk)


@require_POST
def taskset_assign_view(request, pk):
    task_set = selectors.taskset_for_user(request.user, pk, edit=True)
    form = AssignSplitForm(request.POST)
    try:
        if not form.is_valid():
            raise SpecError(form.problems())
        changed = taskset_assign_split(
            task_set=task_set,
            task_ids=form.cleaned_data["task_ids"],
            split=form.cleaned_data["split"],
        )
    except SpecError as exc:
        messages.error(request, f"Not changed: {exc}.")
    else:
        messages.success(
            request,
            f"Moved {changed} task{'s' if changed != 1 else ''} to {form.cleaned_data['split']}.",
        )
    return redirect("tasksets:detail", pk=pk)


def _json_text(value) -> str:
    return "" if value is None else json.dumps(value, indent=2, ensure_ascii=False)


def task_detail(request, pk, task_pk):
    task_set = selectors.taskset_for_user(request.user, pk)
    task = get_object_or_404(Task, pk=task_pk, task_set=task_set)
    can_edit = _can_edit(request, task_set)
    problems, form = [], None
    if request.method == "POST" and can_edit:
        form = request.POST
        task_form = TaskForm(form)
        try:
            if not task_form.is_valid():
                raise SpecError(task_form.problems())
            task_update(
                task=task,
                input=task_form.cleaned_data["input"],
                expected=task_form.json_field("expected", None),
                params=task_form.json_field("params", {}),
                metadata=task_form.json_field("metadata", {}),
                verifier=task_form.json_field("verifier", None),
                split=task_form.cleaned_data["split"],
            )
        except SpecError as exc:
            problems = exc.problems
        else:
            messages.success(request, f"Saved task {task.task_id}.")
            return redirect("tasksets:task", pk=pk, task_pk=task_pk)
    fields = form or {
        "input": task.input,
        "expected": _json_text(task.expected),
        "params": _json_text(task.params),
        "metadata": _json_text(task.metadata),
        "verifier": _json_text(task.verifier),
        "split": task.split,
    }
    return render(
        request,
        "tasksets/task.html",
        {
            "task_set": task_set,
            "task": task,
            "fields": fields,
            "problems": problems,
            "splits": SPLITS,
            "can_edit": can_edit,
        },
        status=400 if problems else 200,
    )
