"""Run workflows: launch, dry-run, stop, cancel, pause, resume, fork, inject a candidate.

A run freezes at launch everything it reads later: the resolved model configs,
every verifier spec and the task rows, so later edits never change it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from optimizer.config import (
    DEMO_MODEL_NAME,
    DEMO_REFLECTION_LM,
    DEMO_TASK_LM,
    MAX_COMPONENT_CHARS,
    MAX_METRIC_CALLS,
    LMRef,
    RunConfig,
    RunConfigError,
    parse_run_config,
)
from optimizer.external.services import external_run_end_if_silent
from optimizer.lm import LMConfig, check_endpoint
from optimizer.models import (
    EXTERNAL_OBSERVE_ONLY,
    Candidate,
    CandidateInjection,
    InjectionStatus,
    ModelEndpoint,
    Run,
    RunStatus,
)
from optimizer.reviewer_notes import reviewer_notes_copy
from optimizer.runs import event_types as ev
from optimizer.runs.events import publish_run_event, publish_run_events
from optimizer.runs.injections import (
    budget_refusal,
    injection_event,
    pending_injections,
    run_valset_size,
)
from optimizer.runs.limits import (
    active_runs_problem,
    budget_problem,
    launch_problems,
    run_limits_for,
)
from optimizer.runs.status import run_set_paused, run_set_status
from optimizer.tasksets.models import Split, TaskSet
from verifiers_app.engine import SpecError, compile_specs, validate_task
from verifiers_app.engine.fns import registered as registered_fns
from verifiers_app.engine.quoting import quote
from verifiers_app.engine.reads import row_reads_own_expected, spec_reads_expected
from verifiers_app.models import Verifier

DEMO_JUDGE_PROBLEM = (
    "the demo simulator cannot judge answers; choose a real model endpoint as the LLM judge, "
    'or the judge "verifiers" (the run\'s own verifiers, which work offline)'
)


class RunStateError(ValueError):
    """The run is not in a state that allows this action."""


@dataclass
class _Prepared:
    config: RunConfig
    task_set: TaskSet | None
    verifiers: list[Verifier]
    rows: list[dict]
    problems: list[tuple[str, str]]

    @property
    def valset_size(self) -> int:
        return sum(1 for row in self.rows if row["split"] == self.config.splits.val)


INLINE_ENDPOINT_PROBLEM = (
    "choose a model endpoint by name (or the demo simulator): only an administrator may give an "
    "endpoint's base URL and key variable in a run's configuration"
)


def _resolve_lm(
    ref: LMConfig | str, field: str, problems: list, *, inline_endpoints: bool
) -> LMConfig | str:
    if isinstance(ref, LMConfig):
        # An inline config names a URL and an environment variable: from anyone but an
        # administrator it could send a server secret (SECRET_KEY, a cloud key) as the
        # bearer token to a host of their choosing. Endpoints are configured by admins.
        if ref.provider != "demo" and not inline_endpoints:
            problems.append((field, INLINE_ENDPOINT_PROBLEM))
        return ref
    if ref == DEMO_MODEL_NAME:
        return DEMO_REFLECTION_LM if field == "reflection_lm" else DEMO_TASK_LM
    endpoint = ModelEndpoint.objects.filter(name=ref).first()
    if endpoint is None:
        problems.append((field, f'no model endpoint named "{ref}"'))
        return ref
    try:
        return LMConfig.model_validate(
            {
                "provider": endpoint.provider,
                "model": endpoint.model,
                "base_url": endpoint.base_url or None,
                "api_key_env": endpoint.api_key_env or None,
                **(endpoint.options or {}),
                "price_in_per_million": endpoint.price_in_per_million,
                "price_out_per_million": endpoint.price_out_per_million,
            }
        )
    except ValueError as error:
        problems.append((field, f'model endpoint "{ref}" is misconfigured: {error}'))
        return ref


def _holdout_split(
    config: RunConfig, rows: list[dict], problems: list[tuple[str, str]]
) -> str | None:
    """The split the run scores its seed and best on at the end: the one named,
    else the set's "holdout" split when it has tasks (held out by the import's
    default rule), unless evaluate_holdout is off."""
    named = config.splits.holdout
    if not config.evaluate_holdout:
        if named:
            problems.append(
                (
                    "splits.holdout",
                    f'names the split "{named}" but evaluate_holdout is off: clear one of them',
                )
            )
        return None
    if named:
        return named
    if Split.HOLDOUT in (config.splits.train, config.splits.val):
        return None
    return Split.HOLDOUT.value if any(row["split"] == Split.HOLDOUT for row in rows) else None


def _prepare(*, owner, config: dict | RunConfig, trusted_lms: bool = False) -> _Prepared:
    """Validate and resolve a config. `trusted_lms`: its model configs were resolved by an
    earlier launch (a fork of a run executed here), so inline endpoints are allowed."""
    config = parse_run_config(config)
    inline = trusted_lms or bool(getattr(owner, "is_superuser", False))
    problems: list[tuple[str, str]] = []

    task_set = TaskSet.objects.visible_to(owner).filter(pk=config.task_set_id).first()
    rows = []
    if task_set is None:
        problems.append(("task_set_id", f"no task set {config.task_set_id} that you can use"))
    else:
        rows = [dict(task.as_row(), split=task.split) for task in task_set.tasks.all()]
        for field in ("train", "val", "holdout"):
            split = getattr(config.splits, field)
            if split and not any(row["split"] == split for row in rows):
                problems.append(
                    (
                        f"splits.{field}",
                        f'task set "{task_set.name}" has no tasks in split "{split}"',
                    )
                )

    holdout = _holdout_split(config, rows, problems)
    valset_size = sum(1 for row in rows if row["split"] == config.splits.val)
    exact = config.budget.max_metric_calls
    if valset_size and exact is not None and exact < valset_size:
        # gepa scores the seed on the whole valset before anything can stop it.
        problems.append(
            (
                "budget.max_metric_calls",
                f"must be at least {valset_size}: scoring the seed on the valset takes {valset_size} metric calls",
            )
        )

    visible = Verifier.objects.visible_to(owner)
    found = {
        slug: v for slug in config.verifier_ids if (v := visible.lookup(owner, slug)) is not None
    }
    verifiers = [found[slug] for slug in config.verifier_ids if slug in found]
    for slug in config.verifier_ids:
        if slug not in found:
            problems.append(("verifier_ids", f'no verifier with id "{slug}" that you can use'))
    if not config.verifier_ids and rows and not any(row.get("verifier") for row in rows):
        problems.append(
            ("verifier_ids", "choose at least one verifier (no task in the set has its own)")
        )
    try:
        compile_specs(
            [v.spec for v in verifiers],
            aggregator=config.aggregator,
            thresholds=config.thresholds.as_engine(),
        )
    except SpecError as error:
        problems.append(("verifier_ids", str(error)))
    for row in rows:  # row verifiers resolve, expectations are well-formed
        try:
            validate_task({k: v for k, v in row.items() if k != "split"})
        except SpecError as error:
            problems.append((f"task {row['task_id']}", str(error)))

    updates: dict[str, Any] = {
        "splits": config.splits.model_copy(update={"holdout": holdout}),
        "task_lm": _resolve_lm(config.task_lm, "task_lm", problems, inline_endpoints=inline),
        "reflection_lm": _resolve_lm(
            config.reflection_lm, "reflection_lm", problems, inline_endpoints=inline
        ),
    }
    judge_ref = config.verify.judge_lm
    if (
        config.verify.enabled and config.verify.judge == "llm" and judge_ref is not None
    ):  # VerifyLoop requires it
        judge_lm = _resolve_lm(judge_ref, "verify.judge_lm", problems, inline_endpoints=inline)
        if isinstance(judge_lm, LMConfig) and judge_lm.provider == "demo":
            # The simulator cannot read a judge prompt: it would reject every answer and
            # spend max_verify attempts on each task. Say so instead of faking verdicts.
            problems.append(("verify.judge_lm", DEMO_JUDGE_PROBLEM))
        updates["verify"] = config.verify.model_copy(update={"judge_lm": judge_lm})
    prepared = _Prepared(config.model_copy(update=updates), task_set, verifiers, rows, problems)
    if task_set is not None:  # the owner's run limits (admin-set, optimizer/runs/limits.py)
        budget_field = (
            "budget.max_metric_calls" if config.budget.max_metric_calls is not None else "budget"
        )
        problems += launch_problems(
            owner,
            metric_calls=config.max_metric_calls(prepared.valset_size),
            concurrency=config.concurrency,
            budget_field=budget_field,
        )
    return prepared


def run_dry_run(*, owner, config: dict | RunConfig) -> list[tuple[str, str]]:
    """Everything that would stop a launch, as (field, problem); [] when it can go.
    Unlike run_launch, it also contacts each model endpoint."""
    try:
        prepared = _prepare(owner=owner, config=config)
    except RunConfigError as error:
        return error.problems
    problems = list(prepared.problems)
    config = prepared.config
    models: dict[str, LMRef | None] = {
        "task_lm": config.task_lm,
        "reflection_lm": config.reflection_lm,
    }
    if config.verify.enabled and config.verify.judge == "llm":
        models["verify.judge_lm"] = config.verify.judge_lm
    refused = {field for field, _ in problems}
    for field, lm in models.items():
        if isinstance(lm, LMConfig) and field not in refused:  # never probe a refused endpoint
            problem = check_endpoint(lm)
            if problem:
                problems.append((field, problem))
    return problems


def run_plan_for(*, owner, config: dict | RunConfig, probe: bool = False) -> dict | None:
    """The plan of a launch (optimizer/runs/plan.py), or None while the config cannot be resolved
    (its problems come from run_dry_run). `probe`: one real task call when the endpoint
    has no past evaluations here, for the dry run; the live form never probes."""
    from optimizer.runs.plan import run_plan

    try:
        prepared = _prepare(owner=owner, config=config)
    except RunConfigError:
        return None
    lms = [prepared.config.task_lm, prepared.config.reflection_lm]
    if prepared.task_set is None or not all(isinstance(lm, LMConfig) for lm in lms):
        return None
    verify = prepared.config.verify
    if verify.enabled and verify.judge == "llm" and not isinstance(verify.judge_lm, LMConfig):
        return None
    refused = {field for field, _ in prepared.problems}
    return run_plan(prepared.config, prepared.rows, probe=probe and "task_lm" not in refused)


def run_launch(
    *,
    owner,
    config: dict | RunConfig,
    trusted_lms: bool = False,
    forked_from: Run | None = None,
    forked_from_candidate: int | None = None,
) -> Run:
    """Freeze the config, verifiers and tasks into a queued Run and queue it after commit;
    a fork (`forked_from`) takes the run's reviewer notes on the tasks it still has.
    Raises RunConfigError (problems naming each field) and saves nothing when invalid."""
    prepared = _prepare(owner=owner, config=config, trusted_lms=trusted_lms)
    task_set = prepared.task_set
    if prepared.problems or task_set is None:  # no task set is one of the problems
        raise RunConfigError(prepared.problems)
    config = prepared.config
    with transaction.atomic():
        # Two launches at once must not both pass the active-runs limit: the
        # owner's row is the lock they queue on, then the count is taken again.
        get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
        too_many = active_runs_problem(owner, run_limits_for(owner))
        if too_many:
            raise RunConfigError([("active_runs", too_many)])
        run = Run.objects.create(
            owner=owner,
            name=config.name or f"{task_set.name} · {timezone.now():%Y-%m-%d %H:%M}",
            task_set=prepared.task_set,
            config=config.frozen(),
            verifier_specs=[v.spec for v in prepared.verifiers],
            tasks_snapshot=prepared.rows,
            budget_total=config.max_metric_calls(prepared.valset_size),
            forked_from=forked_from,
            forked_from_candidate=forked_from_candidate if forked_from is not None else None,
            enqueued_at=timezone.now(),
        )
        run.verifiers.set(prepared.verifiers)
        if forked_from is not None:
            # What reviewers noticed still holds for the same tasks: the fork's reflections read it too.
            reviewer_notes_copy(source=forked_from, target=run)
        Verifier.objects.filter(pk__in=[v.pk for v in prepared.verifiers]).update(
            last_used_at=timezone.now()
        )
        publish_run_event(run.pk, ev.RUN_STATUS, {"status": RunStatus.QUEUED, "phase": "queued"})
        _enqueue(run)
    return run


def run_data_warnings(
    *,
    tasks: int,
    expecting: int,
    schemas: int,
    specs: list[dict],
    answered: int = 0,
    task_set: str = "",
) -> list[str]:
    """Task data the chosen verifiers would silently ignore: expectations (in
    `expecting` of the `tasks`) with no task_expectations check, schemas with no
    expected_output_schema check, a schema check with no schema in any task
    (it would pass every output), and an `expected` (in `answered` tasks of the
    set named `task_set`, not counting those whose own row verifier reads it)
    that no chosen verifier reads (only row verifiers do)."""
    types = {
        check.get("type")
        for spec in specs
        if isinstance(spec, dict)
        for check in (spec.get("checks") or [])
        if isinstance(check, dict)
    }
    warnings = []
    if expecting and "task_expectations" not in types:
        warnings.append(
            f"tasks: {expecting} task(s) carry expectations (metadata.expectations) but no chosen verifier "
            "has a task_expectations check, so they are ignored; choose a verifier with one"
        )
    if schemas and "expected_output_schema" not in types:
        warnings.append(
            f"tasks: {schemas} task(s) carry a schema (metadata.expectedOutputSchema) but no chosen verifier "
            "has an expected_output_schema check, so it is ignored"
        )
    if "expected_output_schema" in types and tasks and not schemas:
        warnings.append(
            "verifiers: an expected_output_schema check is chosen but no task has a schema "
            "(metadata.expectedOutputSchema), so that check passes every output"
        )
    if answered and not any(spec_reads_expected(spec) for spec in specs):
        of_set = f" of task set {quote(task_set)}" if task_set else ""
        warnings.append(
            f"tasks: {answered} task(s){of_set} carry expected (an answer column such as output "
            "or answer is imported as expected) but no chosen verifier reads it, so it is "
            "ignored; only row verifiers read expected: choose one that compares the output "
            'with it, e.g. a verifier {"kind": "in_process", "fn_name": "exact_match"} '
            f"(fns: {', '.join(registered_fns())})"
        )
    return warnings


def run_snapshot_warnings(run: Run) -> list[str]:
    """The launch warnings of a run, from what it froze (budget, ignored task data)."""
    metadata = [row.get("metadata") or {} for row in run.tasks_snapshot]
    answered = sum(
        1
        for row in run.tasks_snapshot
        if row.get("expected") is not None and not row_reads_own_expected(row)
    )
    return [
        w
        for w in [
            run_budget_warning(run),
            *run_data_warnings(
                tasks=len(metadata),
                expecting=sum(1 for m in metadata if "expectations" in m),
                schemas=sum(1 for m in metadata if "expectedOutputSchema" in m),
                specs=run.verifier_specs,
                answered=answered,
                task_set=run.task_set.name if run.task_set else "",
            ),
        ]
        if w
    ]


def run_budget_warning(run: Run) -> str | None:
    return parse_run_config(run.config).budget_warning(run_valset_size(run))


def _enqueue(run: Run) -> None:
    """After commit, hand the run to the workers. The committed queued row is the
    durable queue: with the broker down it is sent later by a worker's watchdog
    (optimizer.celery_tasks.enqueue_run), and the launch still answers with the run."""
    from optimizer.celery_tasks import enqueue_run

    transaction.on_commit(lambda: enqueue_run(run.pk))


def _stop_unheld(
    run: Run, phase: str, *, reason: str = "stopped by the user", **fields: Any
) -> None:
    """Stop a run no worker holds (queued or paused) at once. A paused run ends
    as a stopped run would (its run.finished event says what it had found)."""
    paused = run.status == RunStatus.PAUSED
    run_set_status(
        run,
        RunStatus.STOPPED,
        phase,
        stop_requested=True,
        pause_requested=False,
        stop_reason=reason if paused else "",
        finished_at=timezone.now(),
        **fields,
    )
    if paused:
        publish_run_event(
            run.pk,
            ev.RUN_FINISHED,
            {
                "status": RunStatus.STOPPED,
                "best_index": run.best_candidate.index if run.best_candidate else None,
                "best_score": run.best_score,
                "seed_score": run.seed_score,
                "metric_calls": run.budget_used,
                "cost": round(run.cost, 8),
                "stop_reason": reason,
            },
        )


def run_stop(*, run: Run) -> Run:
    """Stop between iterations (a queued or paused run stops at once)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status in (RunStatus.QUEUED, RunStatus.PAUSED):
            _stop_unheld(
                run,
                "stopped before it started"
                if run.status == RunStatus.QUEUED
                else "stopped while paused",
            )
        elif external_run_end_if_silent(run, cancel=False):
            run.refresh_from_db()
        elif run.status in (RunStatus.RUNNING, RunStatus.STOPPING):
            run_set_status(
                run,
                RunStatus.STOPPING,
                "stopping after this iteration",
                stop_requested=True,
                pause_requested=False,
            )
        else:
            raise RunStateError(
                f"run {run.pk} is {run.status}; only a queued or running run can be stopped"
            )
    return run


