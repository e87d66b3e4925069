"""/api/runs: launch, dry-run, list, get and control optimization runs; read
their candidates, evaluations, events and export.

A run's config is the RunConfig JSON (optimizer/config.py), typed in the
OpenAPI document; every problem comes back as a 400 ErrorOut
{"detail", "problems": [{"field", "message"}]} (dashboard/lib/api_errors.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.db import transaction
from django.http import Http404, HttpResponse
from django.urls import reverse
from ninja import Field, Query, Router, Schema, Status
from ninja.errors import HttpError

from dashboard.lib.api_errors import ErrorOut, Problem
from optimizer import reviewer_notes, selectors, services
from optimizer.config import MAX_METRIC_CALLS, RunConfig
from optimizer.downloads import run_export_download
from optimizer.export import RunDocument
from optimizer.models import (
    Candidate,
    CandidateInjection,
    InjectionStatus,
    Origin,
    ReviewerNote,
    Run,
    RunStatus,
    ScoringStatus,
)
from optimizer.promotion import (
    DEFAULT_MIN_IMPROVEMENT,
    LiftDoc,
    best_candidate,
    candidate_lift,
    promotion_report,
    seed_candidate,
)
from optimizer.runs import event_types as ev
from optimizer.runs.events import event_texts
from optimizer.runs.injections import run_valset_size
from optimizer.runs.summary import RUN_JOINS, run_summary
from optimizer.scorings import reads as scoring_reads
from optimizer.scorings import services as scorings
from optimizer.val_vs_holdout import run_val_vs_holdout

router = Router()


class ConfigIn(Schema):
    config: RunConfig = Field(
        ..., description="What to optimize and how; unset fields take their defaults."
    )


class RoleUsageOut(Schema):
    calls: int = 0
    # default= by keyword: type checkers read only that as a field's default (PEP 681).
    tokens_in: int = Field(
        default=0, description="Input (prompt) tokens, from the provider's usage"
    )
    tokens_out: int = Field(
        default=0, description="Output (completion) tokens, from the provider's usage"
    )
    cost: float = Field(
        default=0.0,
        description="At the endpoint's prices per 1M tokens (the demo simulator is free)",
    )


class UsageOut(Schema):
    """Model calls by role: the task model, the reflection model and the verify-loop judge."""

    task: RoleUsageOut = Field(default_factory=RoleUsageOut)
    reflection: RoleUsageOut = Field(default_factory=RoleUsageOut)
    judge: RoleUsageOut = Field(default_factory=RoleUsageOut)
    total: RoleUsageOut = Field(default_factory=RoleUsageOut)


class PresetOut(Schema):
    proposals: int
    metric_calls: int = Field(description="V + proposals × (2·m + V) for this task set")


class PlanBudgetOut(Schema):
    metric_calls: int
    max_cost: float | None
    iteration_cost: int = Field(
        description="The most metric calls one iteration can spend; the run stops when less is left"
    )


class PlanCallOut(Schema):
    tokens_in: int
    tokens_out: int
    latency_ms: float
    source: str = Field(description='"past evaluations (n)", "probe call", "simulator" or "guess"')


class PlanHoldoutOut(Schema):
    """The seed and the best candidate scored on the held-out split when the run ends."""

    split: str
    tasks: int
    evaluations: int = Field(description="At most 2 × tasks (one set when the best is the seed)")
    metric_calls: int = Field(description="Always 0: the metric-call budget is the search's alone")
    calls: dict[str, list[int]] = Field(description="task and judge model calls, each [low, high]")
    tokens: list[int]
    cost: list[float] = Field(description="Inside the run's cost cap, like every model call")
    seconds: list[float]


class PlanOut(Schema):
    """What a run will do; every pair is a [low, high] range (all proposals accepted … all rejected)."""

    splits: dict[str, int]
    minibatch_size: int
    presets: dict[str, PresetOut]
    budget: PlanBudgetOut
    iterations: list[int]
    metric_calls: list[int]
    calls: dict[str, list[int]] = Field(
        description="task, reflection and judge model calls, each [low, high]"
    )
    tokens: list[int]
    cost: list[float]
    free: bool = Field(description="Every model is the demo simulator")
    seconds: list[float] = Field(
        description="Wall time from the endpoint's observed latency and the run's concurrency"
    )
    per_task_call: PlanCallOut
    holdout: PlanHoldoutOut | None = Field(
        None,
        description="The held-out evaluation at the end, apart from the metric-call budget; "
        "null when the run has no held-out split or evaluate_holdout is off",
    )
    warnings: list[str]


class DryRunOut(Schema):
    ok: bool
    problems: list[Problem]
    warnings: list[
        str
    ] = []  # launchable, but worth knowing (low budget, task data no verifier reads)
    plan: PlanOut | None = Field(
        None, description="What the run will do (null while the config cannot be resolved)"
    )


class ResumeIn(Schema):
    extra_budget: int = Field(
        0,
        ge=0,
        le=MAX_METRIC_CALLS,
        description="More metric calls (required to continue a completed run)",
    )


class ForkIn(Schema):
    candidate_index: int = Field(..., ge=0)


class RunPatchIn(Schema):
    tags: list[str] | None = Field(
        None, description="Replace the run's tags (each 1-40 characters, at most 20)"
    )
    notes: str | None = Field(None, description="Replace the run's notes")
    archived: bool | None = Field(
        None, description="Archive (refused while the run is active) or unarchive"
    )


class InjectIn(Schema):
    components: dict[str, str] = Field(
        ..., description="Component name → text: every component of the run, each non-empty"
    )
    edited_from: int | None = Field(
        None,
        ge=0,
        le=2**31 - 1,
        description="The candidate index it was edited from (null or 0: the seed)",
    )


class InjectionOut(Schema):
    id: int
    status: InjectionStatus = Field(
        description='"pending" (evaluated at the run\'s next iteration boundary), "applied" or "refused"'
    )
    reason: str = Field(description="Why it was refused; empty otherwise")
    edited_from: int = Field(description="The candidate it was edited from (0: the seed)")
    author: str
    components: dict[str, str]
    candidate: int | None = Field(description="The candidate index it became, once applied")
    metric_calls: int = Field(
        description="What adding it costs (or cost): one metric call per val task"
    )
    created_at: datetime
    compare_url: str | None = Field(
        description="Once applied: the compare view of it beside the candidate it was edited from"
    )
    fork_url: str | None = Field(
        description="Once refused: the launch form, prefilled to fork the run from this text"
    )


class InjectionRefusedOut(ErrorOut):
    injection: InjectionOut | None = Field(
        None, description="The edited candidate, kept as refused (fork from it: fork_url)"
    )


class CandidateOut(Schema):
    index: int
    parents: list[int]
    origin: Origin
    author: str | None = Field(
        None, description="origin human: the user who wrote it (edited from parents[0])"
    )
    edited_from: int | None = Field(
        None, description="origin human: the candidate it was edited from"
    )
    compare_url: str | None = Field(
        None,
        description="origin human: the compare view of it beside the candidate it was edited from",
    )
    iteration: int
    metric_calls: int
    val_score: float | None
    objective_scores: dict[str, float]
    on_front: bool
    components: dict[str, str]
    cost: float = Field(
        0.0, description="What the iteration that found it spent (its valset scoring included)"
    )
    usage: UsageOut = Field(default_factory=UsageOut, description="That spend by role")


class RunOut(Schema):
    id: int
    name: str
    owner: str
    status: RunStatus
    phase: str
    task_set_id: int | None
    budget_used: int
    budget_total: int
    seed_score: float | None
    best_score: float | None
    best_candidate: int | None
    chosen_candidate: int | None = Field(
        description="The candidate promoted as the run's chosen prompt, if any"
    )
    error: str
    last_seq: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    simulator: bool = Field(
        description="True when the task or reflection model is the offline demo simulator, not a real model"
    )
    url: str = Field(description="The run's page")
    tags: list[str] = Field(default_factory=list, description="The user's labels for this run")
    notes: str = Field("", description="The user's notes on this run")
    archived: bool = Field(False, description="Hidden from the runs list unless asked for")
    forked_from: int | None = Field(None, description="The run this one was forked from")
    forked_from_candidate: int | None = Field(
        None, description="The parent run's candidate it was seeded from"
    )
    kind: str = Field(
        description='"native" (executed by our workers) or "external" (reported by frontier_tracker from its owner\'s process)'
    )
    external: dict[str, Any] = Field(
        description="For an external run: source, host, gepa_version, client_version"
    )
    cost: float = Field(
        0.0, description="Money spent on model calls so far, at the endpoints' prices per 1M tokens"
    )
    pricing: str = Field(
        "priced",
        description='"simulator" (free), "unpriced" (no endpoint price set), "priced", or for an external run "not_reported" (its tracker reported no cost)',
    )
    max_cost: float | None = Field(None, description="The run's cost cap, if any")
    usage: UsageOut = Field(
        default_factory=UsageOut, description="Model calls, tokens and cost by role so far"
    )
    stop_reason: str = Field(
        "", description='Why the run ended: "budget reached", "cost cap reached", …'
    )
    pause_requested: bool = Field(
        False,
        description="A pause was asked and the run is finishing its iteration (it is paused after it)",
    )

    @staticmethod
    def of(run: Run) -> dict:
        """The run read model (optimizer.runs.summary.run_summary) in the API's names."""
        summary = run_summary(run)
        return {
            **summary,
            "name": run.name,
            "best_candidate": summary["best_index"],
            "chosen_candidate": summary["chosen_index"],
            "created_at": run.created_at,
            "started_at": run.started_at,
            "finished_at": run.finished_at,
        }


