"""External runs: GEPA runs driven by their owner's own process.

The `frontier_tracker` client (clients/python) is a gepa callback that turns
gepa's events into the small event stream validated here, and posts it in
numbered batches to /api/external/ (optimizer/external/api.py). Each batch is
applied in one transaction onto the SAME rows and run events a native run's
recorder writes (optimizer.runs.recorder.RunRecorder does the writing), so the run
page, compare views and downloads work for both kinds unchanged.

Ordering and idempotency: batch `seq` n is applied only after n - 1; a batch
whose seq was already applied is acknowledged and ignored (the client resends
a batch whose answer it never got), a gap is refused (409) so nothing is
applied out of order. Everything in a batch is validated first, so a bad batch
changes nothing: beyond its schema, an event the run makes impossible (a
candidate whose parent is not in the run, a budget that shrinks or runs past
what gepa can spend, anything after `finished`) is a 400 naming the event.

Limits (docs/external-runs.md "Limits"): at most MAX_BATCH_EVENTS events a
batch; FRONTIER_EXTERNAL_EVENTS_PER_RUN events a run; a user's batches may
carry FRONTIER_EXTERNAL_EVENTS_PER_MINUTE events a minute (beyond it: a 429
with Retry-After, which the tracker waits out); and an external run counts
against the user's active runs like a native one.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Literal, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from optimizer.config import MAX_METRIC_CALLS, config_problems
from optimizer.export import MAX_TEXT
from optimizer.models import Candidate, Origin, Run, RunKind, RunStatus, run_progress
from optimizer.runs import event_types as ev
from optimizer.runs.adapter import MAX_OUTPUT_CHARS, EvalRecord
from optimizer.runs.claims import RunClaim
from optimizer.runs.event_types import preview
from optimizer.runs.events import publish_run_event
from optimizer.runs.limits import active_runs_problem, run_limits_for
from optimizer.runs.recorder import (
    MAX_REASONING_CHARS,
    RunRecorder,
    item_payload,
)
from optimizer.runs.summary import SILENT_AFTER_SECONDS
from optimizer.tasksets.models import Split, TaskSet
from verifiers_app.engine.aggregate import Thresholds
from verifiers_app.engine.json_types import JSONObject

if TYPE_CHECKING:
    from django.contrib.auth.models import User

log = logging.getLogger(__name__)

Model = TypeVar("Model", bound=BaseModel)

MAX_BATCH_EVENTS = 500
MAX_TASKS = 10_000
MAX_MINIBATCH = 1000
# gepa checks its budget between iterations, so a run may end past it by one
# iteration's calls: a full val pass of a new candidate and two minibatches.
MAX_OVERSHOOT = MAX_TASKS + 2 * MAX_MINIBATCH


def _storable(text: str) -> str:
    if "\x00" in text:  # PostgreSQL stores no U+0000 in text or jsonb
        raise ValueError("contains a NUL character (U+0000), which cannot be stored")
    return text


Score = Annotated[float, Field(allow_inf_nan=False)]
# Numbers are JSON numbers: "2" is not 2 (strict), and a bool is no count.
Number = Annotated[int, Field(strict=True, ge=0, le=2**31 - 1)]
Key = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_storable)]
Short = Annotated[str, Field(max_length=200), AfterValidator(_storable)]  # Run.name
Phase = Annotated[str, Field(max_length=100), AfterValidator(_storable)]  # Run.phase
Long = Annotated[str, Field(max_length=MAX_OUTPUT_CHARS), AfterValidator(_storable)]
Text = Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(_storable)]
Version = Annotated[str, Field(max_length=50), AfterValidator(_storable)]


class ExternalRunError(ValueError):
    """A request the server refuses; `problems` are (field, message) pairs.
    `conflict` marks refusals about the run's state or batch order (HTTP 409)."""

    def __init__(self, problems: list[tuple[str, str]], *, conflict: bool = False):
        super().__init__("; ".join(f"{field}: {message}" for field, message in problems))
        self.problems = problems
        self.conflict = conflict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExternalRunOpen(_Strict):
    key: Annotated[str, Field(min_length=8, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]
    name: Short = ""
    host: Short = ""
    gepa_version: Version = ""
    client_version: Version = ""
    python_version: Version = ""
    source: Literal["tracker", "replay"] = "tracker"
    budget_total: Annotated[int, Field(strict=True, ge=0, le=MAX_METRIC_CALLS)] = 0
    task_set_id: int | None = Field(
        default=None,
        strict=True,
        ge=1,
        le=2**31 - 1,
        description="A task set of yours whose task_ids the run's task keys are",
    )


class TaskResult(_Strict):
    task_key: Key
    score: Score
    output: Long = ""
    feedback: Long = ""
    objectives: dict[Key, Score] = {}


class BudgetEvent(_Strict):
    type: Literal["budget"]
    used: Annotated[int, Field(strict=True, ge=0, le=MAX_METRIC_CALLS + MAX_OVERSHOOT)]
    total: Annotated[int, Field(strict=True, ge=0, le=MAX_METRIC_CALLS)] | None = None


class UsageEvent(_Strict):
    """What the run's models spent so far (totals, every role), where the
    tracker could read it (litellm's usage and cost, or `tracker.report_usage`).
    `cost` null: tokens were counted but no price was known."""

    type: Literal["usage"]
    calls: Number = 0
    tokens_in: Number = 0
    tokens_out: Number = 0
    cost: Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)] | None = None