def run_pause(*, run: Run, by: Any = None) -> Run:
    """Pause a native run at its next iteration boundary: the iteration in flight
    finishes, gepa writes its checkpoint and the worker lets the run go (status
    paused: no worker, not an active run). A queued run pauses at once. Asking
    again while it pauses, or once it is paused, changes nothing. `by`: the user
    who asked (None: the command line)."""
    with transaction.atomic():
        run = Run.objects.select_related("progress").select_for_update(of=("self",)).get(pk=run.pk)
        if run.is_external:
            raise RunStateError(f"run {run.pk} cannot be paused: {EXTERNAL_OBSERVE_ONLY}")
        if run.imported:
            raise RunStateError(f"run {run.pk} was imported, not executed here; fork it instead")
        if run.status == RunStatus.PAUSED or (
            run.status == RunStatus.RUNNING and run.pause_requested
        ):
            return run
        by_pk = getattr(by, "pk", None)
        if run.status == RunStatus.QUEUED:
            Run.objects.filter(pk=run.pk).update(paused_by_id=by_pk)
            run_set_paused(run, iteration=None)
        elif run.status == RunStatus.RUNNING:
            name = getattr(by, "username", "") or ""
            run_set_status(
                run,
                RunStatus.RUNNING,
                f"pausing after this iteration (asked by {name})"
                if name
                else "pausing after this iteration",
                pause_requested=True,
                paused_by_id=by_pk,
            )
        else:
            raise RunStateError(
                f"run {run.pk} is {run.status}; only a queued or running run can be paused"
            )
    return run


