"""Execute one run: build everything from the frozen config and drive gepa.optimize.

`execute_run(run_id)` is what the Celery task (and `optimize run --wait` in
embedded mode) calls. It is safe to call twice: a run that is finished, or
running on a worker whose heartbeat is fresh, is left alone; a run whose
worker died (stale heartbeat) resumes from its run_dir checkpoint.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

import gepa
from optimizer import event_types as ev
from optimizer.adapter import FrontierAdapter, SystemicFailure
from optimizer.config import RunConfig, parse_run_config
from optimizer.events import publish_run_event, publish_run_events
from optimizer.limits import BudgetReached, MeteredLM, Price, RunLimits, UsageMeter, UsageSnapshot
from optimizer.lm import LMConfig, LMError, ReflectionCallable, build_candidate_proposer, build_lm
from optimizer.lm.config import coerce_config
from optimizer.models import Candidate, Run, RunStatus, Split
from optimizer.recorder import RunRecorder
from optimizer.verify_loop import llm_judge, verifier_judge
from verifiers_app.engine import SpecError, compile_specs

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 2.0
# A RUNNING run whose heartbeat is older than this lost its worker (settings.RUN_STALE_SECONDS).
STALE_AFTER = timedelta(seconds=settings.RUN_STALE_SECONDS)


class GepaLogger:
    """gepa's log lines go to our logger (never to stdout: GEPA_NOTES 1)."""

    def log(self, message: str) -> None:
        log.debug("%s", message)


def run_dir(run_id: int) -> Path:
    return Path(settings.RUNS_DIR) / str(run_id)


def task_rows(run: Run, split: str) -> list[dict]:
    """The frozen task rows of one split, as the scoring engine reads them."""
    return [{k: v for k, v in row.items() if k != "split"} for row in run.tasks_snapshot if row.get("split") == split]


def claim(run_id: int) -> Run | None:
    """Mark the run as running on this worker, or return None when it must not run here."""
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.imported or run.status in RunStatus.finished():
            return None
        if run.status in (RunStatus.RUNNING, RunStatus.STOPPING):
            if run.heartbeat_at and now - run.heartbeat_at < STALE_AFTER:
                return None  # a live worker has it: a duplicate delivery
        run.status = RunStatus.STOPPING if run.stop_requested else RunStatus.RUNNING
        run.heartbeat_at = now
        run.started_at = run.started_at or now
        run.save(update_fields=["status", "heartbeat_at", "started_at"])
    return run


class Heartbeat(threading.Thread):
    """Proves the worker is alive and relays a cancel request to the adapter."""

    def __init__(self, run_id: int):
        super().__init__(name=f"run-{run_id}-heartbeat", daemon=True)
        self.run_id = run_id
        self.cancelled = threading.Event()
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.wait(HEARTBEAT_SECONDS):
                Run.objects.filter(pk=self.run_id).update(heartbeat_at=timezone.now())
                if Run.objects.filter(pk=self.run_id, cancel_requested=True).exists():
                    self.cancelled.set()
        finally:
            connection.close()


def set_status(run_id: int, status: str, phase: str, error: str = "") -> None:
    fields = {"status": status, "phase": phase}
    if error:
        fields["error"] = error
    if status in RunStatus.finished():
        fields["finished_at"] = timezone.now()
    Run.objects.filter(pk=run_id).update(**fields)
    payload = {"status": status, "phase": phase}
    if error:
        payload["error"] = error
    publish_run_event(run_id, ev.RUN_STATUS, payload)


def execute_run(run_id: int) -> str | None:
    """Run (or resume) the optimization; returns the final status, None if not run here."""
    close_old_connections()
    run = claim(run_id)
    if run is None:
        return None
    heartbeat = Heartbeat(run_id)
    heartbeat.start()
    try:
        return _optimize(run, heartbeat)
    except (SystemicFailure, LMError, SpecError) as error:
        return _finish(run_id, heartbeat, failure=str(error))
    except Exception as error:
        log.exception("run %s failed", run_id)
        return _finish(run_id, heartbeat, failure=f"{type(error).__name__}: {error}")
    finally:
        heartbeat.done.set()
        heartbeat.join()


