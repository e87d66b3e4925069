"""Read paths for runs and task sets (pages, API, CLI)."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Count, QuerySet
from django.urls import reverse

from optimizer.models import Run, TaskSet


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
    """The `optimize run --wait` JSON summary (ARCHITECTURE "Public contracts"),
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