def run_cancel(*, run: Run) -> Run:
    """Abort now: the evaluation in flight is abandoned, what was recorded stays."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status in (RunStatus.QUEUED, RunStatus.PAUSED):
            _stop_unheld(run, "cancelled", reason="cancelled", cancel_requested=True)
        elif external_run_end_if_silent(run, cancel=True):
            run.refresh_from_db()
        elif run.status in (RunStatus.RUNNING, RunStatus.STOPPING):
            run_set_status(
                run,
                RunStatus.STOPPING,
                "cancelling",
                stop_requested=True,
                cancel_requested=True,
                pause_requested=False,
            )
        else:
            raise RunStateError(
                f"run {run.pk} is {run.status}; only a queued or running run can be cancelled"
            )
    return run


def run_resume(*, run: Run, extra_budget: int = 0) -> Run:
    """Resume a paused, stopped, failed or crashed run from its checkpoint, or
    continue a completed one with `extra_budget` more metric calls. A running run
    asked to pause and not paused yet keeps running (the pause is withdrawn)."""
    from optimizer.runs.runner import STALE_AFTER

    if extra_budget < 0:
        raise RunStateError("extra_budget: must not be negative")
    if run.budget_total + extra_budget > MAX_METRIC_CALLS:
        raise RunStateError(
            f"extra_budget: a run's budget may not exceed {MAX_METRIC_CALLS:,} metric calls"
        )
    limits = run_limits_for(run.owner)
    if extra_budget:
        too_large = budget_problem(limits, run.budget_total + extra_budget, "extra_budget")
        if too_large:
            raise RunStateError(too_large.replace(": ", ": the run's budget would be ", 1))
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=run.owner_id).first()
        too_many = active_runs_problem(run.owner, limits, exclude_run_id=run.pk)
        if too_many:
            raise RunStateError(f"active_runs: {too_many}")
        run = Run.objects.select_related("progress").select_for_update(of=("self",)).get(pk=run.pk)
        crashed = run.status in (RunStatus.RUNNING, RunStatus.STOPPING) and (
            run.heartbeat_at is None or timezone.now() - run.heartbeat_at >= STALE_AFTER
        )
        if run.imported:
            raise RunStateError(f"run {run.pk} was imported, not executed here; fork it instead")
        if run.is_external:
            raise RunStateError(
                f"run {run.pk} runs in its owner's own process; start it again there"
            )
        if run.status == RunStatus.COMPLETED and extra_budget == 0:
            raise RunStateError("extra_budget: a completed run continues only with more budget")
        if run.status == RunStatus.RUNNING and run.pause_requested and not crashed:
            # Resumed before it reached its pause: the pause is withdrawn, the run goes on
            # (a runner that has already left gepa for it picks the run up again). Its
            # worker set its budget when it started: more budget waits for the pause.
            if extra_budget:
                raise RunStateError(
                    f"extra_budget: run {run.pk} is still running (pausing); "
                    "add budget once it is paused"
                )
            run_set_status(
                run, RunStatus.RUNNING, "optimizing", pause_requested=False, paused_by_id=None
            )
            return run
        resumable = (RunStatus.STOPPED, RunStatus.FAILED, RunStatus.COMPLETED, RunStatus.PAUSED)
        if run.status not in resumable and not crashed:
            raise RunStateError(
                f"run {run.pk} is {run.status}; only a paused, stopped, failed, completed or crashed run resumes"
            )
        run_set_status(
            run,
            RunStatus.QUEUED,
            "queued to resume",
            stop_requested=False,
            cancel_requested=False,
            pause_requested=False,
            paused_by_id=None,
            error="",
            stop_reason="",
            finished_at=None,
            budget_total=run.budget_total + extra_budget,
            enqueued_at=timezone.now(),
        )
        _enqueue(run)
    return run


def run_fork(*, run: Run, candidate_index: int, owner) -> Run:
    """A new run with the same configuration, seeded from one candidate's components,
    with the run's reviewer notes on the tasks it still has (authors kept).
    Only who controls the run forks it: the fork runs on the run's frozen endpoints."""
    if not run.controllable_by(owner):
        raise PermissionDenied(f"only the owner of run {run.pk} can fork it")
    candidate = Candidate.objects.filter(run=run, index=candidate_index).first()
    if candidate is None:
        raise RunConfigError(
            [("candidate_index", f"run {run.pk} has no candidate {candidate_index}")]
        )
    config = dict(run.config)
    config.update(
        name=f"{run.name} · fork of candidate {candidate_index}",
        seed_components=candidate.components,
    )
    # An imported run's config came from a file, not from a launch here: check its models again.
    return run_launch(
        owner=owner,
        config=config,
        trusted_lms=not run.imported,
        forked_from=run,
        forked_from_candidate=candidate_index,
    )


