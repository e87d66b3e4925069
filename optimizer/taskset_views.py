"""Task-set pages: browse (paginated, searchable), import, view and edit one
task, assign splits by hand or by a seeded random split."""

from __future__ import annotations

import json

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from optimizer.models import Split, Task, TaskSet
from optimizer import selectors
from optimizer.taskset_services import task_update, taskset_assign_split, taskset_import, taskset_split
from optimizer.tasksets import MAX_FILE_BYTES, CsvMapping
from verifiers_app.engine import SpecError
from verifiers_app.services import spec_from_json
from verifiers_app.storable import without_nul

SPLITS = Split.values


def _visible(request, pk) -> TaskSet:
    return get_object_or_404(TaskSet.objects.visible_to(request.user).select_related("owner"), pk=pk)


def _editable(request, pk) -> TaskSet:
    return get_object_or_404(TaskSet.objects.editable_by(request.user), pk=pk)


def _can_edit(request, task_set: TaskSet) -> bool:
    return request.user.is_superuser or task_set.owner_id == request.user.pk


def taskset_list(request):
    query = without_nul(request.GET.get("q", "").strip())
    task_sets = selectors.taskset_list(user=request.user)
    if query:
        task_sets = task_sets.filter(Q(name__icontains=query) | Q(description__icontains=query))
    page = Paginator(task_sets, 25).get_page(request.GET.get("page"))
    return render(request, "tasksets/list.html", {"page": page, "query": query})


def taskset_import_view(request):
    problems = []
    if request.method == "POST":
        upload = request.FILES.get("file")
        post = request.POST
        mapping = CsvMapping(
            input=post.get("input_column", "").strip(), task_id=post.get("task_id_column", "").strip(),
            expected=post.get("expected_column", "").strip(), split=post.get("split_column", "").strip(),
            metadata=tuple(c.strip() for c in post.get("metadata_columns", "").split(",") if c.strip()),
        )
        try:
            if upload is None:
                raise SpecError("file: choose a .jsonl, .yaml or .csv file")
            task_set, counts = taskset_import(
                owner=request.user, name=post.get("name", ""), filename=upload.name,
                content=upload.read(MAX_FILE_BYTES + 1), mapping=mapping, shared=post.get("shared") == "on",
            )
        except SpecError as exc:
            problems = exc.problems
        else:
            messages.success(request, f"Imported {upload.name} into {task_set.name}: {counts['created']} new, "
                                      f"{counts['updated']} updated, {counts['unchanged']} unchanged.")
            return redirect("tasksets:detail", pk=task_set.pk)
    return render(request, "tasksets/import.html", {"problems": problems, "form": request.POST},
                  status=400 if problems else 200)


def taskset_detail(request, pk):
    task_set = _visible(request, pk)
    query, split = without_nul(request.GET.get("q", "").strip()), request.GET.get("split", "")
    tasks = task_set.tasks.all()
    if query:
        tasks = tasks.filter(Q(task_id__icontains=query) | Q(input__icontains=query))
    if split in SPLITS:
        tasks = tasks.filter(split=split)
    counts = dict(task_set.tasks.values_list("split").annotate(n=Count("id")))
    return render(request, "tasksets/detail.html", {
        "task_set": task_set, "page": Paginator(tasks, 50).get_page(request.GET.get("page")),
        "query": query, "split": split, "splits": SPLITS,
        "split_counts": [(s, counts.get(s, 0)) for s in SPLITS], "can_edit": _can_edit(request, task_set),
    })


@require_POST
def taskset_split_view(request, pk):
    task_set = _editable(request, pk)
    try:
        ratios = {s: float(request.POST.get(s) or 0) for s in SPLITS}
        seed = int(request.POST.get("seed") or 0)
        counts = taskset_split(task_set=task_set, ratios=ratios, seed=seed)
    except ValueError as exc:  # SpecError is a ValueError; so are bad numbers
        messages.error(request, f"Not split: {exc if isinstance(exc, SpecError) else 'ratios and seed must be numbers'}.")
    else:
        messages.success(request, "Split with seed {}: {}.".format(seed, ", ".join(f"{n} {s}" for s, n in counts.items())))
    return redirect("tasksets:detail", pk=pk)


@require_POST
def taskset_assign_view(request, pk):
    task_set = _editable(request, pk)
    try:
        changed = taskset_assign_split(task_set=task_set, task_ids=request.POST.getlist("task_ids"),
                                       split=request.POST.get("split", ""))
    except SpecError as exc:
        messages.error(request, f"Not changed: {exc}.")
    else:
        messages.success(request, f"Moved {changed} task{'s' if changed != 1 else ''} to {request.POST['split']}.")
    return redirect("tasksets:detail", pk=pk)


def _json_text(value) -> str:
    return "" if value is None else json.dumps(value, indent=2, ensure_ascii=False)


def task_detail(request, pk, task_pk):
    task_set = _visible(request, pk)
    task = get_object_or_404(Task, pk=task_pk, task_set=task_set)
    can_edit = _can_edit(request, task_set)
    problems, form = [], None
    if request.method == "POST" and can_edit:
        form = request.POST
        try:
            def parsed(name, empty):
                text = form.get(name, "").strip()
                return spec_from_json(text, source=name) if text else empty

            task_update(task=task, input=form.get("input", ""), expected=parsed("expected", None),
                        params=parsed("params", {}), metadata=parsed("metadata", {}),
                        verifier=parsed("verifier", None), split=form.get("split", ""))
        except SpecError as exc:
            problems = exc.problems
        else:
            messages.success(request, f"Saved task {task.task_id}.")
            return redirect("tasksets:task", pk=pk, task_pk=task_pk)
    fields = form or {"input": task.input, "expected": _json_text(task.expected), "params": _json_text(task.params),
                      "metadata": _json_text(task.metadata), "verifier": _json_text(task.verifier), "split": task.split}
    return render(request, "tasksets/task.html", {
        "task_set": task_set, "task": task, "fields": fields, "problems": problems,
        "splits": SPLITS, "can_edit": can_edit,
    }, status=400 if problems else 200)