class HoldoutSideOut(Schema):
    tasks: int
    seed_mean: float | None
    best_mean: float | None
    lift: LiftDoc


class HoldoutOut(Schema):
    """The seed and the best on val and on the held-out split, side by side."""

    split: str | None = Field(description="The held-out split the run scores at the end, if any")
    enabled: bool = Field(description="The run's evaluate_holdout switch")
    planned_tasks: int = Field(description="Tasks in the held-out split")
    planned_evaluations: int = Field(
        description="2 × planned_tasks (the seed and the best; once when the best is the seed)"
    )
    evaluations: int = Field(description="Held-out evaluations recorded (not metric calls)")
    seed_index: int
    best_index: int | None
    val: HoldoutSideOut | None
    holdout: HoldoutSideOut | None
    state: Literal["scored", "pending", "not_scored", "off", "none"]
    verdict: Literal["confirmed", "not_confirmed", "no_lift"] | None = Field(
        description="scored only: does held-out confirm the val lift"
    )
    message: str


class RunDetailOut(RunOut):
    config: RunConfig | dict[str, Any] = Field(
        description="The config frozen at launch (model names resolved into LM configs); an imported run's may be partial"
    )
    verifier_ids: list[str]
    candidates: list[CandidateOut]
    holdout: HoldoutOut = Field(
        description="Val vs held-out: the seed's and the best's means and lifts on each split"
    )


