"""What turns an optimization into our rows and events.

gepa's callbacks reach these methods through optimizer.runs.recording_thread: in
gepa's order, on one writer thread, with what had to be read on the engine's
thread at the time (the adapter's records, the meter's reading) in the
event's `frontier_*` keys, and without gepa's live state (docs/gepa-notes.md
§4). Every payload follows optimizer/runs/event_types.py.

A new candidate (and its accepted proposal) is recorded once gepa has
checkpointed it (on_state_saved at the top of the next iteration, or the end of
the run), so the DB never holds a candidate the checkpoint does not: a worker
killed mid-iteration loses nothing we announced.

Resume (docs/gepa-notes.md §6): gepa re-evaluates the seed and fires its events again,
and re-runs the iteration that was in flight. Candidates already in the DB are
recognised by index and not recorded twice; rejected proposals and trials of an
iteration already recorded are not published twice.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any, TypedDict

from django.db import transaction
from django.db.models import Q, QuerySet

from dashboard.lib.db_retry import retry_db
from optimizer.front import front_members
from optimizer.models import Candidate, Evaluation, Origin, Run, RunEvent, run_progress
from optimizer.runs import event_types as ev
from optimizer.runs.adapter import MODEL_FAILED, EvalRecord, FrontierAdapter, candidate_digest
from optimizer.runs.budget import BudgetGuard, BudgetReached, UsageMeter, UsageSnapshot
from optimizer.runs.claims import ClaimLost, RunClaim
from optimizer.runs.event_types import preview
from optimizer.runs.events import publish_run_event, publish_run_events
from optimizer.runs.injections import Injected, mark_applied, refuse
from optimizer.tasksets.models import Split
from optimizer.val_summary import val_summary
from verifiers_app.engine.json_types import JSONObject

log = logging.getLogger(__name__)

MAX_REASONING_CHARS = 4000
# A run.budget event waits for the iteration's next batch at most this long.
BUDGET_PUBLISH_SECONDS = 1.0
MAX_REASONS = 5
#: A minibatch joins the trials event waiting before it (RunRecorder._add_trials)
#: only while that event then holds at most this many items (half the run page's
#: tail of trials, dashboard.selectors) and this many characters of outputs and
#: reasons, so joining never makes an event larger than that; one minibatch's
#: event, or a valset's, is as large as its items.
MAX_TRIAL_ITEMS = 60
MAX_TRIAL_CHARS = 30_000
#: Stands in `unpublished` for a batch's RUN_BUDGET event until it is published
#: (RunRecorder._take_reading): a batch replaces it at every budget update.
BUDGET_DUE: ev.Event = (ev.RUN_BUDGET, {})
#: The candidates' digests the recorder remembers (RunRecorder._digest), at most.
MAX_DIGESTS = 256

#: What RunRecorder.on_evaluation_end reads of gepa's event (all the writer is handed of it).
EVALUATION_END_KEYS = ("iteration", "candidate_idx", "scores", "parent_ids")

#: A gepa callback event as the recorder gets it: gepa's keys plus the `frontier_*`
#: ones optimizer.runs.recording_thread adds (records, usage readings).
CallbackEvent = dict[str, Any]


def front_change(
    index: int, front: dict[str, tuple[float, list[int]]]
) -> tuple[list[str], list[str]]:
    """What candidate `index`, just added to the per-task `front` (task → (top
    score, leaders)), changed there: the tasks it now leads alone (`took`:
    their leaders are [index]) and those where it ties the top (`joined`: index
    is appended to their leaders). A front.updated event carries only these, so
    the event log grows with tasks × candidates, not tasks × candidates²."""
    took: list[str] = []
    joined: list[str] = []
    for key, (_, leaders) in front.items():
        if leaders and leaders[-1] == index:
            (took if len(leaders) == 1 else joined).append(key)
    return sorted(took), sorted(joined)


def item_payload(record: EvalRecord) -> JSONObject:
    reasons = list(record.result.get("misses") or []) or (
        [record.feedback] if record.feedback else []
    )
    return {
        "task_key": record.task_key,
        "score": record.score,
        "verdict": record.verdict,
        "output": preview(record.output),
        "reasons": [preview(str(r), 500) for r in reasons[:MAX_REASONS]],
        # A verifier's judgment beside the run's verdict (docs/verifier-semantics.md
        # "Passed and verdict"); no verifier, no passed (an external run's adapter).
        "passed": record.passed if record.result.get("verifiers") else None,
    }


def trial_items(records: dict[tuple[str, str], EvalRecord]) -> dict[tuple[str, str], JSONObject]:
    """A minibatch evaluation's records as its trials' items, keyed as the
    adapter keys the records (candidate_digest, task key)."""
    return {key: item_payload(record) for key, record in records.items()}


def writes(
    method: Callable[[RunRecorder, CallbackEvent], None],
) -> Callable[[RunRecorder, CallbackEvent], None]:
    """A gepa callback that writes. gepa swallows a callback's exception
    (docs/gepa-notes.md §4), so the writing is made safe here: a transient database error
    is retried on a new connection (the callback's transaction rolled back whole,
    and its in-memory state changes only after a commit); once this worker lost
    its claim the callback does nothing (the runner's stopper ends the run).
    Inside a batch of the writer's (`deferring`) nothing is retried here: the
    batch's transaction rolls back whole, and retry_db never retries inside a
    transaction anyway."""

    @functools.wraps(method)
    def callback(self: RunRecorder, event: CallbackEvent) -> None:
        if self.claim is not None and self.claim.lost.is_set():
            return None
        try:
            if self.deferring:
                return method(self, event)
            return retry_db(
                lambda: method(self, event), what=f"run {self.run_id}: {method.__name__}"
            )
        except ClaimLost:
            return None

    return callback


@dataclass
class Slot:
    """One proposal of an iteration: a parent, its minibatch and scores, the
    proposed texts and the child's scores on the same minibatch."""

    parent: int | None
    minibatch: list[str] = field(default_factory=list)
    before: list[float] = field(default_factory=list)
    proposed: dict[str, str] = field(default_factory=dict)
    reasoning: str = ""
    after: list[float] | None = None
    resolved: bool = False  # accepted or rejected: published
    notes: list[JSONObject] | None = None  # the reviewer notes its reflection read

    def child(self, components: dict[int, dict[str, str]]) -> dict[str, str]:
        parent = components.get(self.parent, {}) if self.parent is not None else {}
        return {**parent, **self.proposed}


class NewCandidate(TypedDict):
    """A candidate gepa added to its pool, as _record_candidate records it."""

    index: int
    components: dict[str, str]
    parents: list[int]
    origin: str
    iteration: int
    metric_calls: int
    val_score: float
    records: dict[str, EvalRecord]
    reflection: str
    usage: JSONObject
    cost: float
    author: int | None  # origin human: the user's id, and the injection it came from
    author_name: str | None
    injection: int | None


class PendingCandidate(TypedDict):
    """An accepted candidate (and its proposal event) waiting for gepa's checkpoint."""

    candidate: NewCandidate
    proposal: JSONObject | None


def scored(failed: Iterable[bool]) -> bool:
    """Whether a candidate's val evaluation is a score: not when the task model
    answered none of its val tasks (each failed example scores 0, so that mean
    measures the endpoint, not the prompt). One answer is enough: a task the
    model refuses (a request over its context) scores 0 beside the others."""
    flags = list(failed)
    return not flags or not all(flags)


def unrecorded(task_key: str, score: float) -> EvalRecord:
    """A val task whose evaluation record is not at hand (gepa's score only)."""
    return EvalRecord(
        task_key=task_key,
        output="",
        score=score,
        verdict="fail",
        passed=False,
        result={},
        feedback="",
        objective_scores={},
    )


class RunRecorder:
    def __init__(
        self,
        *,
        run: Run,
        adapter: FrontierAdapter
        | None,  # None: a run that is not ours to execute (external, tests)
        valset: list[JSONObject],
        task_pks: dict[str, int],
        budget_total: int,
        claim: RunClaim | None = None,
        meter: UsageMeter | None = None,
        limits: BudgetGuard | None = None,
    ) -> None:
        self.run_id = run.pk
        self.claim = claim  # the runner's: every write below is conditional on it
        # Tokens and money: the meter counts every model call as it completes; the
        # run's totals are written with each budget update, a candidate's and a
        # proposal's are what their iteration spent (recorded once, here).
        self.meter = meter or UsageMeter(start=UsageSnapshot.of(run.usage))
        self.limits = limits
        self.spent_before = self.meter.snapshot()  # the seed's evaluation starts now
        self.adapter = adapter
        self.valset = valset
        self.task_pks = task_pks
        self.budget_total = budget_total
        self.metric_calls = run.budget_used
        # Resume state, read back from the DB.
        self.components: dict[int, dict[str, str]] = {}
        self._digests: dict[tuple[tuple[str, str], ...], str] = {}  # see _digest
        self.front: dict[
            str, tuple[float, list[int]]
        ] = {}  # task_key → (top score, candidates with it)
        # The val score of every candidate that has one: not of a candidate the task
        # model answered none of its val tasks for (see `scored`), which best ignores.
        self.val_scores: dict[int, float] = {}
        self.task_scores: dict[
            int, dict[str, float]
        ] = {}  # index → val task → score (optimizer.front)
        self.members: set[int] = set()
        for c in Candidate.objects.filter(run=run).prefetch_related("evaluations"):
            if c.on_front:
                self.members.add(c.index)
            self.components[c.index] = c.components
            val = [e for e in c.evaluations.all() if e.split == Split.VAL]
            if scored(not e.output and e.feedback.startswith(MODEL_FAILED) for e in val):
                self.val_scores[c.index] = c.val_score or 0.0
            self.task_scores[c.index] = {e.task_key: e.score for e in val}
            self._add_to_front(c.index, self.task_scores[c.index])
        self.last_recorded_iteration = max(
            (
                p["iteration"]
                for p in RunEvent.objects.filter(run=run, type=ev.PROPOSAL).values_list(
                    "payload", flat=True
                )
            ),
            default=0,
        )
        # Appended by the runner's reflection wrapper on the engine's thread; the
        # RecorderThread hands them over with on_iteration_end.
        self.reflection_errors: list[str] = []
        # The adapter's evaluation records, handed over with each valset evaluation's
        # events, and a minibatch evaluation's as its trials' items (trial_items).
        self.records: dict[tuple[str, str], EvalRecord] = {}
        self.trials: dict[tuple[str, str], JSONObject] = {}
        self.optimizing = False
        # Accepted candidates (with their proposal events) waiting for gepa's checkpoint.
        self.pending: list[PendingCandidate] = []
        self.unpublished: list[ev.Event] = []
        # The trials payload in `unpublished` that _add_trials made last, and its
        # items' characters: the only one later minibatches may join.
        self.folding: tuple[JSONObject, int] | None = None
        self.published_at = time.monotonic()
        # While set (a batch of callbacks the writer writes in one transaction),
        # what is published waits in `unpublished` for `publish_waiting`.
        self.deferring = False
        self.progress_due: dict[str, Any] | None = None  # the progress row's last reading, then
        # The batch's last budget reading (usage, eta, metric calls), until it is published:
        # only the last one of a batch is written, so only that one becomes its fields and event.
        self.reading_due: tuple[UsageSnapshot, float | None, int] | None = None
        self._reset_iteration()

    def _reset_iteration(self) -> None:
        """One iteration holds one proposal, or several with parallel proposals
        (gepa fires each stage's events for every proposal, in the same order):
        a slot per sampled parent, filled in as its events arrive."""
        self.iteration = 0
        self.slots: list[Slot] = []
        self.parent_evaluations = 0  # parents' minibatch evaluations ended so far
        self.started: deque[tuple[Slot | None, list[str]]] = (
            deque()
        )  # evaluations started, not ended
        self.proposed: deque[tuple[dict[str, str], str]] = (
            deque()
        )  # proposal texts waiting for their child's evaluation
        self.proposal_starts = 0
        self.proposal_ends = 0
        self.merge_parents: list[int] | None = None

    def _replayed(self, iteration: int) -> bool:
        return iteration <= self.last_recorded_iteration

    # -- gepa callbacks ---------------------------------------------------------

    def on_iteration_start(self, event: CallbackEvent) -> None:
        self._reset_iteration()
        self.iteration = event["iteration"]
        self.spent_before = event["frontier_usage"]
        self.records.clear()
        self.trials.clear()
        if not self.optimizing:
            self._announce_optimizing(event)

    @writes
    def _announce_optimizing(self, event: CallbackEvent) -> None:
        """The phase "optimizing", once gepa's first iteration starts, unless a
        user asked to stop, pause or cancel meanwhile: this write may come after
        that request (the writer's thread lags the engine's), whose phase stays."""
        with transaction.atomic():
            asked = Q(stop_requested=True) | Q(pause_requested=True) | Q(cancel_requested=True)
            if self._runs().exclude(asked).update(phase="optimizing"):
                status = Run.objects.values_list("status", flat=True).get(pk=self.run_id)
                publish_run_event(
                    self.run_id,
                    ev.RUN_STATUS,
                    {"status": status, "phase": "optimizing"},
                    claim=self.claim,
                )
        self.optimizing = True

    def on_candidate_selected(self, event: CallbackEvent) -> None:
        self.slots.append(Slot(parent=event["candidate_idx"]))

    @staticmethod
    def _is_merge(event: CallbackEvent) -> bool:
        return event["candidate_idx"] is None and len(event["parent_ids"]) > 1

    def on_evaluation_start(self, event: CallbackEvent) -> None:
        if self._is_merge(event):
            return
        minibatch = [row["task_id"] for row in event["inputs"]]
        slot = None
        if event["candidate_idx"] is None:  # a child: its slot has this parent and minibatch
            parent = event["parent_ids"][0] if event["parent_ids"] else None
            slot = next(
                (
                    s
                    for s in self.slots
                    if s.parent == parent
                    and s.minibatch == minibatch
                    and s.after is None
                    and not s.proposed
                ),
                None,
            )
            if slot is not None and self.proposed:
                slot.proposed, slot.reasoning = self.proposed.popleft()
        self.started.append((slot, minibatch))

    def on_evaluation_end(self, event: CallbackEvent) -> None:
        """A minibatch evaluation: a parent's (candidate known) or a child's (not
        yet in the pool). Of gepa's event it reads EVALUATION_END_KEYS only."""
        # One event may hand over the items of several evaluations (a round of parallel proposals).
        self.trials.update(event["frontier_trials"])
        if self._is_merge(event) or not self.started:
            return
        slot, minibatch = self.started.popleft()
        if event["candidate_idx"] is not None:
            if self.parent_evaluations < len(self.slots):
                slot = self.slots[self.parent_evaluations]
                slot.minibatch, slot.before = minibatch, list(event["scores"])
            self.parent_evaluations += 1
            candidate = self.components.get(event["candidate_idx"])
        elif slot is not None:
            slot.after = list(event["scores"])
            candidate = slot.child(self.components)
        else:
            candidate = None
        if self._replayed(event["iteration"]) or candidate is None:
            return
        digest = self._digest(candidate)
        taken = (self.trials.pop((digest, key), None) for key in minibatch)
        items = [item for item in taken if item is not None]
        if items:  # published with the iteration's next batch (see on_budget_updated)
            self._add_trials(event["candidate_idx"], items)

    def _add_trials(self, index: int | None, items: list[JSONObject]) -> None:
        """A minibatch's trials, waiting to be published: in the trials event
        waiting last when this method made it for the same candidate (only the
        run's waiting RUN_BUDGET event, which every budget update moves to the
        end, after it) and the items fit (MAX_TRIAL_ITEMS, MAX_TRIAL_CHARS), else
        in an event of their own. With a fast model gepa evaluates the same
        candidate ~70 times between two writes: one event for them, not 70 rows
        and messages each with its own seq. A new dict, so no row or message
        already made from one is changed."""
        chars = sum(len(item["output"]) + sum(map(len, item["reasons"])) for item in items)
        for n in range(len(self.unpublished) - 1, -1, -1):
            kind, waiting = self.unpublished[n]
            if kind == ev.RUN_BUDGET:
                continue
            folding = self.folding
            if (
                folding is not None
                and waiting is folding[0]
                and waiting["candidate"] == index
                and len(waiting["items"]) + len(items) <= MAX_TRIAL_ITEMS
                and folding[1] + chars <= MAX_TRIAL_CHARS
            ):
                payload = {**waiting, "items": waiting["items"] + items}
                self.unpublished[n] = (ev.TRIALS, payload)
                self.folding = (payload, folding[1] + chars)
                return
            break
        payload = {"candidate": index, "split": Split.TRAIN, "items": items}
        self.unpublished.append((ev.TRIALS, payload))
        # A proposal's child (no index yet) is one evaluation: nothing joins it.
        self.folding = (payload, chars) if index is not None else None

    def on_proposal_start(self, event: CallbackEvent) -> None:
        self.proposal_starts += 1
        read = event.get("frontier_notes")
        if not read:
            return
        # The slot whose minibatch the reflective dataset was built from (with
        # parallel proposals, the first such slot still without its notes).
        slot = next(
            (s for s in self.slots if s.notes is None and s.minibatch == read["minibatch"]), None
        )
        if slot is not None:
            slot.notes = [
                {
                    "id": note["id"],
                    "task_key": note["task_key"],
                    "author": note["author"],
                    "text": preview(note["text"]),
                }
                for note in read["notes"]
            ]

    def on_proposal_end(self, event: CallbackEvent) -> None:
        self.proposal_ends += 1
        raw = "\n\n".join(str(v) for v in (event.get("raw_lm_outputs") or {}).values())
        # Proposal ends come in the order their children are then evaluated.
        self.proposed.append(
            (
                dict(event["new_instructions"]),
                preview(raw, MAX_REASONING_CHARS),
            )
        )

    @writes
    def on_budget_updated(self, event: CallbackEvent) -> None:
        """gepa updates the budget after every evaluation (several times an
        iteration). The run's progress row is written each time; the RUN_BUDGET event is
        folded into the iteration's next batch (replacing an earlier one still
        waiting there), and sent on its own only when nothing was published for
        BUDGET_PUBLISH_SECONDS, so a slow iteration still moves the budget bar."""
        self.metric_calls = event["metric_calls_used"]
        if self.deferring:  # the batch writes the last reading once (publish_waiting)
            self.reading_due = (event["frontier_usage"], event["frontier_eta"], self.metric_calls)
            budget = BUDGET_DUE  # its RUN_BUDGET event, made when the batch is published
        else:
            self.reading_due = None  # superseded by this reading, written now
            with transaction.atomic():
                budget = self.save_usage(event["frontier_usage"], event["frontier_eta"])
        self._drop_waiting_budget()
        self.unpublished.append(budget)
        if time.monotonic() - self.published_at >= BUDGET_PUBLISH_SECONDS:
            self._publish()

    def publish_usage(self) -> None:
        """Write and publish what the meter reads now (the last calls: the final
        reflection, a refused iteration's minibatch), with the events still
        waiting; a budget reading or event still waiting is superseded by it.
        Called by the runner once the writer has ended. Like every batch, the
        waiting events leave `unpublished` only once committed (`_publish`), so
        a retry after a failed commit still sends them."""
        self.reading_due = None
        self._drop_waiting_budget()
        with transaction.atomic():
            self._publish(self.save_usage())

    def _drop_waiting_budget(self) -> None:
        """A newer reading supersedes the RUN_BUDGET event still waiting (or BUDGET_DUE)."""
        self.unpublished = [e for e in self.unpublished if e[0] != ev.RUN_BUDGET]

    def save_usage(self, at: UsageSnapshot | None = None, eta: float | None = None) -> ev.Event:
        """Write the run's metric calls, tokens and cost (the meter's reading `at`
        the budget update, else now); returns the RUN_BUDGET event to publish."""
        progress, budget = self._progress(at, eta)
        self._write_progress(progress)
        return budget

    def _write_progress(self, progress: dict[str, Any]) -> None:
        if self.claim is not None:
            self.claim.update(
                **progress
            )  # the narrow progress row, while this worker holds the run
        else:
            run_progress(self.run_id).update(**progress)

    def _progress(
        self, at: UsageSnapshot | None = None, eta: float | None = None, used: int | None = None
    ) -> tuple[dict[str, Any], ev.Event]:
        """The progress row's fields and the RUN_BUDGET event for the meter's reading
        `at` (and `used` metric calls: by default the last count gepa reported)."""
        usage = at.as_dict() if at is not None else self.meter.totals()
        total = usage["total"]
        used = self.metric_calls if used is None else used
        progress = {"budget_used": used, "usage": usage, "cost": total["cost"]}
        limits = self.limits
        if at is None and limits is not None:
            eta = limits.eta_seconds()
        return progress, (
            ev.RUN_BUDGET,
            {
                "used": used,
                "total": self.budget_total,
                "cost": total["cost"],
                "max_cost": limits.max_cost if limits else None,
                "tokens": total["tokens_in"] + total["tokens_out"],
                "usage": usage,
                "eta_seconds": round(eta, 1) if eta is not None else None,
            },
        )

    def spent_this_iteration(self, now: UsageSnapshot) -> UsageSnapshot:
        """What the iteration has spent up to `now` (the meter's reading when gepa reported)."""
        return now.minus(self.spent_before)

    def _take_record(self, candidate: dict[str, str], task_key: str) -> EvalRecord | None:
        return self.records.pop((self._digest(candidate), task_key), None)

    def _digest(self, candidate: dict[str, str]) -> str:
        """candidate_digest, remembered per text: a run evaluates a few candidates
        thousands of times, each time on its minibatch's tasks."""
        key = tuple(candidate.items())
        digest = self._digests.get(key)
        if digest is None:
            if len(self._digests) >= MAX_DIGESTS:
                self._digests.clear()
            digest = self._digests[key] = candidate_digest(candidate)
        return digest

    def on_merge_attempted(self, event: CallbackEvent) -> None:
        self.merge_parents = list(event["parent_ids"])

    @writes
    def on_valset_evaluated(self, event: CallbackEvent) -> None:
        index = event["candidate_idx"]
        if index in self.components:  # the seed again after a resume, or a replayed iteration
            return
        parents = [p for p in event["parent_ids"] if p is not None]
        if index == 0:
            origin, metric_calls = Origin.SEED, event["total_valset_size"]
            # gepa counts the seed's valset before its budget events exist (docs/gepa-notes.md §5).
            self.metric_calls = max(self.metric_calls, metric_calls)
        else:
            origin = Origin.MERGE if len(parents) > 1 else Origin.REFLECTION
            metric_calls = self.metric_calls
        components = dict(event["candidate"])
        spent = self.spent_this_iteration(event["frontier_usage"])
        self.records.update(event["frontier_records"])
        records: dict[str, EvalRecord] = {}
        for val_id, score in event["scores_by_val_id"].items():
            key = self.valset[val_id]["task_id"]
            records[key] = self._take_record(components, key) or unrecorded(key, score)
        candidate: NewCandidate = {
            "index": index,
            "components": components,
            "parents": parents,
            "origin": origin,
            "iteration": event["iteration"],
            "metric_calls": metric_calls,
            "val_score": event["average_score"],
            "records": records,
            "reflection": "",
            "usage": spent.as_dict(),
            "cost": spent.cost,
            "author": None,
            "author_name": None,
            "injection": None,
        }
        if index == 0:
            self._record_candidate(**candidate)
        else:
            # Recorded once gepa has checkpointed it (_flush_pending).
            self.pending.append({"candidate": candidate, "proposal": None})

    def on_candidate_injected(self, event: CallbackEvent) -> None:
        """A user's candidate the runner added to gepa's state at an iteration
        boundary (optimizer/runs/injections.py). Recorded, and its injection marked
        applied, once gepa's checkpoint holds it (_flush_pending), like any other."""
        injected: Injected = event["frontier_injected"]
        waiting = {p["candidate"]["index"] for p in self.pending}
        if injected.index in self.components or injected.index in waiting:
            return  # recorded already, or handed over twice
        self.records.update(injected.records)
        records: dict[str, EvalRecord] = {}
        for val_id, score in injected.scores_by_val_id.items():
            key = self.valset[val_id]["task_id"]
            records[key] = self._take_record(injected.components, key) or unrecorded(key, score)
        scores = list(injected.scores_by_val_id.values())
        spent = injected.spent
        candidate: NewCandidate = {
            "index": injected.index,
            "components": injected.components,
            "parents": injected.parents,
            "origin": Origin.HUMAN,
            "iteration": injected.iteration,
            "metric_calls": self.metric_calls,
            "val_score": fmean(scores) if scores else 0.0,
            "records": records,
            "reflection": "",
            "usage": spent.as_dict() if spent is not None else {},
            "cost": spent.cost if spent is not None else 0.0,
            "author": injected.author_id,
            "author_name": injected.author,
            "injection": injected.injection,
        }
        self.pending.append({"candidate": candidate, "proposal": None})

    @writes
    def on_injection_refused(self, event: CallbackEvent) -> None:
        """The runner could not apply an injection (the budget no longer covers a val evaluation)."""
        injection, reason = event["frontier_refusal"]
        with transaction.atomic():
            refused = refuse(injection, reason)
            if refused:
                self._publish(*refused)

    def on_candidate_accepted(self, event: CallbackEvent) -> None:
        waiting = next(
            (p for p in self.pending if p["candidate"]["index"] == event["new_candidate_idx"]), None
        )
        if waiting is None or self.merge_parents is not None:
            return  # merges publish no reflection proposal
        components = waiting["candidate"]["components"]
        slot = next(
            (s for s in self.slots if not s.resolved and s.child(self.components) == components),
            None,
        )
        if slot is None:
            return
        slot.resolved = True
        waiting["candidate"]["reflection"] = slot.reasoning
        waiting["proposal"] = self._proposal(
            slot,
            accepted=True,
            candidate=event["new_candidate_idx"],
            before=sum(slot.before),
            after=event["new_score"],
            now=event["frontier_usage"],
        )

    @writes
    def on_candidate_rejected(self, event: CallbackEvent) -> None:
        """The event names no proposal: it is the first unresolved one with these
        before/after sums (gepa reports rejections in proposal order)."""
        slot = next(
            (
                s
                for s in self.slots
                if not s.resolved
                and s.after is not None
                and sum(s.before) == event["old_score"]
                and sum(s.after) == event["new_score"]
            ),
            None,
        )
        if slot is None:
            return
        if not self._replayed(self.iteration):
            proposal = self._proposal(
                slot,
                accepted=False,
                candidate=None,
                before=event["old_score"],
                after=event["new_score"],
                now=event["frontier_usage"],
            )
            self._publish((ev.PROPOSAL, proposal))
        slot.resolved = True  # only once published: a retried write finds the slot again

    @writes
    def on_state_saved(self, event: CallbackEvent) -> None:
        self._flush_pending()

    @writes
    def on_optimization_end(self, event: CallbackEvent) -> None:
        self._flush_pending()  # gepa saved the final state just before

    def _flush_pending(self) -> None:
        """Record the last iteration's accepted candidates now that gepa's
        checkpoint holds them. Checkpoint first, then record: a worker killed in
        between leaves a candidate gepa will not re-propose but we never
        announced, instead of one we announced that gepa forgets and proposes anew."""
        while (
            self.pending
        ):  # each one leaves the list once committed (a retried write resumes here)
            waiting = self.pending[0]
            proposal = (
                [(ev.PROPOSAL, waiting["proposal"])] if waiting["proposal"] is not None else []
            )
            self._record_candidate(**waiting["candidate"], then=proposal)
            self.pending.pop(0)

    @writes
    def on_iteration_end(self, event: CallbackEvent) -> None:
        missing = self.proposal_starts - self.proposal_ends
        budget_stop = event["frontier_budget_stop"]
        errors = event["frontier_reflection_errors"]
        if missing > 0 and not self._replayed(event["iteration"]) and not budget_stop:
            cause = errors[-1] if errors else "the reflection returned no new text"
            error = {
                "where": "reflection",
                "message": preview(f"Reflection failed: {cause}", 1000),
                "iteration": event["iteration"],
            }
            self._publish((ev.ERROR, error))
        elif self.unpublished:
            self._publish()

    @writes
    def on_error(self, event: CallbackEvent) -> None:
        if isinstance(event["exception"], BudgetReached):
            return  # not an error: the run ends with its stop reason
        if isinstance(event["exception"], ClaimLost) or (
            self.claim is not None and self.claim.lost.is_set()
        ):
            return  # not this worker's run any more: nothing to say in its log
        if not event.get("will_continue", True):
            return  # the exception ends the run: the runner writes it, once (runner._finish)
        publish_run_event(
            self.run_id,
            ev.ERROR,
            {
                "where": "runner",
                "message": preview(str(event["exception"]), 1000),
                "iteration": event["iteration"],
            },
            claim=self.claim,
        )

    # -- writing ----------------------------------------------------------------

    def _runs(self) -> QuerySet[Run]:
        """The run row, if this worker still holds it (all of it without a claim: tests)."""
        return self.claim.runs() if self.claim is not None else Run.objects.filter(pk=self.run_id)

    def _publish(self, *events: ev.Event, progress: dict[str, Any] | None = None) -> None:
        """Publish what waits in `unpublished`, then `events`, as one batch
        (one transaction and one channel-layer call: cheaper per iteration),
        with the progress row's `progress` fields in the same UPDATE.
        `unpublished` is emptied only once the batch is written (after the
        commit when inside a transaction), so a retried callback loses nothing.
        While `deferring`, the events only join `unpublished`."""
        if self.deferring:
            self.unpublished.extend(events)
            return
        self._take_reading()
        publish_run_events(
            self.run_id, [*self.unpublished, *events], claim=self.claim, progress=progress
        )
        if transaction.get_connection().in_atomic_block:
            transaction.on_commit(self._published)
        else:
            self._published()

    @writes
    def publish_waiting(self, event: CallbackEvent) -> None:
        """End `deferring`: publish what waits, as one batch of events, with the
        progress row's last reading (one UPDATE for both)."""
        self.deferring = False
        self._take_reading()
        if self.unpublished:
            self._publish(progress=self.progress_due)
        elif self.progress_due is not None:
            self._write_progress(self.progress_due)
        self.progress_due = None

    def _take_reading(self) -> None:
        """Turn the batch's last budget reading into the progress row's fields
        (`progress_due`) and its RUN_BUDGET event, in its place in `unpublished`
        (BUDGET_DUE is there exactly while `reading_due` is set)."""
        reading, self.reading_due = self.reading_due, None
        if reading is None:
            return
        self.progress_due, budget = self._progress(*reading)
        self.unpublished = [budget if e is BUDGET_DUE else e for e in self.unpublished]

    def _published(self) -> None:
        self.unpublished.clear()
        self.folding = None
        self.published_at = time.monotonic()

    def _proposal(
        self,
        slot: Slot,
        *,
        accepted: bool,
        candidate: int | None,
        before: float,
        after: float,
        now: UsageSnapshot,
    ) -> JSONObject:
        # What the iteration has spent so far (with parallel proposals, the round's proposals share it).
        spent = self.spent_this_iteration(now)
        return {
            "iteration": self.iteration,
            "parent": slot.parent,
            "components": sorted(slot.proposed),
            "accepted": accepted,
            "candidate": candidate,
            "before": before,
            "after": after,
            "minibatch": slot.minibatch,
            "texts": {name: preview(text) for name, text in slot.proposed.items()},
            "reasoning": slot.reasoning,
            "metric_calls": self.metric_calls,
            "usage": spent.as_dict(),
            "cost": round(spent.cost, 8),
            "notes": slot.notes or [],
        }

    def record_evaluations(
        self, *, candidate: Candidate, split: str, records: list[EvalRecord]
    ) -> ev.Event:
        """Save the Evaluation rows; returns their TRIALS event for the caller to publish."""
        Evaluation.objects.bulk_create(
            [
                Evaluation(
                    candidate=candidate,
                    run_id=candidate.run_id,
                    task_id=self.task_pks.get(r.task_key),
                    task_key=r.task_key,
                    split=split,
                    output=r.output,
                    score=min(1.0, max(0.0, r.score)),
                    verdict=r.verdict,
                    passed=r.passed,
                    result=r.result,
                    feedback=r.feedback,
                    attempts=r.attempts,
                    latency_ms=r.latency_ms,
                    tokens_in=r.tokens_in,
                    tokens_out=r.tokens_out,
                    judge_tokens_in=r.judge_tokens_in,
                    judge_tokens_out=r.judge_tokens_out,
                    cost=r.cost,
                )
                for r in records
            ],
            update_conflicts=True,
            unique_fields=["candidate", "task_key", "split"],
            update_fields=[
                "output",
                "score",
                "verdict",
                "passed",
                "result",
                "feedback",
                "attempts",
                "latency_ms",
                "tokens_in",
                "tokens_out",
                "judge_tokens_in",
                "judge_tokens_out",
                "cost",
            ],
        )
        return ev.TRIALS, {
            "candidate": candidate.index,
            "split": split,
            "items": [item_payload(r) for r in records],
        }

    def _record_candidate(
        self,
        *,
        index: int,
        components: dict[str, str],
        parents: list[int],
        origin: str,
        iteration: int,
        metric_calls: int,
        val_score: float,
        records: dict[str, EvalRecord],
        reflection: str,
        usage: JSONObject,
        cost: float,
        author: int | None = None,
        author_name: str | None = None,
        injection: int | None = None,
        then: Sequence[ev.Event] = (),
    ) -> None:
        objective_ids = sorted({vid for r in records.values() for vid in r.objective_scores})
        objective_scores = {
            vid: fmean(r.objective_scores.get(vid, 0.0) for r in records.values())
            for vid in objective_ids
        }
        task_scores = {key: r.score for key, r in records.items()}
        has_score = scored(r.failed for r in records.values())
        # The in-memory state changes only once the rows are committed (a retry after a database error starts over).
        val_scores = {**self.val_scores, index: val_score} if has_score else self.val_scores
        front = dict(self.front)
        self._add_to_front(index, task_scores, front)
        took, joined = front_change(index, front)
        all_task_scores = {**self.task_scores, index: task_scores}
        members = front_members(all_task_scores)
        best_index = max(val_scores, key=lambda i: (val_scores[i], -i)) if val_scores else None
        answered = [r for r in records.values() if r.tokens_in or r.tokens_out]
        prompt_text = "\n\n".join(components.values())
        # Stored with the candidate: the run page reads these, not the Evaluation rows.
        stored_scores, summary = val_summary(
            (key, r.score, r.verdict, r.tokens_in, r.tokens_out, r.latency_ms)
            for key, r in records.items()
        )
        with transaction.atomic():
            if self.claim is not None:
                self.claim.hold()  # the run row stays locked, and ours, until this commits
            candidate = Candidate.objects.create(
                run_id=self.run_id,
                index=index,
                components=components,
                parents=parents,
                origin=origin,
                iteration=iteration,
                metric_calls=metric_calls,
                val_score=val_score,
                objective_scores=objective_scores,
                reflection=reflection,
                usage=usage,
                cost=cost,
                val_task_scores=stored_scores,
                val_summary=summary,
                author_id=author,
            )
            on_front = Candidate.objects.filter(run_id=self.run_id)
            on_front.filter(index__in=self.members - set(members)).update(on_front=False)
            on_front.filter(index__in=set(members) - self.members).update(on_front=True)
            updates: dict[str, Any] = {}
            if best_index == index:
                updates = {"best_candidate_id": candidate.pk, "best_score": val_score}
            if index == 0 and has_score:
                updates["seed_score"] = val_score
            if updates:
                self._runs().update(**updates)
            announced = (
                ev.CANDIDATE_NEW,
                {
                    "index": index,
                    "parents": parents,
                    "origin": origin,
                    "iteration": iteration,
                    "metric_calls": metric_calls,
                    "val_score": val_score,
                    "scored": has_score,
                    "objective_scores": objective_scores,
                    "task_scores": task_scores,
                    "verdicts": {key: r.verdict for key, r in records.items()},
                    "prompt_chars": len(prompt_text),
                    "prompt_tokens": round(fmean(r.tokens_in for r in answered)) if answered else 0,
                    "mean_output_tokens": fmean(r.tokens_out for r in answered)
                    if answered
                    else 0.0,
                    "mean_latency_ms": fmean(r.latency_ms for r in answered) if answered else 0.0,
                    "components": {name: preview(text) for name, text in components.items()},
                    "usage": usage,
                    "cost": round(cost, 8),
                    **({"author": author_name or ""} if origin == Origin.HUMAN else {}),
                },
            )
            trials = self.record_evaluations(
                candidate=candidate, split=Split.VAL, records=list(records.values())
            )
            front_event = (
                ev.FRONT_UPDATED,
                {
                    "index": index,
                    "took": took,
                    "joined": joined,
                    "added": sorted(set(members) - self.members),
                    "removed": sorted(self.members - set(members)),
                    "best_index": best_index,
                    "best_score": None if best_index is None else val_scores[best_index],
                },
            )
            applied = mark_applied(injection, index) if injection is not None else []
            self._publish(announced, trials, front_event, *applied, *then)
        self.components[index] = components
        self.val_scores = val_scores
        self.front = front
        self.task_scores = all_task_scores
        self.members = set(members)

    def _add_to_front(
        self,
        index: int,
        task_scores: dict[str, float],
        front: dict[str, tuple[float, list[int]]] | None = None,
    ) -> None:
        """The per-task front: for each val task, every candidate with the top score (ties included)."""
        front = self.front if front is None else front
        for key, score in task_scores.items():
            top, leaders = front.get(key, (None, []))
            if top is None or score > top:
                front[key] = (score, [index])
            elif score == top:
                front[key] = (top, [*leaders, index])