def _optimize(run: Run, heartbeat: Heartbeat) -> str:
    config = parse_run_config(run.config)
    directory = run_dir(run.pk)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "gepa.stop").unlink(missing_ok=True)  # never deleted by gepa (GEPA_NOTES 7)
    resuming = (directory / "gepa_state.bin").exists()
    set_status(run.pk, RunStatus.STOPPING if run.stop_requested else RunStatus.RUNNING, "resuming" if resuming else "seed evaluation")

    trainset = task_rows(run, config.splits.train)
    valset = task_rows(run, config.splits.val)
    if not trainset or not valset:
        raise SystemicFailure(f"splits: the task set has no {'train' if not trainset else 'val'} tasks in the frozen snapshot")
    scorer = compile_specs(run.verifier_specs, aggregator=config.aggregator, thresholds=config.thresholds.as_engine())
    meter = UsageMeter(_prices(config), start=UsageSnapshot.of(run.usage))
    limits = RunLimits(
        budget_total=run.budget_total,
        iteration_cost=config.iteration_cost(len(valset)),
        meter=meter,
        max_cost=config.budget.max_cost,
        stop_at_perfect=config.early_stop.at_perfect_score,
        patience=config.early_stop.after_iterations_without_improvement,
        used_at_start=run.budget_used,
    )
    adapter = FrontierAdapter(
        task_lm=MeteredLM(build_lm(config.task_lm), meter, "task", limits=limits),
        scorer=scorer,
        concurrency=config.concurrency,
        judge_factory=_judge_factory(config, scorer, meter, limits),
        max_verify=config.verify.max_verify,
        should_abort=heartbeat.cancelled.is_set,
        meter=meter,
        limits=limits,
    )
    task_pks = dict(run.task_set.tasks.values_list("task_id", "pk")) if run.task_set_id else {}
    recorder = RunRecorder(
        run=run, adapter=adapter, valset=valset, task_pks=task_pks, budget_total=run.budget_total, meter=meter,
        limits=limits,
    )
    reflection = _reflection_kwargs(config, recorder, meter, limits)

    def stop_requested(_state) -> bool:
        return Run.objects.filter(pk=run.pk).filter(stop_requested=True).exists() or heartbeat.cancelled.is_set()

    try:
        gepa.optimize(
            seed_candidate=dict(config.seed_components),
            trainset=trainset,
            valset=valset,
            adapter=adapter,
            candidate_selection_strategy=config.candidate_selection,
            frontier_type=config.frontier_type,
            reflection_minibatch_size=config.minibatch_size,
            module_selector=config.module_selector,
            use_merge=config.use_merge,
            max_merge_invocations=config.max_merge_invocations,
            max_metric_calls=run.budget_total,
            # limits first: it must see every between-iterations check (CompositeStopper short-circuits)
            stop_callbacks=[limits, stop_requested],
            logger=GepaLogger(),
            run_dir=str(directory),
            callbacks=[recorder],
            seed=config.seed,
            track_best_outputs=False,
            display_progress_bar=False,
            raise_on_exception=True,
            **reflection,
        )
    except SystemicFailure:
        if not heartbeat.cancelled.is_set():
            raise
    except BudgetReached:
        pass  # the guard refused an evaluation beyond the budget or the cost cap: limits.reason says which
    except Exception:
        _save_usage(run.pk, recorder)
        raise
    _save_usage(run.pk, recorder)
    run.refresh_from_db()
    if run.cancel_requested:
        return _finish(run.pk, heartbeat, phase="cancelled", reason="cancelled")
    if run.stop_requested:
        return _finish(run.pk, heartbeat, phase="stopped by the user", reason="stopped by the user")
    reason = limits.reason or ""
    if config.splits.holdout:
        set_status(run.pk, RunStatus.RUNNING, "holdout evaluation")
        limits.in_iteration = False  # holdout scoring is not metric calls; the cost cap still holds
        try:
            _score_holdout(run, config, adapter, recorder)
        except BudgetReached:
            reason = limits.reason or reason
        with transaction.atomic():
            publish_run_event(run.pk, *recorder.save_usage())
    return _finish(run.pk, heartbeat, phase=f"finished: {reason}" if reason else "finished", reason=reason)


def _save_usage(run_id: int, recorder: RunRecorder) -> None:
    """What the last calls spent (the final reflection, a refused iteration's minibatch)."""
    with transaction.atomic():
        publish_run_events(run_id, [*recorder.unpublished, recorder.save_usage()])
        recorder.unpublished = []


def _prices(config: RunConfig) -> dict[str, Price]:
    """Each role's price per 1M tokens, frozen with the run's model configs (the simulator is free)."""
    lms = {"task": config.task_lm, "reflection": config.reflection_lm}
    if config.verify.enabled and config.verify.judge == "llm":
        lms["judge"] = config.verify.judge_lm
    prices = {}
    for role, lm in lms.items():
        lm = coerce_config(lm) if isinstance(lm, dict | LMConfig) else None
        if lm is not None and lm.provider != "demo":
            prices[role] = Price(lm.price_in_per_million, lm.price_out_per_million)
    return prices