class EvaluationOut(Schema):
    task_key: str
    split: str
    output: str
    score: float
    verdict: str
    passed: bool
    feedback: str
    result: dict[str, Any] = Field(
        description="The verifiers' result: score, verdict, verifiers[].checks[], hits, misses"
    )
    attempts: list[Any] = Field(description="Attempts of the verify loop, when it ran")
    latency_ms: float
    tokens_in: int
    tokens_out: int
    judge_tokens_in: int = 0
    judge_tokens_out: int = 0
    cost: float = Field(
        0.0,
        description="Task model and verify-judge calls of this evaluation, at the endpoints' prices",
    )


class CandidateDetailOut(CandidateOut):
    reflection: str
    evaluations: list[EvaluationOut]


class EventOut(Schema):
    seq: int = Field(description="1, 2, 3 … with no gap within a run")
    type: str = Field(description="One of: " + ", ".join(ev.CATALOGUE))
    data: dict[str, Any]


def _candidate(c: Candidate) -> dict:
    human = c.origin == Origin.HUMAN
    parent = (c.parents[0] if c.parents else 0) if human else None
    return {
        "index": c.index,
        "parents": c.parents,
        "origin": c.origin,
        "author": (c.author.username if c.author is not None else "") if human else None,
        "edited_from": parent,
        "compare_url": compare_url(c.run_id, parent, c.index) if parent is not None else None,
        "iteration": c.iteration,
        "metric_calls": c.metric_calls,
        "val_score": c.val_score,
        "objective_scores": c.objective_scores,
        "on_front": c.on_front,
        "components": c.components,
        "cost": c.cost,
        "usage": c.usage or {},
    }


def _detail(run: Run) -> dict:
    # The stored per-task scores are the run page's (thousands of numbers per candidate), not the API's.
    candidates = [
        _candidate(c)
        for c in run.candidates.order_by("index")
        .select_related("author")
        .defer("val_task_scores", "val_summary")
    ]
    verifier_ids = [spec.get("id", "") for spec in run.verifier_specs]
    return {
        **RunOut.of(run),
        "config": run.config,
        "verifier_ids": verifier_ids,
        "candidates": candidates,
        "holdout": run_val_vs_holdout(run),
    }


