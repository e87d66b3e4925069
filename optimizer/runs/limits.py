"""Per-user run limits: how large a budget and concurrency one run may have,
and how many runs one user may have queued, running or stopping at once.

Site defaults come from settings (``FRONTIER_MAX_METRIC_CALLS_PER_RUN``,
``FRONTIER_MAX_RUN_CONCURRENCY``, ``FRONTIER_MAX_ACTIVE_RUNS_PER_USER``); an
administrator overrides any of them for one user with a ``UserRunLimits`` row
in the admin. Without them one user could launch a 10-million-call run with
concurrency 64, or enough runs to hold every worker. Administrators (who set
the limits) have none unless a row of their own gives them some.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

from optimizer.models import Run, UserRunLimits

if TYPE_CHECKING:
    from django.contrib.auth.models import User

SET_BY = "(set by an administrator)"


@dataclass(frozen=True)
class RunLimits:
    max_metric_calls: int
    max_concurrency: int
    max_active_runs: int


UNLIMITED = RunLimits(max_metric_calls=10**12, max_concurrency=10**6, max_active_runs=10**6)


def run_limits_for(user: User) -> RunLimits:
    """The user's limits: their admin-set values, else the site defaults."""
    row = UserRunLimits.objects.filter(user_id=user.pk).first()
    if row is None and getattr(user, "is_superuser", False):
        return UNLIMITED

    def pick(field: str, default: int) -> int:
        value = getattr(row, field, None) if row is not None else None
        return default if value is None else value

    return RunLimits(
        max_metric_calls=pick("max_metric_calls", settings.FRONTIER_MAX_METRIC_CALLS_PER_RUN),
        max_concurrency=pick("max_concurrency", settings.FRONTIER_MAX_RUN_CONCURRENCY),
        max_active_runs=pick("max_active_runs", settings.FRONTIER_MAX_ACTIVE_RUNS_PER_USER),
    )


def budget_problem(limits: RunLimits, metric_calls: int, field: str) -> str | None:
    if metric_calls > limits.max_metric_calls:
        return (
            f"{field}: {metric_calls:,} metric calls is above your limit of "
            f"{limits.max_metric_calls:,} per run {SET_BY}"
        )
    return None


def active_runs_problem(
    user: User, limits: RunLimits, *, exclude_run_id: int | None = None
) -> str | None:
    """A problem when starting one more run would go past the user's active runs."""
    runs = Run.objects.active().filter(owner_id=user.pk)
    if exclude_run_id is not None:
        runs = runs.exclude(pk=exclude_run_id)
    active = runs.count()
    if active >= limits.max_active_runs:
        return (
            f"you have {active} runs queued, running or stopping; your limit is "
            f"{limits.max_active_runs} at once {SET_BY}: stop one or wait for it to finish"
        )
    return None


def launch_problems(
    user: User, *, metric_calls: int, concurrency: int, budget_field: str = "budget"
) -> list[tuple[str, str]]:
    """(field, message) for every limit a launch of this size would break."""
    limits = run_limits_for(user)
    problems: list[tuple[str, str]] = []
    budget = budget_problem(limits, metric_calls, budget_field)
    if budget:
        problems.append((budget_field, budget.split(": ", 1)[1]))
    if concurrency > limits.max_concurrency:
        problems.append(
            (
                "concurrency",
                f"{concurrency} is above your limit of {limits.max_concurrency} {SET_BY}",
            )
        )
    active = active_runs_problem(user, limits)
    if active:
        problems.append(("active_runs", active))
    return problems
