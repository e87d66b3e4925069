"""Read paths for runs and task sets (pages, API, CLI): who may see or change
which run, the runs list query and the task-set list. The run read model
itself (run_summary and the list row) is optimizer.runs.summary."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict

from django.core.exceptions import PermissionDenied
from django.db.models import Case, CharField, Count, F, Q, QuerySet, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.http import Http404

from optimizer.config import (
    DEMO_MODEL_LABEL,
    DEMO_MODEL_NAME,
    RunConfig,
    RunConfigError,
    lm_is_simulator,
    parse_run_config,
)
from optimizer.lm.simulator.limits import SimulatorLimits, simulator_limits
from optimizer.models import Run, RunKind, RunStatus
from optimizer.runs.summary import RUN_JOINS, run_url
from optimizer.services import run_data_warnings
from optimizer.tasksets.models import TaskSet
from verifiers_app.engine import SpecError, compile_specs, spec_warnings
from verifiers_app.models import Verifier

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django_stubs_ext import WithAnnotations  # django-stubs' own helper: for type checking only

    class TaskCount(TypedDict):
        task_count: int

    #: A task set read with its `task_count` (taskset_list, taskset_for_user).
    CountedTaskSet: TypeAlias = WithAnnotations[TaskSet, TaskCount]

    class TaskModel(TypedDict):
        task_model: str

    #: A run read with its `task_model` (the runs list).
    RunWithTaskModel: TypeAlias = WithAnnotations[Run, TaskModel]


def taskset_list(*, user: User) -> QuerySet[CountedTaskSet]:
    """Task sets the user may see, by name, each with its `task_count`."""
    # An aggregate drops Meta.ordering, so order explicitly (stable pagination).
    return (
        TaskSet.objects.visible_to(user)
        .select_related("owner")
        .annotate(task_count=Count("tasks"))
        .order_by("name", "pk")
    )


def taskset_for_user(user: User, pk: int, *, edit: bool = False) -> CountedTaskSet:
    """The task set if `user` may see it (own, shared, admin) — with `edit`,
    change or delete it (own, admin) — else Http404. Pages and the API use this
    one rule. Carries `task_count`, as taskset_list's rows do."""
    sets = TaskSet.objects.editable_by(user) if edit else TaskSet.objects.visible_to(user)
    task_set = (
        sets.select_related("owner").annotate(task_count=Count("tasks")).filter(pk=pk).first()
    )
    if task_set is None:
        raise Http404("No such task set")
    return task_set


def run_for_user(user: User, run_id: int, *, control: bool = False, steer: bool = False) -> Run:
    """The run if `user` may see it (owner, shared with, admin) — with `control`,
    may fork, edit or delete it (Run.controllable_by); with `steer`, may stop,
    pause, resume or add to it (Run.steerable_by). A run one may not see does not
    exist (Http404); one shared read-only says so (PermissionDenied, a 403)."""
    run = Run.objects.visible_to(user).select_related(*RUN_JOINS).filter(pk=run_id).first()
    if run is None or (control and not run.controllable_by(user)):
        raise Http404("No such run")
    if steer and not run.steerable_by(user):
        raise PermissionDenied(
            f"run {run.pk} is shared with you read-only: its owner can give you steering rights"
        )
    return run


def runs_to_take_up() -> list[Run]:
    """The runs an embedded server starts (queued) or resumes (running or
    stopping, interrupted) when it starts, most recent first; `manage.py serve`
    prints their links."""
    return list(
        Run.objects.filter(
            status__in=RunStatus.active(), imported=False, kind=RunKind.NATIVE
        ).order_by("-pk")
    )


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