def _visible(request, run_id: int) -> Run:
    return selectors.run_for_user(request.user, run_id)


def _controllable(request, run_id: int) -> Run:
    return selectors.run_for_user(request.user, run_id, control=True)


def _steerable(request, run_id: int) -> Run:
    return selectors.run_for_user(request.user, run_id, steer=True)


class LaunchedOut(RunOut):
    warnings: list[str] = Field(
        description="What a dry run warns about: launched anyway, worth knowing "
        "(low budget, task data no verifier reads, a verifier's lint warnings)"
    )


@router.post("/", response={201: LaunchedOut})
def launch_run(request, body: ConfigIn):
    """Launch a run; it is queued for a worker once the request commits. A config
    that cannot run is a 400 naming each field."""
    run = services.run_launch(owner=request.user, config=body.config)
    return Status(
        201,
        {
            **RunOut.of(run),
            "warnings": selectors.launch_warnings(user=request.user, config=body.config),
        },
    )


@router.post("/dry-run", response={200: DryRunOut})
def dry_run(request, body: ConfigIn):
    """Everything that would stop a launch (splits, verifiers, endpoints reachable), without
    launching: `ok` with the problems, and the plan: what the budget buys in calls, tokens,
    money and time. A body that is not a RunConfig at all is a 400."""
    problems = services.run_dry_run(owner=request.user, config=body.config)
    plan = services.run_plan_for(owner=request.user, config=body.config, probe=not problems)
    return {
        "ok": not problems,
        "problems": [{"field": f, "message": m} for f, m in problems],
        "warnings": selectors.launch_warnings(user=request.user, config=body.config),
        "plan": plan,
    }


@router.get("/", response=list[RunOut])
def list_runs(request, status: RunStatus | None = None):
    """Runs you can see (yours and those shared with you), newest first."""
    return [
        RunOut.of(run)
        for run in selectors.run_list(user=request.user, status=status or "", archived=None)
    ]


@router.get("/{run_id}", response=RunDetailOut)
def get_run(request, run_id: int):
    return _detail(_visible(request, run_id))


@router.get("/{run_id}/candidates/{index}", response=CandidateDetailOut)
def get_candidate(request, run_id: int, index: int):
    """One candidate with its prompt texts and every evaluation (output, score, checks, feedback)."""
    run = _visible(request, run_id)
    candidate = run.candidates.filter(index=index).first()
    if candidate is None:
        raise Http404(f"Run {run.pk} has no candidate {index}")
    evaluations = [
        {
            "task_key": e.task_key,
            "split": e.split,
            "output": e.output,
            "score": e.score,
            "verdict": e.verdict,
            "passed": e.passed,
            "feedback": e.feedback,
            "result": e.result,
            "attempts": e.attempts,
            "latency_ms": e.latency_ms,
            "tokens_in": e.tokens_in,
            "tokens_out": e.tokens_out,
            "judge_tokens_in": e.judge_tokens_in,
            "judge_tokens_out": e.judge_tokens_out,
            "cost": e.cost,
        }
        for e in candidate.evaluations.order_by("split", "task_key")
    ]
    return {**_candidate(candidate), "reflection": candidate.reflection, "evaluations": evaluations}


def compare_url(run_id: int, first: int, second: int) -> str:
    """The compare view of two candidates of a run (the diff of their texts)."""
    return reverse("compare:compare", args=[run_id]) + f"?c={first}&c={second}"


def _injection(injection: CandidateInjection, valset_size: int) -> dict:
    compare = fork = None
    if injection.status == InjectionStatus.APPLIED and injection.candidate_index is not None:
        compare = compare_url(injection.run_id, injection.parent, injection.candidate_index)
    if injection.status == InjectionStatus.REFUSED:
        fork = (
            reverse("runs:new")
            + f"?fork={injection.run_id}&candidate={injection.parent}&injection={injection.pk}"
        )
    return {
        "id": injection.pk,
        "status": injection.status,
        "reason": injection.reason,
        "edited_from": injection.parent,
        "author": injection.author.username if injection.author is not None else "",
        "components": injection.components,
        "candidate": injection.candidate_index,
        "metric_calls": valset_size,
        "created_at": injection.created_at,
        "compare_url": compare,
        "fork_url": fork,
    }


