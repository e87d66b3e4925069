"""The run event catalogue: every RunEvent.type and a pydantic model of its payload.

Events are written by `optimizer.runs.events.publish_run_event` (the recorder in the
runner is the main writer) and reach browsers as websocket messages
`{"seq": n, "type": t, "data": {...}}`. The run page's JSON snapshot plus these
events must be enough to draw every chart; the DB rows (Run, Candidate,
Evaluation) are the source of truth for pages rendered from scratch.

Each type's payload (`data`) is the model in `PAYLOADS`; with the setting
FRONTIER_VALIDATE_EVENTS on (always in the tests) `publish_run_events` checks
every payload against it and raises on a mismatch. docs/websockets.md lists
the same models (`python -m dashboard.reference_docs` writes the list; a test
fails when it is out of date).

All text inside payloads is untrusted and already bounded in size by the writer
(outputs and prompts truncated to PREVIEW_CHARS with an ellipsis); browsers must
still escape it.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verifiers_app.engine.json_types import JSONObject

PREVIEW_CHARS = 2000


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """`text` cut to `limit` characters with an ellipsis (what an event carries of it)."""
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


RUN_STATUS = "run.status"
RUN_BUDGET = "run.budget"
CANDIDATE_NEW = "candidate.new"
CANDIDATE_INJECTED = "candidate.injected"
FRONT_UPDATED = "front.updated"
PROPOSAL = "proposal"
TRIALS = "trials"
ERROR = "error"
RUN_FINISHED = "run.finished"
RUN_PAUSED = "run.paused"
HOLDOUT_SCORED = "holdout.scored"
WORKER_PING = "worker.ping"
NOTE_SAVED = "note.saved"
NOTE_DELETED = "note.deleted"

Status = Literal[
    "queued", "running", "stopping", "stopped", "completed", "failed", "abandoned", "paused"
]
Verdict = Literal["pass", "borderline", "fail"]
SplitName = Literal["train", "val", "holdout"]

#: An event as a writer hands it to publish_run_events: (type, payload).
Event = tuple[str, JSONObject]


class _Payload(BaseModel):
    """An event's `data`. Strict: a field of the wrong type or one the model
    does not name is an error (`validate_payload`)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    type: ClassVar[str]


class RoleUsage(_Payload):
    """What the calls of one role cost."""

    calls: int
    tokens_in: int
    tokens_out: int
    cost: float


Usage = Annotated[
    dict[Literal["task", "reflection", "judge", "total"], RoleUsage],
    Field(
        description="per role (task, reflection, judge) and their total; {} when unknown (external runs)"
    ),
]


class RunStatusData(_Payload):
    """The run's status or phase changed."""

    type: ClassVar[str] = RUN_STATUS
    status: Status
    phase: str = Field(description="one line of what the run is doing now")
    error: str = Field("", description="only when the run failed: what went wrong")


class RunBudgetData(_Payload):
    """The latest of gepa's budget updates, folded into the iteration's next
    batch (or sent alone when nothing else was published for a second).
    External runs send only `used` and `total`."""

    type: ClassVar[str] = RUN_BUDGET
    used: int = Field(description="metric calls spent")
    total: int = Field(description="metric calls the run may spend")
    cost: float = Field(0.0, description="money spent so far, every role")
    max_cost: float | None = Field(None, description="the run's cost cap")
    tokens: int = Field(0, description="input + output tokens, every role")
    usage: Usage = {}
    eta_seconds: float | None = Field(
        None, description="wall time left at the pace observed on the worker"
    )