def run_fork_config(
    *, run: Run, candidate_index: int, injection: CandidateInjection | None = None
) -> dict:
    """The config the launch form opens with to fork `run` from one candidate (the
    user changes budget, models … before launching), or RunConfigError. With an
    `injection` of the run (one it refused), the fork starts from that edited text."""
    if injection is not None:
        if injection.run_id != run.pk:
            raise RunConfigError([("injection", f"run {run.pk} has no such injection")])
        return dict(
            run.config,
            name=f"{run.name} · fork of an edit of candidate {injection.parent}",
            seed_components=injection.components,
        )
    candidate = Candidate.objects.filter(run=run, index=candidate_index).first()
    if candidate is None:
        raise RunConfigError(
            [("candidate_index", f"run {run.pk} has no candidate {candidate_index}")]
        )
    return dict(
        run.config,
        name=f"{run.name} · fork of candidate {candidate_index}",
        seed_components=candidate.components,
    )


def _injection_problems(
    run: Run, components: Any, edited_from: Any
) -> tuple[list[tuple[str, str]], dict[str, str] | None]:
    """What is wrong with an edited candidate for `run` (fields named as the API's
    body: `components.<name>`, `edited_from`), and the components it was edited from."""
    seed = dict(parse_run_config(run.config).seed_components)
    names = list(seed)
    problems: list[tuple[str, str]] = []
    if not isinstance(components, dict):
        problems.append(("components", "must be an object: component name → text"))
    else:
        for name in components:
            if name not in names:
                problems.append(
                    (
                        f"components.{str(name)[:80]}",
                        f"is not a component of run {run.pk} (its components: {', '.join(names)})",
                    )
                )
        for name in names:
            text = components.get(name)
            field = f"components.{name}"
            if text is None:
                problems.append((field, "is missing: give the text of every component"))
            elif not isinstance(text, str):
                problems.append((field, "must be text"))
            elif not text.strip():
                problems.append((field, "must not be empty"))
            elif len(text) > MAX_COMPONENT_CHARS:
                problems.append((field, f"is longer than {MAX_COMPONENT_CHARS:,} characters"))
            elif "\x00" in text:
                problems.append((field, "must not contain a NUL character"))
    parent: dict[str, str] | None = None
    if edited_from is not None and (
        isinstance(edited_from, bool)
        or not isinstance(edited_from, int)
        or not 0 <= edited_from < 2**31
    ):
        problems.append(("edited_from", "must be a candidate index (0: the seed) or null"))
    else:
        index = edited_from or 0
        candidate = Candidate.objects.filter(run=run, index=index).only("components").first()
        if candidate is not None:
            parent = candidate.components
        elif index == 0:
            parent = seed
        else:
            problems.append(("edited_from", f"run {run.pk} has no candidate {index}"))
    if not problems and parent is not None and components == parent:
        problems.append(
            ("components", f"are the text of candidate {edited_from or 0}: edit them first")
        )
    return problems, parent


