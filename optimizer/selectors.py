"""Read paths for runs (API, CLI)."""

from __future__ import annotations

from django.db.models import QuerySet

from optimizer.models import Run


def run_list(*, user, status: str | None = None) -> QuerySet[Run]:
    """Runs the user may see, newest first, with what a list row shows."""
    runs = Run.objects.visible_to(user).select_related("task_set", "best_candidate", "owner")
    if status:
        runs = runs.filter(status=status)
    return runs


def run_get(*, user, run_id: int) -> Run | None:
    return run_list(user=user).filter(pk=run_id).first()


def run_summary(run: Run) -> dict:
    """The `optimize run --wait` JSON summary (ARCHITECTURE "Public contracts")."""
    return {
        "run_id": run.pk,
        "status": run.status,
        "seed_score": run.seed_score,
        "best_score": run.best_score,
        "best_candidate": run.best_candidate.components if run.best_candidate else {},
        "metric_calls": run.budget_used,
    }
