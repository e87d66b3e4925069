"""Human-written candidates added to a running native run (CandidateInjection).

A user's edited candidate is stored `pending` first (optimizer.services.
run_inject_candidate). The runner takes it at its next iteration boundary: gepa
0.1.4 calls our stoppers with its live state right before each iteration
(docs/gepa-notes.md §7, §18), which is the one moment a candidate can join its
pool without touching gepa's internals. `InjectionBoundary` evaluates it there
on the whole val set through the run's adapter (metered and guarded like any
evaluation), counts those metric calls in gepa's `total_num_evals` (through
`increment_evals`, so gepa's budget and our budget line both see them) and adds
it with `GEPAState.update_state_with_new_program`, gepa's own way of adding a
program: it enters the Pareto front by its scores and can be sampled as a parent.

Exactly once. The recorder records the candidate, and marks the injection
`applied`, in one transaction after gepa's checkpoint holds it (as every new
candidate: optimizer/runs/recorder.py). The checkpoint remembers which
injection became which index (`InjectionBoundary.placed`, carried in the
checkpoint as the part STATE_KEY of the runner's CarriedState), so a worker
killed between the checkpoint and that commit leaves an injection still pending
whose candidate the resumed state already has: it is recorded from the state's
scores, never evaluated or added twice. A run that ends first (finished,
stopped, failed, cancelled) marks every pending injection `refused` with
REASON_RUN_ENDED in the transaction that ends it (optimizer/runs/status.py): an
injection is applied or refused, never lost.

This module imports gepa only inside the boundary (web requests refusing or
listing injections do not load it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from statistics import fmean
from typing import TYPE_CHECKING, Any

from django.db.models import Exists, QuerySet
from django.utils import timezone

from dashboard.lib.db_retry import retry_db
from optimizer.config import parse_run_config
from optimizer.models import CandidateInjection, InjectionStatus, Run
from optimizer.runs import event_types as ev
from optimizer.runs.budget import (
    REASON_BUDGET,
    REASON_COST,
    BudgetGuard,
    UsageMeter,
    UsageSnapshot,
)

if TYPE_CHECKING:
    from gepa.core.state import GEPAState

    from optimizer.runs.adapter import EvalRecord, FrontierAdapter

log = logging.getLogger(__name__)

REASON_RUN_ENDED = "the run ended before it could be evaluated"
# The checkpoint's part (optimizer/runs/checkpoint.py CarriedState) holding injection
# id → gepa candidate index (gepa never reads it).
STATE_KEY = "frontier_injections"


def run_valset_size(run: Run) -> int:
    """How many val tasks the run's frozen snapshot holds (what one full val evaluation costs)."""
    val = parse_run_config(run.config).splits.val
    return sum(1 for row in run.tasks_snapshot if row.get("split") == val)


def val_evaluation_cost(valset_size: int) -> int:
    """What adding a candidate costs: one metric call per val task."""
    return valset_size


def budget_refusal(*, valset_size: int, budget_total: int, budget_used: int) -> str | None:
    """Why the run's budget cannot pay for one full val evaluation, or None."""
    cost = val_evaluation_cost(valset_size)
    left = max(0, budget_total - budget_used)
    if left >= cost:
        return None
    return (
        f"evaluating it on the {valset_size} val tasks costs {cost} metric calls; "
        f"only {left} of the run's {budget_total} are left"
    )


def injection_event(injection: CandidateInjection, author: str | None = None) -> ev.Event:
    """The candidate.injected event of an injection in its current status."""
    if author is None:
        author = injection.author.username if injection.author is not None else ""
    return ev.CANDIDATE_INJECTED, {
        "injection": injection.pk,
        "status": injection.status,
        "edited_from": injection.parent,
        "author": author,
        "reason": injection.reason,
        "candidate": injection.candidate_index,
        "components": {
            component: ev.preview(text) for component, text in injection.components.items()
        },
    }


def pending_injections(run_id: int) -> QuerySet[CandidateInjection]:
    return CandidateInjection.objects.filter(
        run_id=run_id, status=InjectionStatus.PENDING
    ).select_related("author")