class StatusEvent(_Strict):
    type: Literal["status"]
    phase: Phase


class CandidateEvent(_Strict):
    type: Literal["candidate"]
    index: Number
    components: Annotated[dict[Key, Text], Field(min_length=1, max_length=100)]
    parents: Annotated[list[Number], Field(max_length=10)] = []
    origin: Literal["seed", "reflection", "merge"] = "reflection"
    iteration: Number = 0
    metric_calls: Number = 0
    val_score: Score
    tasks: Annotated[list[TaskResult], Field(max_length=MAX_TASKS)] = []
    reflection: Text = ""


class ProposalEvent(_Strict):
    type: Literal["proposal"]
    iteration: Number
    parent: Number | None = None
    accepted: bool
    candidate: Number | None = None
    before: Score = 0.0
    after: Score = 0.0
    minibatch: Annotated[list[Key], Field(max_length=MAX_MINIBATCH)] = []
    texts: Annotated[dict[Key, Text], Field(max_length=100)] = {}
    reasoning: Text = ""
    metric_calls: Number = 0


class TrialsEvent(_Strict):
    type: Literal["trials"]
    candidate: Number | None = None
    split: Literal["train", "val"] = "train"
    items: Annotated[list[TaskResult], Field(max_length=1000)]


class ErrorEvent(_Strict):
    type: Literal["error"]
    where: Literal["reflection", "task_lm", "verifier", "runner"] = "runner"
    message: Annotated[str, Field(min_length=1, max_length=5000), AfterValidator(_storable)]
    iteration: Number | None = None


class FinishedEvent(_Strict):
    type: Literal["finished"]
    status: Literal["completed", "stopped", "failed"]
    error: Annotated[str, Field(max_length=5000), AfterValidator(_storable)] = ""


Event = Annotated[
    BudgetEvent
    | UsageEvent
    | StatusEvent
    | CandidateEvent
    | ProposalEvent
    | TrialsEvent
    | ErrorEvent
    | FinishedEvent,
    Field(discriminator="type"),
]


class EventBatch(_Strict):
    seq: Annotated[int, Field(strict=True, ge=1, le=2**31 - 1)]
    events: Annotated[list[Event], Field(min_length=1, max_length=MAX_BATCH_EVENTS)]


def _validate(model: type[Model], data: object) -> Model:
    """`data` as `model` (the API hands over models ninja already validated)."""
    if isinstance(data, model):
        return data
    if not isinstance(data, dict):
        raise ExternalRunError([("body", "must be a JSON object")])
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ExternalRunError(config_problems(error)) from None