class CandidateNewData(_Payload):
    """A candidate entered the pool (the seed, an accepted reflection, a merge, or
    one a user wrote: origin human) and was scored on the valset."""

    type: ClassVar[str] = CANDIDATE_NEW
    index: int = Field(description="gepa's candidate index")
    parents: list[int] = Field(description="for origin human: [the candidate it was edited from]")
    origin: Literal["seed", "reflection", "merge", "human"]
    author: str | None = Field(
        None, description="origin human: the user who wrote it; absent for the engine's candidates"
    )
    iteration: int
    metric_calls: int = Field(description="metric calls spent when it was found")
    val_score: float = Field(description="mean score on the val tasks")
    scored: bool = Field(
        True,
        description="false when the task model answered none of its val tasks (every call "
        "failed): its val_score (0) is no score, and it is never the best or the seed score",
    )
    objective_scores: dict[str, float] = Field(description="verifier id → mean score")
    task_scores: dict[str, float] = Field(description="val task → score")
    verdicts: dict[str, Verdict] = Field(description="val task → verdict")
    prompt_chars: int
    prompt_tokens: int
    mean_output_tokens: float
    mean_latency_ms: float
    components: dict[str, str] = Field(description="component name → text (preview)")
    usage: Usage = Field(
        description="what the iteration that found it spent, its valset scoring included"
    )
    cost: float


class CandidateInjectedData(_Payload):
    """A user's edited candidate for the run: `pending` when submitted (the run
    evaluates it on the val set at its next iteration boundary), `applied` once it
    is candidate `candidate` (whose candidate.new comes in the same batch), or
    `refused` with the reason (the budget cannot cover a val evaluation, the run
    ended first)."""

    type: ClassVar[str] = CANDIDATE_INJECTED
    injection: int = Field(description="the injection's id (GET /api/runs/{id}/injections)")
    status: Literal["pending", "applied", "refused"]
    edited_from: int = Field(description="the candidate it was edited from (0: the seed)")
    author: str
    reason: str = Field(description="why it was refused; empty otherwise")
    candidate: int | None = Field(description="the candidate index it became, once applied")
    components: dict[str, str] = Field(description="component name → text (preview)")


class FrontUpdatedData(_Payload):
    """What a newly scored candidate changed in gepa's per-task Pareto front: a
    delta. The whole front is in the run page's snapshot; folding a run's deltas
    in seq order rebuilds it. Runs recorded before deltas carry the whole front
    (`members`, `leaders`) instead; the run page reads both."""

    type: ClassVar[str] = FRONT_UPDATED
    index: int = Field(description="the candidate just scored")
    took: list[str] = Field(
        description="val tasks it now leads alone (their leaders become [index])"
    )
    joined: list[str] = Field(
        description="val tasks where it ties the top score (index joins their leaders)"
    )
    added: list[int] = Field(description="candidates that entered the front (optimizer/front.py)")
    removed: list[int] = Field(description="candidates that left the front")
    best_index: int | None = Field(description="null while no candidate has a score (`scored`)")
    best_score: float | None


class NoteRead(_Payload):
    """A reviewer's note a reflection read (its text as it was then, preview)."""

    id: int
    task_key: str
    author: str
    text: str


class ProposalData(_Payload):
    """A reflection proposal, accepted or rejected. External runs send no `usage` or `cost`."""

    type: ClassVar[str] = PROPOSAL
    iteration: int
    parent: int | None
    components: list[str] = Field(description="names of the components it rewrote")
    accepted: bool
    candidate: int | None = Field(description="the new candidate's index when accepted")
    before: float = Field(description="the parent's minibatch score sum")
    after: float = Field(description="the child's minibatch score sum")
    minibatch: list[str] = Field(description="task keys")
    texts: dict[str, str] = Field(description="component name → proposed text (preview)")
    reasoning: str
    metric_calls: int
    usage: Usage = Field({}, description="what the iteration spent up to the decision")
    cost: float = 0.0
    notes: list[NoteRead] = Field(
        [],
        description="the reviewer notes its reflective dataset held beside the verifiers' "
        "feedback (on tasks of its minibatch); none on external runs",
    )


class TrialItem(_Payload):
    """One task scored."""

    task_key: str
    score: float
    verdict: Verdict
    output: str = Field(description="preview")
    reasons: list[str] = Field(description="up to 5 reasons it lost points")
    passed: bool | None = Field(
        None,
        description="every verifier passed (its passThreshold, its required checks); "
        "null where no verifier scored it (an external run's adapter)",
    )


