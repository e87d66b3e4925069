"""Read paths for runs and task sets (pages, API, CLI): who may see or change
which run, the run read model (run_summary, and the list row and API shape
built from it), the runs list query and the task-set list."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Case, CharField, Count, F, Q, QuerySet, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.http import Http404
from django.urls import reverse
from django.utils import timezone

from optimizer.runs.budget import format_cost, run_max_cost, run_pricing
from optimizer.config import DEMO_MODEL_LABEL, RunConfigError, lm_is_simulator, parse_run_config
from optimizer.external.services import SILENT_AFTER_SECONDS
from optimizer.models import Run, RunStatus
from optimizer.tasksets.models import TaskSet
from optimizer.services import run_data_warnings
from verifiers_app.models import Verifier

# What every run read joins (run_summary reads them; "progress": the run's
# budget, cost, usage, heartbeat and last_seq, on their own narrow row).
RUN_JOINS = ("task_set", "owner", "best_candidate", "chosen_candidate", "progress")


def taskset_list(*, user) -> QuerySet[TaskSet]:
    """Task sets the user may see, by name, each with its `task_count`."""
    # An aggregate drops Meta.ordering, so order explicitly (stable pagination).
    return TaskSet.objects.visible_to(user).select_related("owner").annotate(task_count=Count("tasks")).order_by("name", "pk")


def taskset_for_user(user, pk: int, *, edit: bool = False) -> TaskSet:
    """The task set if `user` may see it (own, shared, admin) — with `edit`,
    change or delete it (own, admin) — else Http404. Pages and the API use this
    one rule. Carries `task_count`, as taskset_list's rows do."""
    sets = TaskSet.objects.editable_by(user) if edit else TaskSet.objects.visible_to(user)
    task_set = sets.select_related("owner").annotate(task_count=Count("tasks")).filter(pk=pk).first()
    if task_set is None:
        raise Http404("No such task set")
    return task_set


def run_for_user(user, run_id: int, *, control: bool = False) -> Run:
    """The run if `user` may see it (owner, shared with, admin) — and with
    `control`, may stop, resume, fork, edit or delete it (owner or admin, see
    Run.controllable_by) — else Http404: a run one may not see does not exist."""
    run = Run.objects.visible_to(user).select_related(*RUN_JOINS).filter(pk=run_id).first()
    if run is None or (control and not run.controllable_by(user)):
        raise Http404("No such run")
    return run


def run_is_simulator(run: Run) -> bool:
    """True when the run's task or reflection model is the offline demo simulator
    (the one definition behind every "simulator" badge and the API's `simulator`)."""
    config = run.config if isinstance(run.config, dict) else {}
    return not run.is_external and any(lm_is_simulator(config.get(role)) for role in ("task_lm", "reflection_lm"))


def run_url(run: Run) -> str:
    """The run page's absolute address (settings.BASE_URL)."""
    return settings.BASE_URL + reverse("runs:detail", args=[run.pk])


def run_wait_summary(run: Run) -> dict:
    """The `optimize run --wait` JSON summary (docs/architecture.md "Public contracts"),
    plus where to see the run and which candidate is best."""
    return {
        "run_id": run.pk,
        "status": run.status,
        "seed_score": run.seed_score,
        "best_score": run.best_score,
        "best_candidate": run.best_candidate.components if run.best_candidate else {},
        "best_candidate_index": run.best_candidate.index if run.best_candidate else None,
        "metric_calls": run.budget_used,
        "run_url": run_url(run),
    }


