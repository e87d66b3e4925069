"""What a run may spend, and the accounting that keeps it honest.

Three pieces, none of which imports Django:

- `UsageMeter` counts every language-model call of a run by role (the task
  model, the reflection model, the verify-loop judge): calls, input and output
  tokens as the provider's `usage` reports them, and money at the endpoint's
  price. A thread may open a `scope()` to learn what its own calls cost (one
  evaluation: the task answer plus any judge verdicts).
- `MeteredLM` wraps a LanguageModel so each completed call lands in the meter.
- `BudgetGuard` is gepa's stopper and the adapter's guard. gepa 0.1.4 checks
  `max_metric_calls` only between iterations and overshoots by up to one
  iteration (docs/gepa-notes.md §9); we stop *before* an iteration whose worst case
  cannot fit in what is left. The adapter asks the same object before every
  batch and every task call, so nothing beyond the budget or the cost cap is
  ever run (defence in depth: it raises BudgetReached, which ends the run).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

from optimizer.config import lm_is_simulator
from optimizer.lm.base import LanguageModel, LMResponse
from verifiers_app.engine.json_types import JSONObject

if TYPE_CHECKING:
    from gepa.core.state import GEPAState

ROLES = ("task", "reflection", "judge")

REASON_BUDGET = "budget reached"
REASON_COST = "cost cap reached"
REASON_PERFECT = "perfect validation score"


def no_improvement_reason(iterations: int) -> str:
    return f"no improvement in {iterations} iterations"


def run_pricing(config: object, external: object = None) -> str:
    """ "simulator" when every model of a frozen run config is the demo simulator (free),
    "unpriced" when a real endpoint has no price set, else "priced". An external
    run (`external`: its Run.external) used its owner's models, never the simulator:
    "priced" once its tracker reported a cost, else "not_reported"."""
    if isinstance(external, dict) and external:
        return "priced" if external.get("cost_reported") else "not_reported"
    if not isinstance(config, dict):
        return "priced"
    lms = [config.get("task_lm"), config.get("reflection_lm")]
    verify = config.get("verify")
    if not isinstance(verify, dict):
        verify = {}
    if verify.get("enabled") and verify.get("judge") == "llm":
        lms.append(verify.get("judge_lm"))
    real = [lm for lm in lms if isinstance(lm, dict) and not lm_is_simulator(lm)]
    if not real:
        return "simulator"
    if not any(lm.get("price_in_per_million") or lm.get("price_out_per_million") for lm in real):
        return "unpriced"
    return "priced"


def run_max_cost(config: object) -> float | None:
    """The cost cap of a frozen run config (None: no cap, or a config from elsewhere)."""
    budget = config.get("budget") if isinstance(config, dict) else None
    return budget.get("max_cost") if isinstance(budget, dict) else None


def format_cost(cost: float, pricing: str = "priced") -> str:
    """The one way pages and exports write money (static/js/money.js is its twin)."""
    if pricing == "simulator":
        return "free (demo simulator)"
    if pricing == "unpriced":
        return "no price set"
    if pricing == "not_reported":
        return "not reported"
    if not cost:
        return "$0"
    # Half a cent (of the exact float) rounds up, as money.js's toFixed does;
    # Python's format would round $0.125 to $0.12 where the page shows $0.13.
    places = Decimal("0.0001") if cost < 0.01 else Decimal("0.01")
    return f"${Decimal(cost).quantize(places, rounding=ROUND_HALF_UP)}"


class BudgetReached(RuntimeError):
    """The next evaluation would go beyond the run's metric-call budget or cost cap."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Price:
    """Money per 1M input / output tokens (the demo simulator is free)."""

    per_million_in: float = 0.0
    per_million_out: float = 0.0

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.per_million_in + tokens_out * self.per_million_out) / 1_000_000

    @property
    def free(self) -> bool:
        return not (self.per_million_in or self.per_million_out)


@dataclass
class Usage:
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0

    def add(self, tokens_in: int, tokens_out: int, cost: float) -> None:
        self.calls += 1
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        self.cost += cost

    def plus(self, other: Usage) -> Usage:
        return Usage(
            self.calls + other.calls,
            self.tokens_in + other.tokens_in,
            self.tokens_out + other.tokens_out,
            self.cost + other.cost,
        )

    def minus(self, other: Usage) -> Usage:
        return Usage(
            self.calls - other.calls,
            self.tokens_in - other.tokens_in,
            self.tokens_out - other.tokens_out,
            self.cost - other.cost,
        )

    def as_dict(self) -> JSONObject:
        return {
            "calls": self.calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost": round(self.cost, 8),
        }

    @classmethod
    def of(cls, data: JSONObject | None) -> Usage:
        data = data or {}
        return cls(
            int(data.get("calls", 0)),
            int(data.get("tokens_in", 0)),
            int(data.get("tokens_out", 0)),
            float(data.get("cost", 0.0)),
        )


