"""Read paths for runs and task sets (pages, API, CLI)."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Count, QuerySet
from django.urls import reverse

from optimizer.config import RunConfigError, parse_run_config
from optimizer.models import Run, TaskSet
from optimizer.services import run_data_warnings
from verifiers_app.models import Verifier


def taskset_list(*, user) -> QuerySet[TaskSet]:
    """Task sets the user may see, by name, each with its `task_count`."""
    # An aggregate drops Meta.ordering, so order explicitly (stable pagination).
    return TaskSet.objects.visible_to(user).select_related("owner").annotate(task_count=Count("tasks")).order_by("name", "pk")


def run_list(*, user, status: str | None = None) -> QuerySet[Run]:
    """Runs the user may see, newest first, with what a list row shows."""
    runs = Run.objects.visible_to(user).select_related("task_set", "best_candidate", "chosen_candidate", "owner")
    if status:
        runs = runs.filter(status=status)
    return runs


def run_get(*, user, run_id: int) -> Run | None:
    return run_list(user=user).filter(pk=run_id).first()


def run_url(run: Run) -> str:
    """The run page's absolute address (settings.BASE_URL)."""
    return settings.BASE_URL + reverse("runs:detail", args=[run.pk])


def run_summary(run: Run) -> dict:
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