def launch_warnings(*, user, config: dict) -> list[str]:
    """What a dry run or a launch warns about without refusing: a budget too low
    for a few proposals, and task data no chosen verifier reads. Empty while the
    config itself is invalid (its problems are reported first)."""
    try:
        parsed = parse_run_config(config)
    except RunConfigError:
        return []
    task_set = TaskSet.objects.visible_to(user).filter(pk=parsed.task_set_id).first()
    if task_set is None:
        return []
    warnings = []
    valset_size = task_set.tasks.filter(split=parsed.splits.val).count()
    if valset_size:
        warnings.append(parsed.budget_warning(valset_size))
    specs = list(Verifier.objects.visible_to(user).filter(slug__in=parsed.verifier_ids).values_list("spec", flat=True))
    tasks = task_set.tasks
    warnings += run_data_warnings(tasks=tasks.count(), expecting=tasks.filter(metadata__has_key="expectations").count(),
                                  schemas=tasks.filter(metadata__has_key="expectedOutputSchema").count(), specs=specs)
    return [w for w in warnings if w]


def run_model_label(run: Run) -> dict:
    """The task model as the UI shows it; the demo simulator is labelled as one."""
    if run.is_external:  # the user's own adapter and models: we only know where it runs
        return {"label": "the run's own adapter", "is_simulator": False, "model": ""}
    lm = (run.config or {}).get("task_lm") or {}
    model = lm if isinstance(lm, str) else lm.get("model", "")  # a str: a name never resolved (an imported run)
    label = DEMO_MODEL_LABEL if lm_is_simulator(lm) else (model or "–")
    return {"label": label, "is_simulator": run_is_simulator(run), "model": model}


# The runs list's sortable columns: URL key → what the database orders by.
RUN_SORTS = {
    "name": "name", "status": "status", "best_score": "best_score", "budget": "progress__budget_used", "cost": "progress__cost",
    "model": "task_model",
    "task_set": "task_set__name", "owner": "owner__username", "started": "started_at", "finished": "finished_at",
    "created": "created_at",
}
DEFAULT_RUN_SORT = "-created"


def _with_task_model(runs: QuerySet[Run]) -> QuerySet[Run]:
    """Annotate `task_model`: the task model as the list shows it (run_model_label)."""
    return runs.annotate(
        task_model=Case(
            When(config__task_lm__provider="demo", then=Value(DEMO_MODEL_LABEL)),
            default=Cast(KT("config__task_lm__model"), CharField()),
            output_field=CharField(),
        )
    )


def run_list(
    *, user, status: str = "", search: str = "", task_set: int | None = None, verifier: str = "", model: str = "",
    archived: bool | None = False, sort: str = DEFAULT_RUN_SORT,
) -> QuerySet[Run]:
    """Runs the user may see, filtered by status, task set, verifier (slug), task
    model (as the list labels it), archived or not (None: both), and a search over run name,
    task set name and owner; ordered by `sort` (a RUN_SORTS key, "-" for
    descending; unknown keys fall back to newest first), ties newest first."""
    runs = _with_task_model(Run.objects.visible_to(user).select_related(*RUN_JOINS))
    if archived is not None:
        runs = runs.filter(archived=archived)
    if status:
        runs = runs.filter(status=status)
    if task_set:
        runs = runs.filter(task_set_id=task_set)
    if verifier:
        runs = runs.filter(verifiers__slug=verifier).distinct()
    if model:
        runs = runs.filter(task_model=model)
    if search:
        runs = runs.filter(
            Q(name__icontains=search) | Q(task_set__name__icontains=search) | Q(owner__username__icontains=search)
        )
    key = sort.removeprefix("-")
    field = F(RUN_SORTS.get(key, "created_at"))
    descending = sort.startswith("-") if key in RUN_SORTS else True
    order = field.desc(nulls_last=True) if descending else field.asc(nulls_last=True)
    return runs.order_by(order, "-created_at", "-pk")


def run_list_filter_choices(*, user) -> dict:
    """What the runs list's filters offer: task sets, verifiers and task models of the user's runs."""
    runs = Run.objects.visible_to(user)
    return {
        "task_sets": TaskSet.objects.filter(pk__in=runs.values("task_set_id")).order_by("name").values_list("pk", "name"),
        "verifiers": Verifier.objects.filter(runs__in=runs.values("pk")).order_by("slug").values_list("slug", flat=True).distinct(),
        "models": sorted({m for m in _with_task_model(runs).values_list("task_model", flat=True) if m}),
    }