@dataclass
class UsageSnapshot:
    """Usage per role at one moment; `total` across roles."""

    roles: dict[str, Usage] = field(default_factory=lambda: {role: Usage() for role in ROLES})

    @property
    def total(self) -> Usage:
        total = Usage()
        for usage in self.roles.values():
            total = total.plus(usage)
        return total

    @property
    def cost(self) -> float:
        return sum(u.cost for u in self.roles.values())

    def minus(self, other: UsageSnapshot) -> UsageSnapshot:
        return UsageSnapshot({role: self.roles[role].minus(other.roles[role]) for role in ROLES})

    def as_dict(self) -> JSONObject:
        """The JSON stored on Run.usage and on proposals: per role, and the total."""
        return {
            **{role: self.roles[role].as_dict() for role in ROLES},
            "total": self.total.as_dict(),
        }

    @classmethod
    def of(cls, data: JSONObject | None) -> UsageSnapshot:
        data = data or {}
        return cls({role: Usage.of(data.get(role)) for role in ROLES})


class Tally:
    """One evaluation's share (the hot path: a few numbers, no per-role objects)."""

    __slots__ = ("cost", "judge_in", "judge_out")

    def __init__(self) -> None:
        self.cost = 0.0
        self.judge_in = self.judge_out = 0

    def add(self, role: str, tokens_in: int, tokens_out: int, cost: float) -> None:
        self.cost += cost
        if role == "judge":
            self.judge_in += tokens_in
            self.judge_out += tokens_out


class _ThreadTallies(threading.local):
    """Each thread's open tallies (an empty list on a thread that never opened one)."""

    def __init__(self) -> None:
        self.scopes: list[Tally] = []