def external_run_open(*, owner: User, data: JSONObject | ExternalRunOpen) -> tuple[Run, bool]:
    """The external run with this key of `owner`, created (running) if new.
    Returns (run, created). Opening twice with one key gives one run."""
    spec = _validate(ExternalRunOpen, data)
    task_set = None
    if spec.task_set_id is not None:
        task_set = TaskSet.objects.visible_to(owner).filter(pk=spec.task_set_id).first()
        if task_set is None:
            raise ExternalRunError(
                [("task_set_id", f"no task set {spec.task_set_id} that you can use")]
            )
    existing = Run.objects.filter(owner=owner, external_key=spec.key).first()
    if existing is not None:
        return existing, False
    if spec.source == "tracker":  # a replay is finished as it is made
        too_many = active_runs_problem(owner, run_limits_for(owner))
        if too_many:
            raise ExternalRunError([("active_runs", too_many)])
    now = timezone.now()
    where = spec.host or "an unnamed host"
    try:
        with transaction.atomic():
            run = Run.objects.create(
                owner=owner,
                kind=RunKind.EXTERNAL,
                external_key=spec.key,
                external={
                    "source": spec.source,
                    "host": spec.host,
                    "gepa_version": spec.gepa_version,
                    "client_version": spec.client_version,
                    "python_version": spec.python_version,
                },
                name=spec.name or f"GEPA on {where}"[:200],
                task_set=task_set,
                tasks_snapshot=[dict(t.as_row(), split=t.split) for t in task_set.tasks.all()]
                if task_set
                else [],
                status=RunStatus.RUNNING,
                phase="started",
                claim=RunClaim.new_token(),  # no worker ever claims an external run (runner.claim)
                budget_total=spec.budget_total,
                started_at=now,
            )
            run_progress(run.pk).update(heartbeat_at=now)
            publish_run_event(
                run.pk, ev.RUN_STATUS, {"status": RunStatus.RUNNING, "phase": "started"}
            )
    except IntegrityError:  # the same key opened concurrently: one of the two won
        return Run.objects.get(owner=owner, external_key=spec.key), False
    return run, True


def external_run_for(*, owner: User, run_id: int) -> Run | None:
    """An external run the tracker's user may write into: only its owner's."""
    return Run.objects.filter(pk=run_id, owner=owner, kind=RunKind.EXTERNAL).first()


def external_run_control(*, run: Run) -> JSONObject:
    """What the tracker's stopper asks between iterations; also its heartbeat."""
    if run.status in RunStatus.active():
        run_progress(run.pk).update(heartbeat_at=timezone.now())
    return {"stop": run.stop_requested, "status": run.status}


def _silent_for(run: Run) -> float:
    """Seconds since the run's tracker was last heard from (a batch or a stop poll)."""
    seen = run_progress(run.pk).values_list("heartbeat_at", flat=True).get() or run.started_at
    return (timezone.now() - seen).total_seconds() if seen else float("inf")


def external_run_end_if_silent(run: Run, *, cancel: bool) -> bool:
    """Stop or Cancel on an external run whose tracker went silent (the page's
    "silent", SILENT_AFTER_SECONDS): no tracker will ever poll for the stop, so
    the run ends now, stopped, with what it recorded. False when the tracker is
    alive (it stops the run itself between iterations). Call with the row locked."""
    if not run.is_external or run.status not in (RunStatus.RUNNING, RunStatus.STOPPING):
        return False
    silent = _silent_for(run)
    if silent <= SILENT_AFTER_SECONDS:
        return False
    from optimizer.runs.runner import run_finish

    how = "cancelled" if cancel else "stopped by the user"
    run_finish(
        RunClaim(run.pk, run.claim),
        phase=f"{how}; its tracker had been silent for {_duration(silent)}",
        stopped=True,
        reason=how,
    )
    return True