def _judge_factory(config: RunConfig, scorer, meter: UsageMeter, limits: RunLimits):
    verify = config.verify
    if not verify.enabled:
        return None
    if verify.judge == "llm":
        judge = llm_judge(MeteredLM(build_lm(verify.judge_lm), meter, "judge", limits=limits), verify.judge_prompt)
        return lambda row, prompt: judge
    return lambda row, prompt: verifier_judge(lambda output: scorer.score(output, task=row, prompt=prompt))


def _reflection_kwargs(config: RunConfig, recorder: RunRecorder, meter: UsageMeter, limits: RunLimits) -> dict:
    """The demo simulator proposes directly; a real model reflects through gepa's
    prompt (metered: its tokens come from the provider's usage). Either way a
    failure is noted for the recorder, because gepa swallows it (GEPA_NOTES 3)."""

    def noting(fn):
        def call(*args):
            try:
                return fn(*args)
            except BudgetReached:
                raise  # the cost cap, not a reflection error: the run stops before the next iteration
            except Exception as error:
                recorder.reflection_errors.append(f"{type(error).__name__}: {error}")
                raise

        return call

    proposer = build_candidate_proposer(config.reflection_lm)
    if proposer is not None:
        recorder.proposer_reasoning = lambda: str(getattr(proposer, "last_reasoning", "") or "")
        return {"custom_candidate_proposer": noting(_metered_proposer(proposer, meter))}
    lm = MeteredLM(build_lm(config.reflection_lm), meter, "reflection", limits=limits)
    return {"reflection_lm": noting(ReflectionCallable(lm))}


def _metered_proposer(proposer, meter: UsageMeter):
    """The demo simulator's proposer is one (free) reflection call; its token counts are
    estimated like the simulated task model's, since no provider reports them."""
    from optimizer.lm.demo import approx_tokens

    def propose(candidate, reflective_dataset, components):
        texts = proposer(candidate, reflective_dataset, components)
        meter.record(
            "reflection",
            approx_tokens(str(candidate)) + approx_tokens(str(reflective_dataset)),
            approx_tokens(str(texts)) + approx_tokens(str(getattr(proposer, "last_reasoning", "") or "")),
        )
        return texts

    return propose


def _score_holdout(run: Run, config: RunConfig, adapter: FrontierAdapter, recorder: RunRecorder) -> None:
    """The promotion report: the seed and the best candidate on the holdout split."""
    rows = task_rows(run, config.splits.holdout)
    run.refresh_from_db()
    if not rows or run.best_candidate is None:
        return
    summary = {}
    for candidate in Candidate.objects.filter(run=run, index__in={0, run.best_candidate.index}):
        adapter.evaluate(rows, candidate.components)
        records = [adapter.take_record(candidate.components, row["task_id"]) for row in rows]
        publish_run_event(run.pk, *recorder.record_evaluations(candidate=candidate, split=Split.HOLDOUT, records=records))
        summary[candidate.index] = sum(r.score for r in records) / len(records)
    publish_run_event(
        run.pk,
        ev.HOLDOUT_SCORED,
        {
            "seed_score": summary.get(0),
            "best_index": run.best_candidate.index,
            "best_score": summary[run.best_candidate.index],
            "tasks": len(rows),
        },
    )


def _finish(run_id: int, heartbeat: Heartbeat, *, phase: str = "finished", failure: str = "", reason: str = "") -> str:
    heartbeat.done.set()
    run = Run.objects.get(pk=run_id)
    if failure:
        status = RunStatus.FAILED
        publish_run_event(run_id, ev.ERROR, {"where": "runner", "message": failure[:1000], "iteration": None})
    elif run.stop_requested or run.cancel_requested:
        status = RunStatus.STOPPED
    else:
        status = RunStatus.COMPLETED
    set_status(run_id, status, "failed" if failure else phase, error=failure[:2000])
    Run.objects.filter(pk=run_id).update(heartbeat_at=None, stop_reason="" if failure else reason)
    run.refresh_from_db()
    publish_run_event(
        run_id,
        ev.RUN_FINISHED,
        {
            "status": status,
            "best_index": run.best_candidate.index if run.best_candidate else None,
            "best_score": run.best_score,
            "seed_score": run.seed_score,
            "metric_calls": run.budget_used,
            "cost": round(run.cost, 8),
            "stop_reason": run.stop_reason,
        },
    )
    return status