def run_inject_candidate(
    *, run: Run, components: Any, edited_from: int | None, user
) -> CandidateInjection:
    """Add a user's edited candidate to a queued, running or paused native run.

    Stored `pending` and announced (candidate.injected); the runner evaluates it
    on the whole val set at its next iteration boundary, charged to the run's
    budget, and adds it to gepa's pool (optimizer/runs/injections.py). A bad
    candidate is a RunConfigError naming `components.<name>` or `edited_from`
    (nothing stored); an external run a RunStateError (its callbacks are
    observe-only). A run that has ended or is ending, or whose budget left
    (after the injections already waiting) cannot pay one val evaluation, gets
    the injection stored `refused` with the reason, so the text is kept and the
    page can offer to fork from it."""
    problems, _ = _injection_problems(run, components, edited_from)
    if problems:
        raise RunConfigError(problems)
    with transaction.atomic():
        run = Run.objects.select_related("progress").select_for_update(of=("self",)).get(pk=run.pk)
        if run.is_external:
            raise RunStateError(f"run {run.pk} takes no added candidate: {EXTERNAL_OBSERVE_ONLY}")
        reason = ""
        if run.imported:
            reason = (
                f"run {run.pk} was imported, not executed here: fork it to go on from this text"
            )
        elif run.status not in RunStatus.steerable():
            ended = (
                "is stopping" if run.status == RunStatus.STOPPING else f"has ended ({run.status})"
            )
            reason = f"run {run.pk} {ended}: fork it to go on from this text"
        else:
            valset = run_valset_size(run)
            waiting = pending_injections(run.pk).count()
            refusal = budget_refusal(
                valset_size=valset,
                budget_total=run.budget_total,
                budget_used=run.budget_used + waiting * valset,
            )
            if refusal:
                queued = (
                    f" ({waiting} edited candidates already wait for theirs)" if waiting else ""
                )
                reason = f"{refusal}{queued}: resume the run with more budget, or fork it"
        injection = CandidateInjection.objects.create(
            run=run,
            components=dict(components),
            edited_from=edited_from,
            author=user,
            status=InjectionStatus.REFUSED if reason else InjectionStatus.PENDING,
            reason=reason[:300],
            decided_at=timezone.now() if reason else None,
        )
        publish_run_events(run.pk, [injection_event(injection, author=user.username)])
    return injection