@router.post(
    "/{run_id}/candidates",
    response={202: InjectionOut, 400: ErrorOut, 409: InjectionRefusedOut},
)
def inject_candidate(request, run_id: int, body: InjectIn):
    """Add an edited candidate to a queued, running or paused native run (who steers
    the run only). 202: it waits as `pending`; at the run's next iteration boundary it
    is evaluated on every val task (one metric call each, charged to the run's budget),
    joins gepa's pool as origin human, and its injection becomes `applied` (watch the
    `candidate.injected` event or GET /injections). 400 names the bad field
    (`components.<name>`, `edited_from`). 409 when the run has ended, is ending, or its
    budget cannot pay a val evaluation (the text is kept: `injection.fork_url`), or is
    an external run (its callbacks are observe-only)."""
    run = _steerable(request, run_id)
    try:
        injection = services.run_inject_candidate(
            run=run, components=body.components, edited_from=body.edited_from, user=request.user
        )
    except services.RunStateError as error:
        return Status(409, {"detail": str(error), "problems": [], "injection": None})
    out = _injection(injection, run_valset_size(run))
    if injection.status == InjectionStatus.REFUSED:
        return Status(409, {"detail": injection.reason, "problems": [], "injection": out})
    return Status(202, out)


@router.get("/{run_id}/injections", response=list[InjectionOut])
def list_injections(request, run_id: int):
    """The edited candidates users added to the run, oldest first, with their status."""
    run = _visible(request, run_id)
    size = run_valset_size(run)
    return [_injection(i, size) for i in run.injections.select_related("author")]


@router.get("/{run_id}/events", response=list[EventOut])
def list_events(
    request,
    run_id: int,
    after: int = Query(0, ge=0, le=2**31),
    limit: int = Query(500, ge=1, le=5000),
):
    """The run's event log after seq `after` (the websocket's messages, for polling clients)."""
    run = _visible(request, run_id)
    # The messages' JSON text as the log holds it, not decoded and validated again:
    # a fast run's trials events hold several minibatches each.
    texts = [text for _, text in event_texts(run.pk, after, limit)]
    return HttpResponse(f"[{','.join(texts)}]", content_type="application/json")


class CompareOut(Schema):
    a: int = Field(description="The baseline candidate's index")
    b: int
    val: LiftDoc | None = Field(description="b − a on val; null when they share no scored task")
    holdout: LiftDoc | None = Field(description="b − a on holdout; null likewise")
    url: str = Field(description="The compare view of the two")


class PromotionTaskOut(Schema):
    task_key: str
    seed_score: float
    seed_verdict: str
    score: float
    verdict: str


class PromotionOut(Schema):
    seed_index: int
    candidate_index: int
    split: str = Field(description='"holdout": the report reads only tasks GEPA never optimised on')
    margin: float
    promote: bool = Field(
        description="The holdout interval lies above 0 (at least 10 tasks) and the mean ≥ margin"
    )
    reason: str = Field(description="Why, in one sentence, as the report page says it")
    lift: LiftDoc
    tasks: list[PromotionTaskOut]


# The largest candidate index the database column holds.
MAX_INDEX = 2**31 - 1


def _candidate_of(run: Run, index: int) -> Candidate:
    candidate = run.candidates.filter(index=index).first()
    if candidate is None:
        raise Http404(f"run {run.pk} has no candidate {index}")
    return candidate


@router.get("/{run_id}/compare", response=CompareOut)
def compare_candidates(
    request,
    run_id: int,
    a: int | None = Query(None, ge=0, le=MAX_INDEX, description="The baseline (required)"),
    b: int | None = Query(None, ge=0, le=MAX_INDEX, description="The candidate (required)"),
):
    """Candidate b against candidate a, per split: the mean score difference with
    its 95 % paired bootstrap interval and the tasks improved / worse / unchanged."""
    run = _visible(request, run_id)  # before the parameters: another's run is only a 404
    if a is None or b is None:
        raise HttpError(400, "a, b: give the two candidate indices to compare")
    first, second = _candidate_of(run, a), _candidate_of(run, b)
    lifts = {split: candidate_lift(first, second, split) for split in ("val", "holdout")}
    return {
        "a": a,
        "b": b,
        **{split: lift.as_dict() if lift.tasks else None for split, lift in lifts.items()},
        "url": compare_url(run.pk, a, b),
    }