def run_summary(run: Run) -> dict:
    """The run read model: every field a page, a list row (run_list_row) or the
    API (optimizer.api.RunOut.of) shows of a run, built here only. The queryset
    should come from run_list or run_for_user (their joins keep it one query)."""
    pricing = run_pricing(run.config)
    return {
        "id": run.pk,
        "name": str(run),
        "status": run.status,
        "phase": run.phase,
        "active": run.status in RunStatus.active(),
        "budget_used": run.budget_used,
        "budget_total": run.budget_total,
        "seed_score": run.seed_score,
        "best_score": run.best_score,
        "delta": (run.best_score - run.seed_score) if run.best_score is not None and run.seed_score is not None else None,
        "budget_pct": min(100, round(100 * run.budget_used / run.budget_total)) if run.budget_total else 0,
        "best_index": run.best_candidate.index if run.best_candidate_id else None,
        "chosen_index": run.chosen_candidate.index if run.chosen_candidate_id else None,
        "simulator": run_is_simulator(run),
        "url": run_url(run),
        "notes": run.notes,
        "forked_from": run.forked_from_id,
        "forked_from_candidate": run.forked_from_candidate,
        "error": run.error,
        "stop_requested": run.stop_requested,
        "model": run_model_label(run),
        "task_set": run.task_set.name if run.task_set_id else "",
        "owner": run.owner.get_username(),
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "last_seq": run.last_seq,
        "task_set_id": run.task_set_id,
        "tags": list(run.tags or []),
        "archived": run.archived,
        "kind": run.kind,
        "external": run.external or {},
        **run_client_status(run),
        # Money and tokens, recorded by the runner (never re-summed here).
        "cost": run.cost,
        "pricing": pricing,
        "cost_label": format_cost(run.cost, pricing),
        "tokens": int((run.usage or {}).get("total", {}).get("tokens_in", 0)) + int((run.usage or {}).get("total", {}).get("tokens_out", 0)),
        "usage": run.usage or {},
        "max_cost": run_max_cost(run.config),
        "stop_reason": run.stop_reason,
    }


def run_client_status(run: Run) -> dict:
    """For an external run: when its tracker was last heard from (a batch or a
    stop poll) and whether it went silent. Empty for a native run."""
    if not run.is_external:
        return {}
    seen = run.heartbeat_at
    silent = run.status in RunStatus.active() and (seen is None or (timezone.now() - seen).total_seconds() > SILENT_AFTER_SECONDS)
    return {"client_seen_at": seen.isoformat() if seen else None, "client_silent": silent, "silent_after": SILENT_AFTER_SECONDS}


LIST_ROW_FIELDS = (
    "id", "name", "status", "phase", "best_score", "seed_score", "delta", "budget_used", "budget_total",
    "budget_pct", "model", "task_set", "owner", "created_at", "started_at", "finished_at", "last_seq",
    "task_set_id", "tags", "archived", "kind", "cost", "pricing", "cost_label", "stop_reason",
)


def run_list_row(run: Run) -> dict:
    """One row of the runs list: what the page, list.json and the `runs` push show
    (no error text or other run-page fields). `last_seq` orders two versions of a row."""
    summary = run_summary(run)
    return {key: summary[key] for key in LIST_ROW_FIELDS}


def run_list_row_for_push(run_id: int) -> tuple[int, dict] | None:
    """(owner id, list row) of a run for the `runs` group, or None if it is gone.
    One query; the owner id lets a consumer admit the owner without another."""
    # Sent after every event batch of a live run: leave out the JSON a row never shows
    # (the frozen task rows and specs, the best prompt), whose decoding cost ~10 ms each time.
    run = (
        Run.objects.select_related(*RUN_JOINS)
        .defer("tasks_snapshot", "verifier_specs", "best_candidate__components", "best_candidate__parents",
               "best_candidate__objective_scores",
               "chosen_candidate__components", "chosen_candidate__parents", "chosen_candidate__objective_scores")
        .filter(pk=run_id)
        .first()
    )
    return None if run is None else (run.owner_id, run_list_row(run))