MAX_TAGS = 20
MAX_TAG_CHARS = 40
MAX_NOTES_CHARS = 20_000


def run_annotate(*, run: Run, tags: list[str] | None = None, notes: str | None = None) -> Run:
    """Set a run's tags and/or notes (None leaves a field as it is). Tags are
    trimmed, deduplicated in order, each 1–40 characters, at most 20.
    Raises RunConfigError naming the field; saves nothing then."""
    problems = []
    if tags is not None:
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            problems.append(("tags", "must be a list of strings"))
        else:
            cleaned = list(dict.fromkeys(t.strip() for t in tags if t.strip()))
            if len(cleaned) > MAX_TAGS:
                problems.append(("tags", f"at most {MAX_TAGS} tags, got {len(cleaned)}"))
            for tag in cleaned:
                if len(tag) > MAX_TAG_CHARS or "\x00" in tag:
                    problems.append(
                        (
                            "tags",
                            f"each tag is at most {MAX_TAG_CHARS} characters with no NUL: {tag[:40]!r}",
                        )
                    )
                    break
            tags = cleaned
    if notes is not None and (
        not isinstance(notes, str) or len(notes) > MAX_NOTES_CHARS or "\x00" in notes
    ):
        problems.append(
            ("notes", f"must be text of at most {MAX_NOTES_CHARS} characters with no NUL")
        )
    if problems:
        raise RunConfigError(problems)
    fields: dict[str, Any] = {}
    if tags is not None:
        fields["tags"] = tags
    if notes is not None:
        fields["notes"] = notes
    if fields:
        Run.objects.filter(pk=run.pk).update(**fields)
        for name, value in fields.items():
            setattr(run, name, value)
    return run


def run_archive(*, run: Run, archived: bool = True) -> Run:
    """Hide a finished run from the runs list (or bring it back). A queued or
    running run is refused: stop it first."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if archived and run.status in RunStatus.active():
            raise RunStateError(f"run {run.pk} is {run.status}; stop it before archiving it")
        run.archived = archived
        run.save(update_fields=["archived"])
    return run


def run_delete(*, run: Run) -> None:
    """Delete a run with its candidates, evaluations, events and checkpoint
    directory. Refused while it is queued, running or stopping (its worker would
    keep writing): stop or cancel it first."""
    # Imported here: the runner pulls in gepa, which a web request deleting a run need not load first.
    from optimizer.runs.runner import run_dir

    with transaction.atomic():
        locked = Run.objects.select_for_update().filter(pk=run.pk).first()
        if locked is None:
            return
        if locked.status in RunStatus.active():
            raise RunStateError(
                f"run {run.pk} is {locked.status}; stop or cancel it before deleting it"
            )
        directory = run_dir(locked.pk)
        locked.delete()
        transaction.on_commit(lambda: shutil.rmtree(directory, ignore_errors=True))
