"""Run pages: the runs list, the run page and its JSON snapshot, the candidate
page, and the control POSTs. Views check access, call one selector or service
and render; the work lives in dashboard.selectors and optimizer.services."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_safe, require_http_methods, require_POST

from dashboard import selectors
from optimizer import selectors as optimizer_selectors
from optimizer import services
from optimizer.config import DEMO_MODEL_NAME, RunConfigError
from optimizer.models import Run, RunStatus
from verifiers_app.storable import JsonTooDeep, parse_json, without_nul

LIST_LIMIT = 200


def _get_run_for_user(request, run_id: int) -> Run:
    """The run if the user may see it (owner, shared with, admin), else 404."""
    runs = Run.objects.visible_to(request.user).select_related("task_set", "owner", "best_candidate")
    return get_object_or_404(runs, pk=run_id)


def _can_control(request, run: Run) -> bool:
    """Only the run's owner (or an admin) stops, resumes or forks it; sharing is read-only."""
    return run.controllable_by(request.user)


def _get_rw_run_for_user(request, run_id: int) -> Run:
    """The run if the user may control it, else 404."""
    run = _get_run_for_user(request, run_id)
    if not _can_control(request, run):
        raise Http404("Only the run's owner can control it.")
    return run


def _list_filters(request) -> dict:
    status = request.GET.get("status", "")
    return {
        "status": status if status in RunStatus.values else "",
        "search": without_nul(request.GET.get("q", "")).strip()[:200],
    }


@require_safe
def run_list(request):
    filters = _list_filters(request)
    runs = selectors.run_list(user=request.user, **filters)[:LIST_LIMIT]
    return render(
        request,
        "runs/list.html",
        {
            "rows": [selectors.run_list_row(run) for run in runs],
            "statuses": RunStatus.choices,
            "filters": filters,
        },
    )


@require_safe
def run_list_json(request):
    """The list's rows as JSON: runs-list.js reloads them whenever its `/ws/runs/`
    socket (re)connects, then applies the pushed rows."""
    runs = selectors.run_list(user=request.user, **_list_filters(request))
    return JsonResponse({"runs": [selectors.run_list_row(run) for run in runs[:LIST_LIMIT]]})


@require_safe
def run_detail(request, run_id: int):
    run = _get_run_for_user(request, run_id)
    return render(
        request,
        "runs/detail.html",
        {
            "run": run,
            "summary": selectors.run_summary(run),
            "can_control": _can_control(request, run),
        },
    )


@require_safe
def run_snapshot(request, run_id: int):
    run = _get_run_for_user(request, run_id)
    return JsonResponse(selectors.run_snapshot(run))


@require_safe
def candidate_detail(request, run_id: int, index: int):
    run = _get_run_for_user(request, run_id)
    detail = selectors.candidate_detail(run, index)
    if detail is None:
        raise Http404("No such candidate in this run.")
    return render(request, "runs/candidate.html", {"run": run, **detail})


@require_POST
def run_control(request, run_id: int, action: str):
    """stop / cancel / resume (optionally with more budget) / fork from a candidate."""
    run = _get_rw_run_for_user(request, run_id)
    target = run
    try:
        if action == "stop":
            services.run_stop(run=run)
        elif action == "cancel":
            services.run_cancel(run=run)
        elif action == "resume":
            services.run_resume(run=run, extra_budget=_int_field(request, "extra_budget", 0))
        else:
            index = _int_field(request, "candidate", run.best_candidate.index if run.best_candidate_id else 0)
            target = services.run_fork(run=run, candidate_index=index, owner=request.user)
    except RunConfigError as error:
        messages.error(request, "; ".join(f"{field}: {problem}" for field, problem in error.problems))
    except ValueError as error:  # RunStateError and bad numbers
        messages.error(request, str(error))
    return redirect(reverse("runs:detail", args=[target.pk]))


def _int_field(request, name: str, default: int) -> int:
    raw = request.POST.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}: must be a whole number, got {raw[:40]!r}") from None
    if value < 0:
        raise ValueError(f"{name}: must not be negative")
    return value


LM_FIELDS = [("task_lm", "Task model"), ("reflection_lm", "Reflection model")]
# The launch form's value for "the demo simulator": the same name the API and CLI take.
DEMO_CHOICE = DEMO_MODEL_NAME
MAX_CONFIG_BYTES = 200_000


def _config_from_body(request) -> tuple[dict | None, list[tuple[str, str]]]:
    """The posted RunConfig JSON, or a problem naming why it could not be read."""
    if len(request.body) > MAX_CONFIG_BYTES:
        return None, [("config", f"is larger than {MAX_CONFIG_BYTES} bytes")]
    try:
        data = parse_json(request.body or b"{}")
    except JsonTooDeep as error:  # names the field: "task_lm.options: nested more than 100 levels deep"
        field, _, message = str(error).partition(": ")
        return None, [(field if field != "value" else "config", message)]
    except ValueError as error:
        return None, [("config", f"is not valid JSON ({error})")]
    if not isinstance(data, dict):
        return None, [("config", "must be a JSON object")]
    return data, []


def _problems_response(problems, warnings=(), status=200) -> JsonResponse:
    return JsonResponse(
        {"problems": [{"field": f, "message": m} for f, m in problems], "warnings": [w for w in warnings if w]},
        status=status,
    )


@require_http_methods(["GET", "POST"])
def run_new(request):
    """GET: the launch form. POST (JSON RunConfig): launch, or list the problems."""
    if request.method == "GET":
        context = selectors.launch_form_choices(user=request.user) | {"lm_fields": LM_FIELDS, "demo_choice": DEMO_CHOICE}
        return render(request, "runs/new.html", context)
    config, problems = _config_from_body(request)
    if problems:
        return _problems_response(problems, status=400)
    try:
        run = services.run_launch(owner=request.user, config=config)
    except RunConfigError as error:
        return _problems_response(error.problems, optimizer_selectors.launch_warnings(user=request.user, config=config), status=400)
    for warning in services.run_snapshot_warnings(run):  # shown on the run page the form goes to
        messages.warning(request, f"Launched with a warning: {warning}")
    return JsonResponse({"run_id": run.pk, "redirect": reverse("runs:detail", args=[run.pk])}, status=201)


@require_POST
def run_dry_run(request):
    """Check a RunConfig without calling a model; problems name their fields."""
    config, problems = _config_from_body(request)
    if not problems:
        problems = services.run_dry_run(owner=request.user, config=config)
    return _problems_response(problems, optimizer_selectors.launch_warnings(user=request.user, config=config) if config else [])