@router.get("/{run_id}/promotion", response={200: PromotionOut, 409: ErrorOut})
def promotion(
    request,
    run_id: int,
    c: int | None = Query(
        None, ge=0, le=MAX_INDEX, description="The candidate; the best by default"
    ),
    margin: float = Query(DEFAULT_MIN_IMPROVEMENT, ge=0, le=1),
):
    """The promotion report: candidate c (the best by default) against the seed
    on the holdout tasks both were scored on (the report page's rule)."""
    run = _visible(request, run_id)
    seed = seed_candidate(run)
    candidate = best_candidate(run) if c is None else _candidate_of(run, c)
    report = (
        promotion_report(seed=seed, candidate=candidate, margin=margin)
        if seed is not None and candidate is not None
        else None
    )
    if report is None:
        return Status(
            409,
            {
                "detail": f"run {run.pk} has no holdout evaluations of the seed and the candidate",
                "problems": [],
            },
        )
    return report.as_dict()


@router.get("/{run_id}/export", response={200: RunDocument, 409: ErrorOut})
def export_run(request, run_id: int):
    """The whole run as one JSON document (config, tasks, candidates, evaluations, events);
    the run import reads it back. A run with no candidate yet has nothing to export (409)."""
    run = _visible(request, run_id)
    if not run.candidates.exists():  # a document holds at least one candidate (RunDocument)
        return Status(
            409, {"detail": f"run {run.pk} has no candidate yet: nothing to export", "problems": []}
        )
    response = run_export_download(request, run, "json")
    del response["Content-Disposition"]  # the API answers with the document itself
    return response


def _control(action, request, run_id: int, **kwargs):
    run = _steerable(request, run_id)
    try:
        run = action(run=run, **kwargs)
    except services.RunStateError as error:
        return Status(409, {"detail": str(error), "problems": []})
    return Status(200, RunOut.of(Run.objects.select_related(*RUN_JOINS).get(pk=run.pk)))


@router.post("/{run_id}/stop", response={200: RunOut, 409: ErrorOut})
def stop_run(request, run_id: int):
    """Stop after the iteration in flight."""
    return _control(services.run_stop, request, run_id)


@router.post("/{run_id}/cancel", response={200: RunOut, 409: ErrorOut})
def cancel_run(request, run_id: int):
    """Abort now, abandoning the evaluation in flight."""
    return _control(services.run_cancel, request, run_id)


@router.post("/{run_id}/pause", response={200: RunOut, 409: ErrorOut})
def pause_run(request, run_id: int):
    """Pause after the iteration in flight: gepa checkpoints, the worker lets the run go
    (status "paused": holds no worker, is not an active run); resume continues it. A
    queued run pauses at once; a run paused or pausing already is answered as it is.
    409 for a run that is not queued or running, and for an external run (observe-only)."""
    return _control(services.run_pause, request, run_id, by=request.user)


@router.post("/{run_id}/resume", response={200: RunOut, 409: ErrorOut})
def resume_run(request, run_id: int, body: ResumeIn):
    """Resume a paused, stopped, failed or crashed run from its checkpoint (nothing already
    evaluated is paid for again); continue a completed one with extra_budget (more budget
    spends the owner's endpoints: the owner's to give). A run asked to pause and still
    running keeps running (the pause is withdrawn)."""
    if body.extra_budget:
        _controllable(request, run_id)
    return _control(services.run_resume, request, run_id, extra_budget=body.extra_budget)


@router.post("/{run_id}/fork", response={201: RunOut})
def fork_run(request, run_id: int, body: ForkIn):
    """A new run with the same configuration, seeded from one candidate (the run's owner only:
    a fork spends the run's endpoints)."""
    run = _controllable(request, run_id)
    fork = services.run_fork(run=run, candidate_index=body.candidate_index, owner=request.user)
    return Status(201, RunOut.of(fork))


@router.patch("/{run_id}", response={200: RunOut, 400: ErrorOut, 409: ErrorOut})
def update_run(request, run_id: int, body: RunPatchIn):
    """Set tags, notes or archived; fields left out stay as they are. All or nothing:
    a bad tag (400) or archiving an active run (409) saves none of the fields."""
    run = _controllable(request, run_id)
    try:
        with transaction.atomic():
            if body.archived is not None:
                run = services.run_archive(run=run, archived=body.archived)
            services.run_annotate(
                run=run, tags=body.tags, notes=body.notes
            )  # RunConfigError: the API's 400
    except services.RunStateError as error:
        return Status(409, {"detail": str(error), "problems": []})
    return Status(200, RunOut.of(Run.objects.select_related(*RUN_JOINS).get(pk=run.pk)))