def external_runs_abandon_silent() -> list[int]:
    """End every external run whose tracker has been silent for
    FRONTIER_EXTERNAL_SILENT_SECONDS as abandoned (the workers' watchdog calls
    this each round). A tracker that comes back is refused (409) and stops sending."""
    from optimizer.runs.runner import run_finish

    limit = settings.FRONTIER_EXTERNAL_SILENT_SECONDS
    cutoff = timezone.now() - timedelta(seconds=limit)
    silent = Q(progress__heartbeat_at__lt=cutoff) | Q(
        progress__heartbeat_at__isnull=True, started_at__lt=cutoff
    )
    ended = []
    candidates = Run.objects.filter(silent, kind=RunKind.EXTERNAL, status__in=RunStatus.active())
    for run_id in candidates.values_list("pk", flat=True):
        with transaction.atomic():
            run = Run.objects.select_for_update().filter(silent, pk=run_id).first()
            if run is None or run.status not in RunStatus.active():
                continue  # heard from, or ended, since the query
            finished = run_finish(
                RunClaim(run.pk, run.claim),
                phase=f"abandoned: its tracker was silent for {_duration(_silent_for(run))}",
                abandoned=True,
                reason=f"its tracker sent nothing for {_duration(limit)}",
            )
        if finished:
            log.info("external run %s abandoned: its tracker went silent", run_id)
            ended.append(run_id)
    return ended


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes} min" if minutes else f"{int(seconds)} s"


def external_events_apply(*, run: Run, data: JSONObject | EventBatch) -> JSONObject:
    """Apply one numbered batch of events (see the module docstring)."""
    batch = _validate(EventBatch, data)
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if batch.seq <= run.external_batch:
            return {
                "applied": False,
                "duplicate": True,
                "last_batch": run.external_batch,
                "stop": run.stop_requested,
            }
        if batch.seq != run.external_batch + 1:
            raise ExternalRunError(
                [
                    (
                        "seq",
                        f"expected batch {run.external_batch + 1}, got {batch.seq}: batches are applied in order",
                    )
                ],
                conflict=True,
            )
        if run.status in RunStatus.finished():
            raise ExternalRunError(
                [("run", f"run {run.pk} is {run.status}; it takes no more events")], conflict=True
            )
        _check_run_room(run, len(batch.events))
        _check_events(run, batch.events)
        applier = _BatchApplier(run)
        for event in batch.events:
            applier.apply(event)
        Run.objects.filter(pk=run.pk).update(external_batch=batch.seq)
        if applier.finished is None:
            run_progress(run.pk).update(heartbeat_at=timezone.now())
        else:
            from optimizer.runs.runner import run_finish

            done = applier.finished
            failure = (done.error or "the optimization failed") if done.status == "failed" else ""
            stopped = done.status == "stopped"
            phase = (
                "stopped by the user"
                if run.stop_requested
                else "stopped by its own stopper"
                if stopped
                else "finished"
            )
            # The tracker holds its run as a worker holds a native one (the claim set at open).
            run_finish(
                RunClaim(run.pk, run.claim),
                phase=phase,
                failure=failure,
                stopped=stopped,
                reason=phase if stopped else "",
            )
        stop = Run.objects.values_list("stop_requested", flat=True).get(pk=run.pk)
    return {"applied": True, "duplicate": False, "last_batch": batch.seq, "stop": stop}


def _check_run_room(run: Run, events: int) -> None:
    """Refuse a batch that would take the run's event log past its limit (409:
    the tracker stops sending; the run keeps what it has)."""
    limit = settings.FRONTIER_EXTERNAL_EVENTS_PER_RUN
    held = run_progress(run.pk).values_list("last_seq", flat=True).get()
    if held + events > limit:
        raise ExternalRunError(
            [
                (
                    "events",
                    f"run {run.pk} holds {held:,} events; an external run takes at most "
                    f"{limit:,} (FRONTIER_EXTERNAL_EVENTS_PER_RUN)",
                )
            ],
            conflict=True,
        )


class RateLimited(ExternalRunError):
    """The user's events this minute are used up: HTTP 429, retry after `retry_after` s."""

    def __init__(self, message: str, retry_after: int):
        super().__init__([("events", message)])
        self.retry_after = retry_after