class TrialsData(_Payload):
    """Evaluations of one candidate on one split, in the order they ran: one evaluation
    batch, or minibatches of the candidate in a row that the run wrote together."""

    type: ClassVar[str] = TRIALS
    candidate: int | None = Field(description="null: a proposal not yet accepted")
    split: SplitName
    items: list[TrialItem]


class ErrorData(_Payload):
    """Something went wrong; the run may go on."""

    type: ClassVar[str] = ERROR
    where: Literal["reflection", "task_lm", "verifier", "runner"]
    message: str
    iteration: int | None


class RunFinishedData(_Payload):
    """The run's last event."""

    type: ClassVar[str] = RUN_FINISHED
    status: Literal["completed", "stopped", "failed", "abandoned"]
    best_index: int | None
    best_score: float | None
    seed_score: float | None
    metric_calls: int
    cost: float
    stop_reason: str = Field(
        description='"budget reached", "cost cap reached", "perfect validation score", '
        '"no improvement in N iterations", "stopped by the user", "cancelled", or "" when failed'
    )


class RunPausedData(_Payload):
    """The run paused between two iterations: its checkpoint is written and it
    holds no worker. Not an end: a resume continues it from there (a `run.status`
    event with the status "paused" comes with it)."""

    type: ClassVar[str] = RUN_PAUSED
    by: str = Field(description='who asked for the pause ("" from the command line)')
    iteration: int | None = Field(
        description="the last iteration finished before the pause (None: paused before it started, "
        "or after its worker was lost)"
    )
    metric_calls: int = Field(
        description=(
            "metric calls its checkpoint counts, the budget line from now on (after a lost "
            "worker, fewer than the last run.budget said: a resume runs that iteration again)"
        )
    )


class HoldoutScoredData(_Payload):
    """The seed and the best candidate scored on the run's holdout split at the end
    (their Evaluations carry split "holdout"; a launch uses the set's holdout split
    unless evaluate_holdout is off). The run page's "Val vs held-out" panel and the
    promotion report read them."""

    type: ClassVar[str] = HOLDOUT_SCORED
    seed_score: float | None
    best_index: int
    best_score: float
    tasks: int


class WorkerPingData(_Payload):
    """Diagnostics: a worker answered."""

    type: ClassVar[str] = WORKER_PING
    host: str
    note: str


class NoteSavedData(_Payload):
    """A reviewer's note on a task was written or edited: every reflection whose
    minibatch holds that task reads it from now on."""

    type: ClassVar[str] = NOTE_SAVED
    id: int
    task_key: str
    text: str
    author: str
    created_at: str = Field(description="ISO 8601")
    updated_at: str = Field(description="ISO 8601")


class NoteDeletedData(_Payload):
    """A reviewer's note was removed: no later reflection reads it."""

    type: ClassVar[str] = NOTE_DELETED
    id: int
    task_key: str


PAYLOADS: dict[str, type[_Payload]] = {
    model.type: model
    for model in (
        RunStatusData,
        RunBudgetData,
        CandidateNewData,
        CandidateInjectedData,
        FrontUpdatedData,
        ProposalData,
        TrialsData,
        ErrorData,
        RunFinishedData,
        RunPausedData,
        HoldoutScoredData,
        WorkerPingData,
        NoteSavedData,
        NoteDeletedData,
    )
}
CATALOGUE = tuple(PAYLOADS)


class EventPayloadError(ValueError):
    """An event whose data does not match its model; names the event and the field."""


def validate_payload(type: str, data: Any) -> None:
    """Raise EventPayloadError unless `data` is exactly what `type`'s model describes."""
    model = PAYLOADS.get(type)
    if model is None:
        raise EventPayloadError(f"{type!r} is not an event type (one of: {', '.join(CATALOGUE)})")
    try:
        model.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "data"
        raise EventPayloadError(f"{type} event: data.{where}: {first['msg']}") from None