def any_pending(run_id: int) -> Exists:
    """Whether the run has a pending injection, as an expression of the stop check's query."""
    return Exists(CandidateInjection.objects.filter(run_id=run_id, status=InjectionStatus.PENDING))


def refuse_pending(run_id: int, reason: str = REASON_RUN_ENDED) -> list[ev.Event]:
    """Inside the caller's transaction: mark every pending injection of the run
    refused; returns their events for the caller to publish in the same batch."""
    refused = list(pending_injections(run_id).select_for_update(of=("self",)))
    if not refused:
        return []
    now = timezone.now()
    CandidateInjection.objects.filter(pk__in=[i.pk for i in refused]).update(
        status=InjectionStatus.REFUSED, reason=reason[:300], decided_at=now
    )
    events = []
    for injection in refused:
        injection.status, injection.reason = InjectionStatus.REFUSED, reason[:300]
        events.append(injection_event(injection))
    return events


def refuse(injection_id: int, reason: str) -> list[ev.Event]:
    """Inside the caller's transaction: refuse one pending injection (the runner
    could not apply it); returns its event, or nothing when it was not pending."""
    changed = CandidateInjection.objects.filter(
        pk=injection_id, status=InjectionStatus.PENDING
    ).update(status=InjectionStatus.REFUSED, reason=reason[:300], decided_at=timezone.now())
    if not changed:
        return []
    return [
        injection_event(CandidateInjection.objects.select_related("author").get(pk=injection_id))
    ]


def mark_applied(injection_id: int, candidate_index: int) -> list[ev.Event]:
    """Inside the transaction that records the candidate: the injection is applied.
    Only a pending one changes (a retried write finds it applied and adds nothing)."""
    changed = CandidateInjection.objects.filter(
        pk=injection_id, status=InjectionStatus.PENDING
    ).update(
        status=InjectionStatus.APPLIED,
        candidate_index=candidate_index,
        decided_at=timezone.now(),
    )
    if not changed:
        return []
    injection = CandidateInjection.objects.select_related("author").get(pk=injection_id)
    return [injection_event(injection)]


@dataclass
class Injected:
    """What the boundary hands the recorder for one injected candidate."""

    injection: int
    author_id: int | None
    author: str
    index: int
    components: dict[str, str]
    parents: list[int]
    iteration: int
    scores_by_val_id: dict[int, float]
    records: dict[tuple[str, str], EvalRecord]
    spent: UsageSnapshot | None  # what its evaluation cost (None: recovered from the checkpoint)