def count_against_rate(owner_id: int, events: int) -> None:
    """Count a tracker's batch against its user's events per minute (a fixed
    one-minute window on the shared cache: Redis in the distributed mode);
    RateLimited past it. A replayed checkpoint is bounded by its upload instead.
    With the cache unreachable the batch goes through, as logins do
    (dashboard/throttle.py)."""
    limit = settings.FRONTIER_EXTERNAL_EVENTS_PER_MINUTE
    now = timezone.now().timestamp()
    window = int(now // 60)
    key = f"external-events:{owner_id}:{window}"
    try:
        cache.add(key, 0, timeout=120)
        used = cache.incr(key, events)
    except Exception as error:  # an unreachable cache must not stop ingestion
        log.warning("external events rate limit unavailable, batch let through: %s", error)
        return
    if used > limit:
        cache.decr(key, events)
        raise RateLimited(
            f"your trackers sent more than {limit:,} events this minute "
            f"(FRONTIER_EXTERNAL_EVENTS_PER_MINUTE); this batch was not applied",
            retry_after=max(1, int((window + 1) * 60 - now) + 1),
        )


def _check_events(run: Run, events: list[Event]) -> None:
    """Refuse (400, naming each event) what the run makes impossible, before
    anything is applied."""
    known = set(Candidate.objects.filter(run=run).values_list("index", flat=True))
    used = run_progress(run.pk).values_list("budget_used", flat=True).get()
    total = run.budget_total
    problems: list[tuple[str, str]] = []
    finished_at: int | None = None
    for n, event in enumerate(events):
        where = f"events.{n}.{event.type}"
        if finished_at is not None:
            problems.append((where, f"comes after the run's finished event (events.{finished_at})"))
            continue
        if isinstance(event, FinishedEvent):
            finished_at = n
        elif isinstance(event, CandidateEvent):
            missing = [p for p in event.parents if p not in known or p == event.index]
            if missing:
                names = ", ".join(str(p) for p in missing)
                problems.append(
                    (
                        f"{where}.parents",
                        f"candidate {event.index}'s parent {names} is not in the run",
                    )
                )
            known.add(event.index)
        elif isinstance(event, BudgetEvent):
            total = event.total if event.total is not None else total
            if event.used < used:
                problems.append(
                    (f"{where}.used", f"went back from {used:,} to {event.used:,} metric calls")
                )
            elif total and event.used > total + MAX_OVERSHOOT:
                problems.append(
                    (
                        f"{where}.used",
                        f"{event.used:,} metric calls of a budget of {total:,}: gepa stops "
                        f"within one iteration ({MAX_OVERSHOOT:,} calls at most) of its budget",
                    )
                )
            used = max(used, event.used)
    if problems:
        raise ExternalRunError(problems)


def _record(result: TaskResult) -> EvalRecord:
    """A task result as the recorder's EvalRecord. The user's adapter gives a
    score (and maybe an output and feedback), not our verifiers' breakdown;
    the verdict follows the default thresholds."""
    verdict = Thresholds().verdict(min(1.0, max(0.0, result.score)))
    return EvalRecord(
        task_key=result.task_key,
        output=result.output,
        score=result.score,
        verdict=verdict,
        passed=verdict == "pass",
        result={},
        feedback=result.feedback,
        objective_scores=dict(result.objectives),
    )


class _BatchApplier:
    """Maps the tracker's events onto what RunRecorder writes for a native run."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.finished: FinishedEvent | None = None
        self._recorder: RunRecorder | None = None

    @property
    def recorder(self) -> RunRecorder:
        if self._recorder is None:  # reads the run's candidates and front back: only when needed
            task_pks = (
                dict(self.run.task_set.tasks.values_list("task_id", "pk"))
                if self.run.task_set is not None
                else {}
            )
            self._recorder = RunRecorder(
                run=self.run,
                adapter=None,
                valset=[],
                task_pks=task_pks,
                budget_total=self.run.budget_total,
            )
        return self._recorder

    def apply(self, event: Event) -> None:
        getattr(self, f"_{event.type}")(event)

    def _budget(self, event: BudgetEvent) -> None:
        # As RunRecorder.on_budget_updated, without building a recorder: nearly
        # every batch carries a budget update, and a recorder reads the whole
        # pool back from the database.
        if event.total is not None and event.total != self.run.budget_total:
            self.run.budget_total = event.total
            if self._recorder is not None:
                self._recorder.budget_total = event.total
            Run.objects.filter(pk=self.run.pk).update(budget_total=event.total)
        run_progress(self.run.pk).update(
            budget_used=event.used
        )  # the narrow row: written with nearly every batch
        publish_run_event(
            self.run.pk, ev.RUN_BUDGET, {"used": event.used, "total": self.run.budget_total}
        )

    def _usage(self, event: UsageEvent) -> None:
        total = {
            "calls": event.calls,
            "tokens_in": event.tokens_in,
            "tokens_out": event.tokens_out,
            "cost": round(event.cost or 0.0, 8),
        }
        reported = event.cost is not None
        if reported and not self.run.external.get("cost_reported"):
            self.run.external = {**self.run.external, "cost_reported": True}
            Run.objects.filter(pk=self.run.pk).update(external=self.run.external)
        run_progress(self.run.pk).update(usage={"total": total}, cost=total["cost"])
        used = run_progress(self.run.pk).values_list("budget_used", flat=True).get()
        publish_run_event(
            self.run.pk,
            ev.RUN_BUDGET,
            {
                "used": used,
                "total": self.run.budget_total,
                "cost": total["cost"],
                "tokens": event.tokens_in + event.tokens_out,
                "usage": {"total": total},
            },
        )

    def _status(self, event: StatusEvent) -> None:
        Run.objects.filter(pk=self.run.pk).update(phase=event.phase)
        status = Run.objects.values_list("status", flat=True).get(pk=self.run.pk)
        publish_run_event(self.run.pk, ev.RUN_STATUS, {"status": status, "phase": event.phase})

    def _candidate(self, event: CandidateEvent) -> None:
        if event.index in self.recorder.components:
            return  # already recorded (a tracker restarted on a resumed gepa run sends the seed again)
        self.recorder._record_candidate(
            index=event.index,
            components=dict(event.components),
            parents=list(event.parents),
            origin=Origin(event.origin),
            iteration=event.iteration,
            metric_calls=event.metric_calls,
            val_score=event.val_score,
            records={t.task_key: _record(t) for t in event.tasks},
            reflection=preview(event.reflection, MAX_REASONING_CHARS),
            usage={},
            cost=0.0,  # the tracker reports no model usage: an external run's spend is unknown here
        )

    def _proposal(self, event: ProposalEvent) -> None:
        publish_run_event(
            self.run.pk,
            ev.PROPOSAL,
            {
                "iteration": event.iteration,
                "parent": event.parent,
                "components": sorted(event.texts),
                "accepted": event.accepted,
                "candidate": event.candidate,
                "before": event.before,
                "after": event.after,
                "minibatch": list(event.minibatch),
                "texts": {name: preview(text) for name, text in event.texts.items()},
                "reasoning": preview(event.reasoning, MAX_REASONING_CHARS),
                "metric_calls": event.metric_calls,
            },
        )

    def _trials(self, event: TrialsEvent) -> None:
        split = Split.VAL if event.split == "val" else Split.TRAIN
        publish_run_event(
            self.run.pk,
            ev.TRIALS,
            {
                "candidate": event.candidate,
                "split": split,
                "items": [item_payload(_record(t)) for t in event.items],
            },
        )

    def _error(self, event: ErrorEvent) -> None:
        publish_run_event(
            self.run.pk,
            ev.ERROR,
            {
                "where": event.where,
                "message": preview(event.message, 1000),
                "iteration": event.iteration,
            },
        )

    def _finished(self, event: FinishedEvent) -> None:
        self.finished = event