@router.delete("/{run_id}", response={204: None, 409: ErrorOut})
def delete_run(request, run_id: int):
    """Delete a run and everything recorded for it; refused (409) while it is queued or running."""
    run = _controllable(request, run_id)
    try:
        services.run_delete(run=run)
    except services.RunStateError as error:
        return Status(409, {"detail": str(error), "problems": []})
    return Status(204, None)


class NoteIn(Schema):
    task_key: str = Field(
        ..., max_length=200, description="A task of the run's frozen task rows (any split)"
    )
    text: str = Field(
        ...,
        max_length=10 * reviewer_notes.MAX_NOTE_CHARS,
        description=f"What the reflection should know, at most {reviewer_notes.MAX_NOTE_CHARS:,} "
        "characters once trimmed",
    )


class NotePatchIn(Schema):
    text: str = Field(..., max_length=10 * reviewer_notes.MAX_NOTE_CHARS)


class NoteOut(Schema):
    id: int
    task_key: str
    text: str
    author: str = Field(description="The username of who wrote it")
    created_at: datetime
    updated_at: datetime


class NotesOut(Schema):
    notes: list[NoteOut]
    writable: bool = Field(description="Whether you may add notes to this run")
    refusal: str | None = Field(
        description="Why this run takes no notes (an external or imported run), else null"
    )


def _note_call(action, **kwargs):
    """A note service call as the API answers it: refusals are 404 / 409 with a sentence
    (PermissionDenied is the API's 403 everywhere: dashboard/api.py)."""
    try:
        return action(**kwargs)
    except ReviewerNote.DoesNotExist as error:
        raise Http404(str(error)) from None
    except reviewer_notes.NoteStateError as error:
        return Status(409, {"detail": str(error), "problems": []})


@router.get("/{run_id}/notes", response=NotesOut)
def list_notes(request, run_id: int):
    """The run's reviewer notes, oldest first: what GEPA's reflection reads beside the
    verifiers' feedback whenever a note's task is in its minibatch."""
    run = _visible(request, run_id)
    refusal = reviewer_notes.notes_refusal(run)
    return {
        "notes": reviewer_notes.run_notes(run),
        "writable": refusal is None and run.steerable_by(request.user),
        "refusal": refusal,
    }


@router.post(
    "/{run_id}/notes", response={201: NoteOut, 400: ErrorOut, 403: ErrorOut, 409: ErrorOut}
)
def create_note(request, run_id: int, body: NoteIn):
    """Write a note on one task for GEPA: from now on every reflection whose minibatch holds
    that task reads it. Who steers the run writes notes (403 for a read-only sharer);
    an external or imported run takes none (409)."""
    run = _visible(request, run_id)
    note = _note_call(
        reviewer_notes.reviewer_note_create,
        run=run,
        user=request.user,
        task_key=body.task_key,
        text=body.text,
    )
    return note if isinstance(note, Status) else Status(201, note.as_dict())


@router.patch(
    "/{run_id}/notes/{note_id}",
    response={200: NoteOut, 400: ErrorOut, 403: ErrorOut, 409: ErrorOut},
)
def update_note(request, run_id: int, note_id: int, body: NotePatchIn):
    """Replace a note's text (its author or who steers the run)."""
    run = _visible(request, run_id)
    note = _note_call(
        reviewer_notes.reviewer_note_edit,
        run=run,
        note_id=note_id,
        user=request.user,
        text=body.text,
    )
    return note if isinstance(note, Status) else Status(200, note.as_dict())


@router.delete("/{run_id}/notes/{note_id}", response={204: None, 403: ErrorOut, 409: ErrorOut})
def delete_note(request, run_id: int, note_id: int):
    """Remove a note (its author or who steers the run): no later reflection reads it."""
    run = _visible(request, run_id)
    done = _note_call(
        reviewer_notes.reviewer_note_delete, run=run, note_id=note_id, user=request.user
    )
    return done if isinstance(done, Status) else Status(204, None)


class ScoringIn(Schema):
    name: str = Field(
        "", max_length=200, description="What to call it (default: the verifier and version)"
    )
    verifier_id: str | None = Field(
        None, max_length=100, description="A saved verifier you can use (or give `spec`)"
    )
    version: int | None = Field(
        None, ge=1, le=2**31 - 1, description="Its version (default: the current one)"
    )
    spec: dict[str, Any] | list[dict[str, Any]] | None = Field(
        None,
        description="An edited verifier spec, or a list of them, checked as the verifier "
        "editor checks one (or give `verifier_id`)",
    )