class InjectionBoundary:
    """The runner's injection work at an iteration boundary (called by its stopper).

    `relay(name, payload)` hands the recorder (on its writer thread, in gepa's
    order) an `Injected` ("candidate_injected") or a refusal
    ("injection_refused": the injection and its reason)."""

    def __init__(
        self,
        *,
        run_id: int,
        budget_total: int,
        valset: list[Any],
        adapter: FrontierAdapter,
        limits: BudgetGuard,
        meter: UsageMeter,
        relay: Callable[[str, Any], None],
    ) -> None:
        self.run_id = run_id
        self.budget_total = budget_total
        self.valset = valset
        self.adapter = adapter
        self.limits = limits
        self.meter = meter
        self.relay = relay
        self.relayed: set[int] = (
            set()
        )  # handed to the recorder by this worker, maybe not committed yet
        # injection id → gepa candidate index, as far as gepa's state holds them: the
        # runner carries it in the checkpoint (CarriedState part STATE_KEY).
        self.placed: dict[int, int] = {}

    def __call__(self, state: GEPAState[Any, Any], *, any_pending: bool = True) -> bool:
        """Apply the run's pending injections to `state`; True when what is left of
        the budget no longer covers an iteration (the run stops, as BudgetGuard would).
        `any_pending` False: the caller's query just found none (nothing is read)."""
        if not any_pending:
            return False
        pending = retry_db(
            lambda: list(pending_injections(self.run_id)),
            what=f"run {self.run_id}: pending injections",
        )
        waiting = [i for i in pending or [] if i.pk not in self.relayed]
        if not waiting:
            return False
        placed = self.placed
        for injection in waiting:
            if injection.pk in placed:
                self._recover(state, injection, placed[injection.pk])
            else:
                self._apply(state, injection, placed)
        if self.budget_total - state.total_num_evals < self.limits.iteration_cost:
            self.limits.reason = self.limits.reason or REASON_BUDGET
            return True
        return False

    def _author(self, injection: CandidateInjection) -> str:
        return injection.author.username if injection.author is not None else ""

    def _refuse(self, injection: CandidateInjection, reason: str) -> None:
        self.relayed.add(injection.pk)
        self.relay("injection_refused", (injection.pk, reason))

    def _apply(
        self, state: GEPAState[Any, Any], injection: CandidateInjection, placed: dict[int, int]
    ) -> None:
        from gepa.core.state import ValsetEvaluation

        components = dict(injection.components)
        if set(components) != set(state.list_of_named_predictors):
            self._refuse(injection, "its components are not the run's components")
            return
        parent = injection.parent
        if parent >= len(state.program_candidates):
            self._refuse(injection, f"the run has no candidate {parent}")
            return
        refusal = budget_refusal(
            valset_size=len(self.valset),
            budget_total=self.budget_total,
            budget_used=state.total_num_evals,
        )
        max_cost = self.limits.max_cost
        if refusal is None and max_cost is not None and self.meter.cost >= max_cost:
            refusal = f"the run's {REASON_COST}"
        if refusal is not None:
            self._refuse(injection, refusal)
            return
        # The adapter's guard sees this evaluation inside the iteration's budget
        # (BudgetGuard said go just before): nothing beyond the budget is run.
        before = self.meter.snapshot()
        batch = self.adapter.evaluate(self.valset, components, capture_traces=False)
        spent = self.meter.snapshot().minus(before)
        records = self.adapter.take_all_records()
        ids = list(range(len(self.valset)))  # gepa's ids of a list valset
        objective = list(batch.objective_scores) if batch.objective_scores else None
        evaluation = ValsetEvaluation(
            outputs_by_val_id=dict(zip(ids, batch.outputs, strict=True)),
            scores_by_val_id=dict(zip(ids, batch.scores, strict=True)),
            objective_scores_by_val_id=dict(zip(ids, objective, strict=True))
            if objective
            else None,
        )
        discovered_at = state.total_num_evals
        # gepa's budget hook fires on_budget_updated: the budget line and the guard follow.
        state.increment_evals(len(ids))
        state.num_full_ds_evals += 1
        index = state.update_state_with_new_program(
            parent_program_idx=[parent],
            new_program=components,
            valset_evaluation=evaluation,
            run_dir=None,
            num_metric_calls_by_discovery_of_new_program=discovered_at,
        )
        placed[injection.pk] = index
        self._relay_injected(
            state,
            injection,
            index=index,
            components=components,
            parents=[parent],
            scores_by_val_id=dict(evaluation.scores_by_val_id),
            records=records,
            spent=spent,
        )
        log.info(
            "Run %s: candidate %s (written by %s) added after %s metric calls, val score %.3f.",
            self.run_id,
            index,
            self._author(injection) or "a user",
            len(ids),
            fmean(batch.scores) if batch.scores else 0.0,
        )

    def _recover(
        self, state: GEPAState[Any, Any], injection: CandidateInjection, index: int
    ) -> None:
        """The checkpoint has its candidate, the database does not yet: record it from the state."""
        self._relay_injected(
            state,
            injection,
            index=index,
            components=dict(state.program_candidates[index]),
            parents=[p for p in state.parent_program_for_candidate[index] if p is not None],
            scores_by_val_id=dict(state.prog_candidate_val_subscores[index]),
            records={},
            spent=None,
        )

    def _relay_injected(
        self, state: GEPAState[Any, Any], injection: CandidateInjection, **facts: Any
    ) -> None:
        """Hand the recorder the candidate `injection` became (this worker relays it once)."""
        self.relayed.add(injection.pk)
        self.relay(
            "candidate_injected",
            Injected(
                injection=injection.pk,
                author_id=injection.author_id,
                author=self._author(injection),
                iteration=state.i + 1,
                **facts,
            ),
        )