def launch_warnings(*, user: User, config: dict[str, Any] | RunConfig) -> list[str]:
    """What a dry run or a launch warns about without refusing: a budget too low
    for a few proposals, task data no chosen verifier reads, and what lint warns
    about in a chosen verifier (an unknown check type, which scoring skips).
    Empty while the config itself is invalid (its problems are reported first)."""
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
    verifiers = list(
        Verifier.objects.visible_to(user)
        .filter(slug__in=parsed.verifier_ids)
        .values_list("slug", "spec")
    )
    specs = [spec for _, spec in verifiers]
    warnings += [
        f"verifier {slug}: {warning}" for slug, spec in verifiers for warning in spec_warnings(spec)
    ]
    tasks = task_set.tasks
    warnings += run_data_warnings(
        tasks=tasks.count(),
        expecting=tasks.filter(metadata__has_key="expectations").count(),
        schemas=tasks.filter(metadata__has_key="expectedOutputSchema").count(),
        specs=specs,
        # An `expected` that the task's own row verifier reads is read whatever is chosen.
        answered=tasks.filter(expected__isnull=False)
        .filter(Q(verifier__isnull=True) | Q(verifier__has_key="expected"))
        .count(),
        task_set=task_set.name,
    )
    return [w for w in warnings if w]


# The runs list's sortable columns: URL key → what the database orders by.
RUN_SORTS = {
    "name": "name",
    "status": "status",
    "best_score": "best_score",
    "budget": "progress__budget_used",
    "cost": "progress__cost",
    "model": "task_model",
    "task_set": "task_set__name",
    "owner": "owner__username",
    "started": "started_at",
    "finished": "finished_at",
    "created": "created_at",
}
DEFAULT_RUN_SORT = "-created"


def _with_task_model(runs: QuerySet[Run]) -> QuerySet[RunWithTaskModel]:
    """Annotate `task_model`: the task model as the list shows it (run_model_label)."""
    return runs.annotate(
        task_model=Case(
            When(config__task_lm__provider="demo", then=Value(DEMO_MODEL_LABEL)),
            default=Cast(KT("config__task_lm__model"), CharField()),
            output_field=CharField(),
        )
    )


def run_list(
    *,
    user,
    status: str = "",
    search: str = "",
    task_set: int | None = None,
    verifier: str = "",
    model: str = "",
    archived: bool | None = False,
    sort: str = DEFAULT_RUN_SORT,
) -> QuerySet[RunWithTaskModel]:
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
            Q(name__icontains=search)
            | Q(task_set__name__icontains=search)
            | Q(owner__username__icontains=search)
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
        "task_sets": TaskSet.objects.filter(pk__in=runs.values("task_set_id"))
        .order_by("name")
        .values_list("pk", "name"),
        "verifiers": Verifier.objects.filter(runs__in=runs.values("pk"))
        .order_by("slug")
        .values_list("slug", flat=True)
        .distinct(),
        "models": sorted(
            {m for m in _with_task_model(runs).values_list("task_model", flat=True) if m}
        ),
    }


def run_simulator_limits(run: Run) -> SimulatorLimits | None:
    """What the simulated reflection can never learn on this run and the val
    score that leaves (optimizer/lm/simulator/limits.py), from the run's frozen
    specs, tasks and seed prompt; None unless the run reflects with the simulator."""
    config = run.config if isinstance(run.config, dict) else {}
    if run.is_external or not lm_is_simulator(config.get("reflection_lm", DEMO_MODEL_NAME)):
        return None
    raw_splits = config.get("splits")
    splits: dict[str, Any] = raw_splits if isinstance(raw_splits, dict) else {}
    rows = [row for row in run.tasks_snapshot or [] if isinstance(row, dict)]

    def split(name: str) -> list[dict[str, Any]]:
        return [
            {k: v for k, v in row.items() if k != "split"}
            for row in rows
            if row.get("split") == name
        ]

    try:
        scorer = compile_specs(
            run.verifier_specs, aggregator=config.get("aggregator", "weighted_average")
        )
    except SpecError:
        return None
    seed = config.get("seed_components")
    return simulator_limits(
        scorer,
        split(splits.get("train") or "train"),
        split(splits.get("val") or "val"),
        seed if isinstance(seed, dict) else {},
    )
