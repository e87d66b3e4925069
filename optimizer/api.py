"""/api/runs: launch, dry-run, list, get and control optimization runs.

A run's config is the RunConfig JSON (optimizer/config.py); every problem comes
back as a 400 with {"detail", "problems": [{"field", "message"}]}.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import Http404
from ninja import Field, Router, Schema, Status

from optimizer import selectors, services
from optimizer.config import MAX_METRIC_CALLS, RunConfigError
from optimizer.limits import run_max_cost, run_pricing
from optimizer.models import Run

router = Router()


class ConfigIn(Schema):
    config: dict[str, Any] = Field(..., description="A RunConfig: task_set_id, verifier_ids, task_lm, budget, …")


class Problem(Schema):
    field: str
    message: str


class ProblemsOut(Schema):
    detail: str
    problems: list[Problem]


class DryRunOut(Schema):
    ok: bool
    problems: list[Problem]
    plan: dict[str, Any] | None = Field(
        None,
        description="What the run will do: split sizes, presets in metric calls, ranges of iterations, task/reflection/"
        "judge calls, tokens, cost and seconds, and warnings (null while the config has problems that prevent it)",
    )


class ResumeIn(Schema):
    extra_budget: int = Field(0, ge=0, le=MAX_METRIC_CALLS, description="More metric calls (required to continue a completed run)")


class ForkIn(Schema):
    candidate_index: int = Field(..., ge=0)


class CandidateOut(Schema):
    index: int
    parents: list[int]
    origin: str
    iteration: int
    metric_calls: int
    val_score: float | None
    objective_scores: dict[str, float]
    on_front: bool
    components: dict[str, str]
    cost: float = Field(0.0, description="What the iteration that found it spent (its valset scoring included)")
    usage: dict[str, Any] = Field(
        default_factory=dict, description="Calls, input/output tokens and cost per role: task, reflection, judge, total"
    )


class RunOut(Schema):
    id: int
    name: str
    owner: str
    status: str
    phase: str
    task_set_id: int | None
    budget_used: int
    budget_total: int
    seed_score: float | None
    best_score: float | None
    best_candidate: int | None
    chosen_candidate: int | None = Field(description="The candidate promoted as the run's chosen prompt, if any")
    error: str
    last_seq: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    simulator: bool = Field(description="True when the task or reflection model is the offline demo simulator, not a real model")
    cost: float = Field(0.0, description="Money spent on model calls so far, at the endpoints' prices per 1M tokens")
    pricing: str = Field("priced", description='"simulator" (free), "unpriced" (no endpoint price set) or "priced"')
    max_cost: float | None = Field(None, description="The run's cost cap, if any")
    usage: dict[str, Any] = Field(
        default_factory=dict, description="Calls, input/output tokens and cost per role: task, reflection, judge, total"
    )
    stop_reason: str = Field("", description='Why the run ended: "budget reached", "cost cap reached", …')

    @staticmethod
    def of(run: Run) -> dict:
        models = [run.config.get(field) for field in ("task_lm", "reflection_lm")] if isinstance(run.config, dict) else []
        return {
            "simulator": any(isinstance(lm, dict) and lm.get("provider") == "demo" for lm in models),
            "id": run.pk, "name": run.name, "owner": run.owner.get_username(), "status": run.status, "phase": run.phase,
            "task_set_id": run.task_set_id, "budget_used": run.budget_used, "budget_total": run.budget_total,
            "seed_score": run.seed_score, "best_score": run.best_score,
            "best_candidate": run.best_candidate.index if run.best_candidate else None,
            "chosen_candidate": run.chosen_candidate.index if run.chosen_candidate else None, "error": run.error,
            "last_seq": run.last_seq, "created_at": run.created_at, "started_at": run.started_at,
            "finished_at": run.finished_at,
            "cost": run.cost, "pricing": run_pricing(run.config), "max_cost": run_max_cost(run.config),
            "usage": run.usage or {}, "stop_reason": run.stop_reason,
        }


class RunDetailOut(RunOut):
    config: dict[str, Any]
    verifier_ids: list[str]
    candidates: list[CandidateOut]


def _problems(error: RunConfigError) -> ProblemsOut:
    return ProblemsOut(detail=str(error), problems=[Problem(field=f, message=m) for f, m in error.problems])


def _detail(run: Run) -> dict:
    candidates = [
        {
            "index": c.index, "parents": c.parents, "origin": c.origin, "iteration": c.iteration,
            "metric_calls": c.metric_calls, "val_score": c.val_score, "objective_scores": c.objective_scores,
            "on_front": c.on_front, "components": c.components, "cost": c.cost, "usage": c.usage or {},
        }
        for c in run.candidates.order_by("index")
    ]
    verifier_ids = [spec.get("id", "") for spec in run.verifier_specs]
    return {**RunOut.of(run), "config": run.config, "verifier_ids": verifier_ids, "candidates": candidates}


def _visible(request, run_id: int) -> Run:
    run = selectors.run_get(user=request.user, run_id=run_id)
    if run is None:
        raise Http404("No such run")
    return run


def _controllable(request, run_id: int) -> Run:
    """Only the owner (or an admin) controls a run; others get 404 or 403."""
    run = _visible(request, run_id)
    if run.owner_id != request.user.pk and not request.user.is_superuser:
        raise Http404("No such run")
    return run


@router.post("/", response={201: RunOut, 400: ProblemsOut})
def launch_run(request, body: ConfigIn):
    """Launch a run; it is queued for a worker once the request commits."""
    try:
        run = services.run_launch(owner=request.user, config=body.config)
    except RunConfigError as error:
        return Status(400, _problems(error))
    return Status(201, RunOut.of(run))


@router.post("/dry-run", response={200: DryRunOut})
def dry_run(request, body: ConfigIn):
    """Everything that would stop a launch (splits, verifiers, endpoints reachable), without launching,
    and the plan: what the budget buys in calls, tokens, money and time."""
    problems = services.run_dry_run(owner=request.user, config=body.config)
    plan = services.run_plan_for(owner=request.user, config=body.config, probe=not problems)
    return {"ok": not problems, "problems": [{"field": f, "message": m} for f, m in problems], "plan": plan}


@router.get("/", response=list[RunOut])
def list_runs(request, status: str = ""):
    """Runs you can see (yours and those shared with you), newest first."""
    return [RunOut.of(run) for run in selectors.run_list(user=request.user, status=status or None)]


@router.get("/{run_id}", response=RunDetailOut)
def get_run(request, run_id: int):
    return _detail(_visible(request, run_id))


def _control(action, request, run_id: int, **kwargs):
    run = _controllable(request, run_id)
    try:
        run = action(run=run, **kwargs)
    except services.RunStateError as error:
        return Status(409, {"detail": str(error), "problems": []})
    return Status(200, RunOut.of(Run.objects.select_related("owner", "best_candidate", "chosen_candidate").get(pk=run.pk)))


@router.post("/{run_id}/stop", response={200: RunOut, 409: ProblemsOut})
def stop_run(request, run_id: int):
    """Stop after the iteration in flight."""
    return _control(services.run_stop, request, run_id)


@router.post("/{run_id}/cancel", response={200: RunOut, 409: ProblemsOut})
def cancel_run(request, run_id: int):
    """Abort now, abandoning the evaluation in flight."""
    return _control(services.run_cancel, request, run_id)


@router.post("/{run_id}/resume", response={200: RunOut, 409: ProblemsOut})
def resume_run(request, run_id: int, body: ResumeIn):
    """Resume a stopped, failed or crashed run; continue a completed one with extra_budget."""
    return _control(services.run_resume, request, run_id, extra_budget=body.extra_budget)


@router.post("/{run_id}/fork", response={201: RunOut, 400: ProblemsOut})
def fork_run(request, run_id: int, body: ForkIn):
    """A new run with the same configuration, seeded from one candidate."""
    run = _visible(request, run_id)
    try:
        fork = services.run_fork(run=run, candidate_index=body.candidate_index, owner=request.user)
    except RunConfigError as error:
        return Status(400, _problems(error))
    return Status(201, RunOut.of(fork))