class ScoringCandidateOut(Schema):
    index: int
    score: float | None = Field(description="Mean of its val task scores under this scoring")
    original_score: float | None = Field(description="Its val score as the run measured it")
    rank: int | None = Field(description="1 = best under this scoring")
    original_rank: int | None
    on_front: bool
    cut_tasks: list[str] = Field(
        description="Val tasks whose stored output was cut for size: scored as stored"
    )
    kept: int = Field(
        description="Val tasks with no stored output (the model failed, or an external client "
        "sent none): their original score is kept"
    )
    task_scores: dict[str, float] | None = Field(
        None, description="Val task key → score under this scoring; only with ?tasks=true"
    )


class ScoringOut(Schema):
    id: int
    name: str
    status: ScoringStatus
    done: int = Field(description="Outputs scored so far")
    total: int = Field(description="Stored val outputs to score")
    error: str
    specs: list[dict[str, Any]]
    source: list[dict[str, Any]] = Field(
        description="Per spec: {id, version} of a saved verifier, or {edited: true}"
    )
    created_by: str
    created_at: datetime
    finished_at: datetime | None
    summary: dict[str, Any] = Field(
        description="Once done: candidates, outputs, rescored, kept, cut, changed, best and "
        "original_best (index, score, original_score, rank, original_rank), front and "
        "original_front, best_tasks (per-task deltas of the new best), best_counts, tasks "
        "(per-task means), moved (the candidates that moved most), seconds, best_vs_seed "
        "(the new best against the seed under this scoring) and original_best_vs_seed (the "
        "original best against the seed under the original scores): {seed, best} and the "
        "lift with its paired bootstrap interval, as the promotion report's"
    )


class ScoringDetailOut(ScoringOut):
    candidates: list[ScoringCandidateOut] = Field(
        description="A page of the candidates, best first under this scoring (empty until "
        "done): `limit` of them from `offset`"
    )
    candidates_total: int = Field(description="Candidates under this scoring, over all pages")
    limit: int = Field(description="The page's size as served (the cap applied)")
    offset: int


@router.post("/{run_id}/scorings", response={202: ScoringOut, 400: ErrorOut, 409: ErrorOut})
def create_scoring(request, run_id: int, body: ScoringIn):
    """Re-score every stored val output of a finished (or paused) run with another
    verifier — a saved one (`verifier_id`, `version`) or an edited spec — without
    calling any model (the run's owner only). 202: a worker scores it; poll
    GET …/scorings/{id} for `done` / `total` and the results. The run's own scores
    are never changed. 400 names the bad field; 409 when the run is still running
    or stored no outputs."""
    run = _controllable(request, run_id)
    specs, source = scorings.scoring_source(
        user=request.user, verifier_id=body.verifier_id, version=body.version, spec=body.spec
    )
    try:
        scoring = scorings.scoring_create(
            run=run, user=request.user, specs=specs, source=source, name=body.name
        )
    except scorings.ScoringRefused as error:
        return Status(409, {"detail": str(error), "problems": []})
    return Status(202, scoring_reads.scoring_out(scoring))


@router.get("/{run_id}/scorings", response=list[ScoringOut])
def list_scorings(request, run_id: int):
    """The run's re-scorings, oldest first (the original is the run's own scores)."""
    run = _visible(request, run_id)
    return [scoring_reads.scoring_out(s) for s in run.scorings.select_related("created_by")]


@router.get("/{run_id}/scorings/{scoring_id}", response=ScoringDetailOut)
def get_scoring(
    request,
    run_id: int,
    scoring_id: int,
    limit: int = Query(scoring_reads.API_CANDIDATES_WITH_TASKS, ge=1, le=2**31),
    offset: int = Query(0, ge=0, le=2**31),
    tasks: bool = False,
):
    """One re-scoring: its status and progress, and once done its summary and a page
    of its candidates, best first: `limit` (at most 1,000; 200 with `tasks`) from
    `offset`, with `candidates_total`. Each candidate's per-task scores only with
    `?tasks=true` (the run export carries them all)."""
    run = _visible(request, run_id)
    scoring = run.scorings.select_related("created_by").filter(pk=scoring_id).first()
    if scoring is None:
        raise Http404("No such scoring of this run")
    cap = scoring_reads.API_CANDIDATES_WITH_TASKS if tasks else scoring_reads.API_CANDIDATES
    return scoring_reads.scoring_out(
        scoring, candidates=True, limit=min(limit, cap), offset=offset, tasks=tasks
    )