class UsageMeter:
    """Thread-safe totals of a run's model calls, per role, priced per endpoint."""

    def __init__(
        self, prices: dict[str, Price] | None = None, *, start: UsageSnapshot | None = None
    ) -> None:
        self.prices = {role: (prices or {}).get(role, Price()) for role in ROLES}
        self._totals = UsageSnapshot.of(start.as_dict() if start else None)
        self._lock = threading.Lock()
        self._local = _ThreadTallies()
        # No tally opened yet on any thread (a run without a judge never opens one):
        # record() then skips the thread-local lookup, the dearest part of its hot path.
        self._tallied = False
        self._in_flight = 0
        self._dearest_call = 0.0
        self._cost = self._totals.cost  # kept apart: the cap is checked before every call
        # Calls counted without the lock (role, tokens in, tokens out, reserved), priced and
        # added to the totals when next read (deque.append and popleft are atomic: nothing is
        # lost or counted twice).
        self._pending: deque[tuple[str, int, int, bool]] = deque()
        # The last snapshot (None before the first), and the roles with a call counted since.
        self._snapshot: UsageSnapshot | None = None
        self._changed: set[str] = set(ROLES)

    def start_call(self, max_cost: float) -> bool:
        """Reserve a call; False (nothing reserved) when what is spent plus every call
        in flight and this one, each priced as the dearest call so far, would pass
        `max_cost`. Each reserved call must be ended with `end_call`."""
        with self._lock:
            self._add_pending()
            if self._cost + (self._in_flight + 1) * self._dearest_call > max_cost:
                return False
            self._in_flight += 1
            return True

    def end_call(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def record(self, role: str, tokens_in: int, tokens_out: int, *, reserved: bool = False) -> None:
        """Count one completed call (`reserved`: it was started with start_call, which this ends).

        The hot path of accounting (every model call, from every evaluation thread): one
        atomic append, priced and added to the totals when they are next read, so the
        evaluation threads neither take nor wait for the meter's lock. A reserved call stays
        in flight until then: the next reservation reads the totals first, so it sees the
        call at its real price."""
        self._pending.append((role, tokens_in, tokens_out, reserved))
        if self._tallied:
            scopes = self._local.scopes
            if scopes:
                cost = self.prices[role].cost(tokens_in, tokens_out)
                for tally in scopes:
                    tally.add(role, tokens_in, tokens_out, cost)

    def _add_pending(self) -> None:
        """Add the calls counted since the last reading to the totals (the lock held)."""
        pending = self._pending
        while pending:
            role, tokens_in, tokens_out, reserved = pending.popleft()
            if reserved:
                self._in_flight -= 1
            cost = self.prices[role].cost(tokens_in, tokens_out)
            if cost > self._dearest_call:
                self._dearest_call = cost
            self._cost += cost
            self._changed.add(role)
            usage = self._totals.roles[role]
            usage.calls += 1
            usage.tokens_in += tokens_in
            usage.tokens_out += tokens_out
            usage.cost += cost

    def snapshot(self) -> UsageSnapshot:
        """A copy of the totals, cost rounded as stored (UsageSnapshot.of(as_dict()), without the JSON round trip:
        taken on the engine's thread at every budget update and iteration start). While
        no call was counted since, the same snapshot again: nobody changes one. A role
        with no call counted since keeps the Usage of the last one (most updates count
        task calls only)."""
        with self._lock:
            self._add_pending()
            changed, last = self._changed, self._snapshot
            if last is None or changed:
                self._snapshot = last = UsageSnapshot(
                    {
                        role: Usage(
                            usage.calls, usage.tokens_in, usage.tokens_out, round(usage.cost, 8)
                        )
                        if last is None or role in changed
                        else last.roles[role]
                        for role, usage in self._totals.roles.items()
                    }
                )
                changed.clear()
            return last

    def totals(self) -> JSONObject:
        """The JSON of Run.usage (UsageSnapshot.as_dict), built once (written with every budget update)."""
        with self._lock:
            self._add_pending()
            roles = [
                (role, usage.calls, usage.tokens_in, usage.tokens_out, usage.cost)
                for role, usage in self._totals.roles.items()
            ]
        totals: JSONObject = {
            role: {"calls": c, "tokens_in": i, "tokens_out": o, "cost": round(m, 8)}
            for role, c, i, o, m in roles
        }
        totals["total"] = {
            "calls": sum(r[1] for r in roles),
            "tokens_in": sum(r[2] for r in roles),
            "tokens_out": sum(r[3] for r in roles),
            "cost": round(sum(r[4] for r in roles), 8),
        }
        return totals

    @property
    def cost(self) -> float:
        if self._pending:
            with self._lock:
                self._add_pending()
        return self._cost  # one float read: atomic

    def open_tally(self) -> Tally:
        """Start counting what this thread's calls cost (one evaluation); end with close_tally."""
        tally = Tally()
        self._tallied = True  # set before the tally is open: this thread's next record() sees both
        self._local.scopes.append(tally)
        return tally

    def close_tally(self, tally: Tally) -> None:
        self._local.scopes.remove(tally)

    @contextmanager
    def scope(self) -> Iterator[Tally]:
        """What the calls made on this thread inside the block cost (yields a live Tally)."""
        tally = self.open_tally()
        try:
            yield tally
        finally:
            self.close_tally(tally)


class MeteredLM:
    """A LanguageModel whose every completed call is counted in a UsageMeter and,
    with `limits`, reserved against the run's cost cap before it starts."""

    def __init__(
        self, lm: LanguageModel, meter: UsageMeter, role: str, *, limits: BudgetGuard | None = None
    ) -> None:
        self.lm = lm
        self.meter = meter
        self.role = role
        self.limits = limits
        self.label = lm.label
        self.is_simulator = lm.is_simulator

    def __repr__(self) -> str:
        return f"MeteredLM({self.lm!r}, {self.role})"

    def complete(self, messages: list[dict[str, str]]) -> LMResponse:
        limits = self.limits
        cap = limits.max_cost if limits is not None else None
        if limits is None or cap is None:
            response = self.lm.complete(messages)
            self.meter.record(self.role, response.tokens_in, response.tokens_out)
            return response
        if not self.meter.start_call(cap):
            limits.refuse(REASON_COST)
        try:
            response = self.lm.complete(messages)
        except BaseException:
            self.meter.end_call()
            raise
        self.meter.record(
            self.role, response.tokens_in, response.tokens_out, reserved=True
        )  # ends the reservation
        return response


class BudgetGuard:
    """gepa's stopper (`(state) -> bool`) and the adapter's guard, for one run.

    Metric calls: stop before an iteration whose worst case (`iteration_cost`:
    parent and child on a minibatch, or a merge's subsample, plus the valset for
    an accepted child) does not fit in `budget_total - used`.
    Money: stop before an iteration when what is spent plus what one iteration
    has cost on average so far (at least the observed cost per metric call times
    the iteration's worst case) would pass the cap; a model call (task,
    reflection, judge) does not start when what is spent plus the calls in flight
    and itself, each priced as the dearest call so far, could pass the cap.
    Optional: stop at a perfect val score, or after N iterations without a better
    best val score. `reason` says which rule stopped the run.
    """

    def __init__(
        self,
        *,
        budget_total: int,
        iteration_cost: int,
        meter: UsageMeter,
        max_cost: float | None = None,
        stop_at_perfect: bool = False,
        patience: int | None = None,
        used_at_start: int = 0,
    ) -> None:
        self.budget_total = budget_total
        self.iteration_cost = iteration_cost
        self.meter = meter
        self.max_cost = max_cost
        self.stop_at_perfect = stop_at_perfect
        self.patience = patience
        self.reason: str | None = None
        self.used = used_at_start
        self.started = time.monotonic()
        self.used_at_start = used_at_start
        self.in_iteration = False
        self._cost_at_start = meter.cost
        self._iterations = 0
        self._best: float | None = None
        self._since_best = 0
        # gepa's iteration count (state.i) at the last check: a resumed run checks the
        # boundary its checkpoint was written at again, and must not count it twice.
        self._checked_at: int | None = None

    # -- gepa's stopper ----------------------------------------------------------

    def __call__(self, gepa_state: GEPAState[Any, Any]) -> bool:
        self.used = gepa_state.total_num_evals
        self.in_iteration = False
        if self.reason is None:
            self.reason = self._reason_to_stop(gepa_state)
        if self.reason is None:
            self._iterations += 1
            self.in_iteration = True  # gepa starts the next iteration right after a False
        return self.reason is not None

    def _reason_to_stop(self, state: GEPAState[Any, Any]) -> str | None:
        # gepa computes every candidate's average val score to give them: only
        # the early-stop rules need the best of them.
        if self.stop_at_perfect or self.patience:
            reason = self._early_stop(state)
            if reason is not None:
                return reason
        if self.budget_total - self.used < self.iteration_cost:
            return REASON_BUDGET
        if (
            self.max_cost is not None
            and self.meter.cost + self.expected_iteration_cost() > self.max_cost
        ):
            return REASON_COST
        return None

    def _early_stop(self, state: GEPAState[Any, Any]) -> str | None:
        scores = list(getattr(state, "program_full_scores_val_set", []) or [])
        best = max(scores) if scores else None
        at = getattr(state, "i", None)
        again = at is not None and at == self._checked_at
        self._checked_at = at
        if best is not None and not again:
            if self._best is None or best > self._best:
                self._best, self._since_best = best, 0
            elif self._iterations:
                self._since_best += 1
        if self.stop_at_perfect and best is not None and best >= 1.0:
            return REASON_PERFECT
        if self.patience and self._since_best >= self.patience:
            return no_improvement_reason(self.patience)
        return None

    def carried(self) -> dict[str, Any]:
        """The early-stop counters, carried in the checkpoint (optimizer.runs.checkpoint.CarriedState)."""
        return {"best": self._best, "since_best": self._since_best, "checked_at": self._checked_at}

    def restore(self, saved: dict[str, Any]) -> None:
        self._best = saved.get("best")
        self._since_best = int(saved.get("since_best") or 0)
        self._checked_at = saved.get("checked_at")

    def expected_iteration_cost(self) -> float:
        """What the next iteration should cost, from what this worker has observed."""
        spent = self.meter.cost - self._cost_at_start
        calls = self.used - self.used_at_start
        per_call = spent / calls if calls > 0 else 0.0
        per_iteration = spent / self._iterations if self._iterations else 0.0
        return max(per_iteration, per_call * self.iteration_cost)

    # -- the adapter's guard -----------------------------------------------------

    def note_used(self, used: int) -> None:
        """gepa's running count (on_budget_updated), between two evaluations."""
        self.used = used

    def check_batch(self, size: int) -> None:
        """Refuse a batch that would go beyond the budget. Only inside an iteration:
        the seed's valset evaluation, which gepa repeats uncounted on resume, is
        checked at launch (the budget must cover the valset)."""
        if self.in_iteration and self.used + size > self.budget_total:
            self.refuse(REASON_BUDGET)
        if self.max_cost is not None and self.meter.cost >= self.max_cost:
            self.refuse(REASON_COST)

    def refuse(self, reason: str) -> None:
        self.reason = self.reason or reason
        raise BudgetReached(reason)

    def seconds_per_call(self) -> float | None:
        calls = self.used - self.used_at_start
        return (time.monotonic() - self.started) / calls if calls > 0 else None

    def eta_seconds(self) -> float | None:
        """Wall time left at the pace observed on this worker (concurrency included)."""
        pace = self.seconds_per_call()
        if pace is None:
            return None
        return max(0, self.budget_total - self.used) * pace
