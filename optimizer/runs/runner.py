"""Execute one run: build everything from the frozen config and drive gepa.optimize.

`execute_run(run_id)` is what the Celery task (and `optimize run --wait` in
embedded mode) calls. It is safe to call twice: a run that is finished, or
running on a worker whose heartbeat is fresh, is left alone; a run whose
worker died (stale heartbeat) resumes from its run_dir checkpoint.

One run, one runner (optimizer/runs/claims.py): a worker that claims a run gets a
fresh token and every write it makes is conditional on it. If the watchdog
hands the run to another worker (this one's heartbeat went stale), this one
notices at its next write, heartbeat or stopper check, raises ClaimLost out of
gepa (so gepa does not write its checkpoint either) and ends without a word.
"""

from __future__ import annotations

import gc
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any, Generic, TypeVar

import gepa
from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.urls import reverse
from django.utils import timezone
from gepa.proposer.reflective_mutation.base import CandidateSelector
from gepa.proposer.reflective_mutation.reflection_lm import ReflectionProposal
from gepa.strategies.batch_sampler import EpochShuffledBatchSampler
from gepa.strategies.candidate_selector import (
    CurrentBestCandidateSelector,
    EpsilonGreedyCandidateSelector,
    ParetoCandidateSelector,
    TopKParetoCandidateSelector,
)
from gepa.strategies.proposal_sampling import IndependentSampling

from dashboard.lib.db_retry import retry_db
from optimizer.config import LMRef, RunConfig, parse_run_config, resolved_lm
from optimizer.lm import (
    LMConfig,
    LMError,
    ReflectionCallable,
    build_candidate_proposer,
    build_lm,
)
from optimizer.lm.config import coerce_config
from optimizer.models import Candidate, Evaluation, Run, RunStatus
from optimizer.reviewer_notes import notes_on_tasks
from optimizer.runs import event_types as ev
from optimizer.runs.adapter import (
    MODEL_FAILED,
    EvalRecord,
    FrontierAdapter,
    SystemicFailure,
    candidate_digest,
)
from optimizer.runs.budget import (
    BudgetGuard,
    BudgetReached,
    MeteredLM,
    Price,
    UsageMeter,
    UsageSnapshot,
)
from optimizer.runs.checkpoint import (
    CarriedState,
    LeanCheckpoint,
    State,
    carry_randomness,
    checkpoint_metric_calls,
)
from optimizer.runs.claims import ClaimLost, RunClaim, process_lock
from optimizer.runs.events import (
    publish_run_event,
    publishing_in_background,
)
from optimizer.runs.injections import STATE_KEY as INJECTIONS_STATE_KEY
from optimizer.runs.injections import InjectionBoundary, any_pending
from optimizer.runs.recorder import RunRecorder
from optimizer.runs.recording_thread import RecorderThread
from optimizer.runs.status import run_set_paused, run_set_status
from optimizer.runs.verify_loop import Judge, llm_judge, verifier_judge
from optimizer.tasksets.models import Split
from verifiers_app.engine import Scorer, SpecError, compile_specs
from verifiers_app.engine.json_types import JSONObject
from verifiers_app.engine.linear_regexes import compile_linear

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 2.0
# A RUNNING run whose heartbeat is older than this lost its worker (settings.RUN_STALE_SECONDS).
STALE_AFTER = timedelta(seconds=settings.RUN_STALE_SECONDS)

T = TypeVar("T")
A = TypeVar("A")


class GepaLogger:
    """gepa's log lines go to our logger (never to stdout: docs/gepa-notes.md §1)."""

    def log(self, message: str) -> None:
        log.debug("%s", message)


def run_dir(run_id: int) -> Path:
    return Path(settings.RUNS_DIR) / str(run_id)


def _set_aside_another_runs_checkpoint(run_id: int) -> None:
    """A run no worker has started owns no checkpoint: one in its directory is
    another run's that had the same id (the database was reset or restored while
    the runs directory was kept, or SQLite gave a deleted run's id again) and
    would be resumed as this one's. It is renamed, not deleted."""
    state = run_dir(run_id) / "gepa_state.bin"
    if state.exists():
        aside = state.with_name(f"{state.name}.another-run-{timezone.now():%Y%m%dT%H%M%S%f}")
        state.rename(aside)
        log.warning(
            "run %s: its directory held a checkpoint no worker of this run wrote; "
            "it starts from its seed (the checkpoint is kept as %s)",
            run_id,
            aside,
        )


def task_rows(run: Run, split: str) -> list[JSONObject]:
    """The frozen task rows of one split, as the scoring engine reads them."""
    return [
        {k: v for k, v in row.items() if k != "split"}
        for row in run.tasks_snapshot
        if row.get("split") == split
    ]


def claim(run_id: int) -> tuple[Run, RunClaim] | None:
    """Take the run for this worker with a fresh claim token, or return None when
    it must not run here (finished, imported, or held by a live worker)."""
    now = timezone.now()
    with transaction.atomic():
        run = (
            Run.objects.select_related("progress")
            .select_for_update(of=("self",))
            .filter(pk=run_id)
            .first()
        )
        if run is None or run.imported or run.is_external or run.status in RunStatus.finished():
            return None
        if run.status == RunStatus.PAUSED:
            return None  # paused before a worker took it: a resume queues it again
        alive = run.heartbeat_at and now - run.heartbeat_at < STALE_AFTER
        if run.status in (RunStatus.RUNNING, RunStatus.STOPPING) and alive:
            return None  # a live worker has it: a duplicate delivery
        if run.pause_requested and not run.stop_requested:
            # Its worker was lost on the way to the pause: the run pauses here, at its
            # last checkpoint (a resume runs again the iteration that was in flight).
            # Its budget line goes back to what the checkpoint counts: the lost
            # iteration's calls are not the run's record, and a resume goes on from
            # that count (otherwise the line would drop back at the resume).
            run.progress.budget_used = checkpoint_metric_calls(run_dir(run.pk))
            run.progress.save(update_fields=["budget_used"])
            run_set_paused(run, iteration=None)
            return None
        if run.started_at is None:
            _set_aside_another_runs_checkpoint(run.pk)
        run.status = RunStatus.STOPPING if run.stop_requested else RunStatus.RUNNING
        run.started_at = run.started_at or now
        run.claim = RunClaim.new_token()
        run.save(update_fields=["status", "started_at", "claim"])
        run.progress.heartbeat_at = now
        run.progress.save(update_fields=["heartbeat_at"])
    return run, RunClaim(run.pk, run.claim)


class Heartbeat(threading.Thread):
    """Proves the worker is alive (while it holds the claim) and relays a cancel
    request to the adapter. A database error never ends it: it retries on a new
    connection, quickly at first, so a blip never makes the run look dead."""

    def __init__(self, claim: RunClaim) -> None:
        super().__init__(name=f"run-{claim.run_id}-heartbeat", daemon=True)
        self.claim = claim
        self.cancelled = threading.Event()
        self.done = threading.Event()

    def beat(self) -> None:
        self.claim.update(heartbeat_at=timezone.now())
        if self.claim.runs().filter(cancel_requested=True).exists():
            self.cancelled.set()

    def run(self) -> None:
        try:
            while not self.done.wait(HEARTBEAT_SECONDS):
                try:
                    retry_db(
                        self.beat,
                        what=f"run {self.claim.run_id}: heartbeat",
                        give_up_after=None,
                        max_delay=HEARTBEAT_SECONDS,
                        stop=self.done,
                    )
                except ClaimLost:
                    return  # the runner stops at its next check
                except Exception:  # never end the thread over one bad beat
                    log.exception("run %s: heartbeat failed", self.claim.run_id)
        finally:
            connection.close()


def warm_up() -> None:
    """Load now what a worker process's first run would load on its way, so
    no run pays for it: the URLconf (a run's list-row pushes link to its
    page; loading it imports the whole API: ~0.5 s of CPU in a process that
    has only set Django up, taken from the run's threads) and RE2's Unicode
    classes (~0.13 s). A Celery worker calls it once as it starts, before it
    makes its pool (optimizer/celery_tasks.py).

    Then what is loaded is moved out of the cyclic garbage collector's sight
    (`gc.freeze`, after a collection): it lives as long as the process, and
    each full collection during a run walked all of it again (a 20,000-call
    run with a 0 ms model: 7 of them, 0.45 s of CPU; 0.06 s frozen). Frozen
    before a fork, the prefork children's collections no longer write to the
    pages they share with the parent, so the pages stay shared."""
    reverse("runs:detail", args=[1])
    compile_linear(r"\d")
    gc.collect()
    gc.freeze()


def execute_run(run_id: int) -> str | None:
    """Run (or resume) the optimization; returns the final status, None if not run here."""
    if not settings.EMBEDDED:
        return _execute(run_id)
    # Embedded mode: this process holds the run's lock while it runs it, so a
    # server that starts knows at once which runs nobody runs (claims.process_lock).
    with process_lock(run_dir(run_id)) as held:
        if held is False:
            return None  # another process, or another thread here, runs it
        return _execute(run_id)


def _execute(run_id: int) -> str | None:
    close_old_connections()
    claimed = retry_db(lambda: claim(run_id), what=f"run {run_id}: claim")
    if claimed is None:
        return None
    run, run_claim = claimed
    while True:
        heartbeat = Heartbeat(run_claim)
        heartbeat.start()
        try:
            # The engine thread writes each event to the database; a background thread
            # sends it to the browsers (in order), off the critical path of the run.
            with publishing_in_background():
                status = _optimize(run, run_claim, heartbeat)
            if not isinstance(status, _GoOn):
                return status
        except Exception as error:
            return _failed(run_id, run_claim, heartbeat, error)
        finally:
            heartbeat.done.set()
            heartbeat.join()
        # The pause was withdrawn (resumed) after gepa had stopped for it: go on from its checkpoint.
        run = (
            retry_db(
                lambda: Run.objects.select_related("progress").get(pk=run_id),
                what=f"run {run_id}: read",
            )
            or run
        )


def _failed(run_id: int, run_claim: RunClaim, heartbeat: Heartbeat, error: Exception) -> str | None:
    """The run's end when the runner raised: nothing if another worker holds it now."""
    if run_claim.lost.is_set():
        log.warning(
            "run %s: stopped on this worker, another one holds it (%s)",
            run_id,
            type(error).__name__,
        )
        return None
    if isinstance(error, (SystemicFailure, LMError, SpecError)):
        return _finish(run_claim, heartbeat, failure=str(error))
    log.exception("run %s failed", run_id, exc_info=error)
    return _finish(run_claim, heartbeat, failure=f"{type(error).__name__}: {error}")


class _GoOn:
    """What _optimize returns when the run is not over: its pause was withdrawn."""


GO_ON = _GoOn()


def _optimize(run: Run, run_claim: RunClaim, heartbeat: Heartbeat) -> str | _GoOn | None:
    config = parse_run_config(run.config)
    directory = run_dir(run.pk)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "gepa.stop").unlink(
        missing_ok=True
    )  # never deleted by gepa (docs/gepa-notes.md §7)
    resuming = (directory / "gepa_state.bin").exists()
    log.info("Run %s %s.", run.pk, "resumed from its checkpoint" if resuming else "started")
    retry_db(
        lambda: run_set_status(
            run_claim,
            RunStatus.STOPPING if run.stop_requested else RunStatus.RUNNING,
            "resuming" if resuming else "seed evaluation",
        ),
        what=f"run {run.pk}: status",
    )

    trainset = task_rows(run, config.splits.train)
    valset = task_rows(run, config.splits.val)
    if not trainset or not valset:
        raise SystemicFailure(
            f"splits: the task set has no {'train' if not trainset else 'val'} tasks in the frozen snapshot"
        )
    scorer = compile_specs(
        run.verifier_specs, aggregator=config.aggregator, thresholds=config.thresholds.as_engine()
    )
    meter = UsageMeter(_prices(config), start=UsageSnapshot.of(run.usage))
    limits = BudgetGuard(
        budget_total=run.budget_total,
        iteration_cost=config.iteration_cost(len(valset)),
        meter=meter,
        max_cost=config.budget.max_cost,
        stop_at_perfect=config.early_stop.at_perfect_score,
        patience=config.early_stop.after_iterations_without_improvement,
        used_at_start=run.budget_used,
    )
    carried = CarriedState()
    carried.add("early_stop", limits.carried, limits.restore)
    adapter = FrontierAdapter(
        carried=carried,
        task_lm=MeteredLM(build_lm(resolved_lm(config.task_lm)), meter, "task", limits=limits),
        scorer=scorer,
        concurrency=config.concurrency,
        judge_factory=_judge_factory(config, scorer, meter, limits),
        max_verify=config.verify.max_verify,
        should_abort=lambda: heartbeat.cancelled.is_set() or run_claim.lost.is_set(),
        meter=meter,
        limits=limits,
        notes_source=_notes_source(run.pk),
    )
    if resuming:
        adapter.answer_from_records(
            retry_db(lambda: _recorded_seed(run), what=f"run {run.pk}: read") or {}
        )
    task_pks = (
        dict(run.task_set.tasks.values_list("task_id", "pk")) if run.task_set is not None else {}
    )
    recorder = RunRecorder(
        run=run,
        adapter=adapter,
        valset=valset,
        task_pks=task_pks,
        budget_total=run.budget_total,
        claim=run_claim,
        meter=meter,
        limits=limits,
    )
    try:
        return _run_gepa(
            run,
            run_claim,
            config,
            directory,
            trainset,
            valset,
            adapter,
            recorder,
            heartbeat,
            meter,
            limits,
            carried,
        )
    finally:
        adapter.close()


def _recorded_seed(run: Run) -> dict[tuple[str, str], EvalRecord]:
    """The seed's recorded val evaluations, keyed as the adapter keys its records.
    A resume asks for them again (gepa 0.1.4 evaluates the seed on every resume
    and keeps nothing of it): the adapter answers them from here, for free."""
    seed = Candidate.objects.filter(run=run, index=0).first()
    if seed is None:
        return {}
    digest = candidate_digest(seed.components)
    return {
        (digest, e.task_key): EvalRecord(
            task_key=e.task_key,
            output=e.output,
            score=e.score,
            verdict=e.verdict,
            passed=e.passed,
            result=e.result,
            feedback=e.feedback,
            objective_scores={
                str(v.get("id")): float(v.get("score", 0.0))
                for v in (e.result or {}).get("verifiers", [])
                if isinstance(v, dict)
            },
            failed=not e.output and e.feedback.startswith(MODEL_FAILED),
        )
        for e in Evaluation.objects.filter(candidate=seed, split=Split.VAL)
    }


def _run_gepa(
    run: Run,
    run_claim: RunClaim,
    config: RunConfig,
    directory: Path,
    trainset: list[JSONObject],
    valset: list[JSONObject],
    adapter: FrontierAdapter,
    recorder: RunRecorder,
    heartbeat: Heartbeat,
    meter: UsageMeter,
    limits: BudgetGuard,
    carried: CarriedState,
) -> str | _GoOn | None:
    """gepa.optimize with our adapter, recorder and stopper, then the holdout and the
    final status, or the pause."""
    reflection = _reflection_kwargs(config, recorder, meter, limits, carried)
    selector, sampler = _randomness(config, carried)
    boundary = Boundary()

    steering_read_at = -math.inf  # when stop_requested last read the run's row
    steering_every = settings.FRONTIER_STEERING_CHECK_MS / 1000  # read once: a run's setting
    read_steering = _steering_reader(run_claim, run.pk)

    def stop_requested(gepa_state: State) -> bool:
        """gepa asks before each iteration, just before it writes its checkpoint.
        A lost claim raises out of gepa.optimize, so that checkpoint (and the
        final one) is never written by a worker that no longer holds the run.
        What the users asked of the run is read here, between two iterations, in
        one query (its flags, and whether an injection is pending), at most every
        FRONTIER_STEERING_CHECK_MS: with a fast model that round trip would cost
        as much as the iteration."""
        nonlocal steering_read_at
        if run_claim.lost.is_set():
            raise ClaimLost(f"run {run.pk} is held by another worker")
        if heartbeat.cancelled.is_set():
            return True
        now = time.monotonic()
        if now - steering_read_at < steering_every:
            return False
        steering_read_at = now
        flags = retry_db(read_steering, what=f"run {run.pk}: stop check")
        if flags is None:
            run_claim.give_up()
            return True  # give_up raised: not reached
        if flags["stop_requested"]:
            return True
        if flags["pause_requested"]:
            boundary.pause_at = gepa_state.i
            return True
        return steer(gepa_state, any_pending=flags["injection_pending"])

    # The recorder's writes run on their own thread, and so does the writing of
    # gepa's checkpoint, behind them (recording.barrier, the first stopper, sets it up).
    recording = RecorderThread(recorder)
    # A run going on takes its users' candidates here, before gepa saves its state.
    steer = InjectionBoundary(
        run_id=run.pk,
        budget_total=run.budget_total,
        valset=valset,
        adapter=adapter,
        limits=limits,
        meter=meter,
        relay=recording.relay_injection,
    )
    carried.add(INJECTIONS_STATE_KEY, lambda: dict(steer.placed), steer.placed.update)
    try:
        try:
            gepa.optimize(
                seed_candidate=dict(config.seed_components),
                trainset=trainset,
                valset=valset,
                adapter=adapter,
                candidate_selection_strategy=selector,
                batch_sampler=sampler,
                frontier_type=config.frontier_type,
                module_selector=config.module_selector,
                use_merge=config.use_merge,
                max_merge_invocations=config.max_merge_invocations,
                max_metric_calls=run.budget_total,
                stop_callbacks=Stopper(run.budget_total, recording.barrier, limits, stop_requested),
                logger=GepaLogger(),
                run_dir=str(directory),
                # gepa_state.bin only: no run_log.json / candidates.json / candidate tree rewritten per iteration.
                # gepa's GEPACallback protocol lists every hook, though gepa calls only those a callback has.
                callbacks=[LeanCheckpoint(directory), recording],  # type: ignore[list-item]
                seed=config.seed,
                track_best_outputs=False,
                display_progress_bar=False,
                raise_on_exception=True,
                **reflection,
                **_proposal_kwargs(config),
            )
        finally:
            recording.close()  # everything gepa reported is written before the runner writes again
        recording.raise_failure()  # the final checkpoint could not be written
    except BudgetReached:
        pass  # the guard refused an evaluation beyond the budget or the cost cap: limits.reason says which
    except Exception as error:
        if isinstance(error, SystemicFailure) and heartbeat.cancelled.is_set():
            pass  # cancelled: the evaluation in flight was abandoned on purpose
        else:
            # A failed run keeps what it spent: the seed's valset counts before gepa's
            # first budget event, so a run failing in its first minibatch would say 0.
            if not run_claim.lost.is_set():
                retry_db(recorder.publish_usage, what=f"run {run.pk}: usage")
            raise
    if run_claim.lost.is_set():
        raise ClaimLost(f"run {run.pk} is held by another worker")
    retry_db(recorder.publish_usage, what=f"run {run.pk}: usage")
    retry_db(
        lambda: run.refresh_from_db(fields=["cancel_requested", "stop_requested"]),
        what=f"run {run.pk}: read",
    )
    if run.cancel_requested:
        return _finish(run_claim, heartbeat, phase="cancelled", reason="cancelled")
    if run.stop_requested:
        return _finish(
            run_claim, heartbeat, phase="stopped by the user", reason="stopped by the user"
        )
    if boundary.pause_at is not None:
        return _pause(run_claim, heartbeat, iteration=boundary.pause_at)
    reason = limits.reason or ""
    if config.splits.holdout:
        retry_db(
            lambda: run_set_status(run_claim, RunStatus.RUNNING, "holdout evaluation"),
            what=f"run {run.pk}: status",
        )
        limits.in_iteration = False  # holdout scoring is not metric calls; the cost cap still holds
        try:
            _score_holdout(run, run_claim, config, adapter, recorder)
        except BudgetReached as refused:
            reason = limits.reason or reason
            # The stop reason stays why the search ended; the cut is said where errors are.
            cut = {
                "where": "runner",
                "message": f"held-out evaluation cut short: {refused.reason}; "
                "the val lift is unchecked",
                "iteration": None,
            }
            retry_db(
                lambda: publish_run_event(run.pk, ev.ERROR, cut, claim=run_claim),
                what=f"run {run.pk}: holdout",
            )
        retry_db(recorder.publish_usage, what=f"run {run.pk}: usage")
    return _finish(
        run_claim, heartbeat, phase=f"finished: {reason}" if reason else "finished", reason=reason
    )


STEERING_FLAGS = ("stop_requested", "pause_requested", "injection_pending")


def _steering_reader(run_claim: RunClaim, run_id: int) -> Callable[[], dict[str, bool] | None]:
    """What the users asked of the run (STEERING_FLAGS), read in one query while
    this worker holds it (None once it does not). The query's SQL is compiled
    once: the engine's thread reads it every FRONTIER_STEERING_CHECK_MS, and
    compiling it cost more of the thread's time than the round trip."""
    query = run_claim.runs().annotate(injection_pending=any_pending(run_id)).values(*STEERING_FLAGS)
    statement, params = query.query.sql_with_params()

    def read() -> dict[str, bool] | None:
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            row = cursor.fetchone()
        return None if row is None else dict(zip(STEERING_FLAGS, map(bool, row), strict=True))

    return read


class Stopper:
    """gepa's stopper for one run: `checks` in order, stopping at the first that
    says so, as gepa's CompositeStopper would call them, in one call. Ours are
    the recorder's barrier first (every stop check precedes a save of gepa's
    state), then the budget guard (it must see every between-iterations check),
    then what the users asked.

    `max_metric_calls` is the run's budget, as on gepa's MaxMetricCallsStopper:
    for every budget update gepa reads the budget left from the first of its
    stoppers that has one (GEPAEngine._get_remaining_budget), and this one is
    first, so it asks no other."""

    def __init__(self, max_metric_calls: int, *checks: Callable[[State], bool]) -> None:
        self.max_metric_calls = max_metric_calls
        self.checks = checks

    def __call__(self, gepa_state: State) -> bool:
        return any(check(gepa_state) for check in self.checks)


class Boundary:
    """What the stopper decided at the last iteration boundary, for after gepa
    returns. The boundary is where users' requests to a running run take effect
    (stop, pause): work added there belongs in the stopper too."""

    def __init__(self) -> None:
        # gepa's iteration count (state.i) where the run stopped to pause; None: no pause.
        self.pause_at: int | None = None


def _pause(run_claim: RunClaim, heartbeat: Heartbeat, *, iteration: int) -> str | _GoOn | None:
    """gepa stopped at a boundary to pause and wrote its checkpoint: release the run
    (run_set_paused) unless the pause was withdrawn meanwhile (a resume came
    first): then the run goes on (GO_ON). The heartbeat ends first, so no beat
    lands after the run is nobody's."""
    heartbeat.done.set()
    heartbeat.join()

    def pause() -> bool:
        with transaction.atomic():
            run_claim.hold()
            if not run_claim.runs().filter(pause_requested=True).exists():
                return False
            # gepa counts iterations from 0; the run page and events from 1 (state.i + 1).
            run_set_paused(run_claim, iteration=iteration + 1)
            return True

    try:
        paused = retry_db(pause, what=f"run {run_claim.run_id}: pause")
    except ClaimLost:
        return None
    if paused is None:
        return None
    log.info(
        "Run %s %s.", run_claim.run_id, "paused" if paused else "goes on: its pause was withdrawn"
    )
    return RunStatus.PAUSED if paused else GO_ON


def _randomness(
    config: RunConfig, carried: CarriedState
) -> tuple[CandidateSelector, EpochShuffledBatchSampler[Any, Any]]:
    """gepa's candidate selector and minibatch sampler, built here as gepa.optimize
    builds them from the config's names (one generator seeded with the run's seed),
    so the generator and the sampler's place can be carried across a pause
    (checkpoint.carry_randomness): a resumed run draws what the uninterrupted one would."""
    rng = random.Random(config.seed)
    selectors: dict[str, Callable[[], CandidateSelector]] = {
        "pareto": lambda: ParetoCandidateSelector(rng=rng),
        "current_best": CurrentBestCandidateSelector,
        "epsilon_greedy": lambda: EpsilonGreedyCandidateSelector(epsilon=0.1, rng=rng),
        "top_k_pareto": lambda: TopKParetoCandidateSelector(k=5, rng=rng),
    }
    sampler: EpochShuffledBatchSampler[Any, Any] = EpochShuffledBatchSampler(
        minibatch_size=config.minibatch_size, rng=rng
    )
    carry_randomness(carried, rng, sampler)
    return selectors[config.candidate_selection](), sampler


def _notes_source(run_id: int) -> Callable[[list[str]], dict[str, list[JSONObject]]]:
    """The run's reviewer notes on some tasks, read from the database each time a
    reflective dataset is built: a note saved while the run runs reaches the
    next reflection on its task, with no restart (optimizer/reviewer_notes.py)."""

    def read(task_keys: list[str]) -> dict[str, list[JSONObject]]:
        return (
            retry_db(lambda: notes_on_tasks(run_id, task_keys), what=f"run {run_id}: notes") or {}
        )

    return read


def _prices(config: RunConfig) -> dict[str, Price]:
    """Each role's price per 1M tokens, frozen with the run's model configs (the simulator is free)."""
    lms: dict[str, LMRef | None] = {"task": config.task_lm, "reflection": config.reflection_lm}
    if config.verify.enabled and config.verify.judge == "llm":
        lms["judge"] = config.verify.judge_lm
    prices = {}
    for role, ref in lms.items():
        lm = coerce_config(ref) if isinstance(ref, dict | LMConfig) else None
        if lm is not None and lm.provider != "demo":
            prices[role] = Price(lm.price_in_per_million, lm.price_out_per_million)
    return prices


def _judge_factory(
    config: RunConfig,
    scorer: Scorer,
    meter: UsageMeter,
    limits: BudgetGuard,
) -> Callable[[JSONObject, str], Judge] | None:
    verify = config.verify
    if not verify.enabled:
        return None
    if verify.judge == "llm":
        judge = llm_judge(
            MeteredLM(build_lm(resolved_lm(verify.judge_lm)), meter, "judge", limits=limits),
            verify.judge_prompt,
        )
        return lambda row, prompt: judge
    return lambda row, prompt: verifier_judge(
        lambda output: scorer.score(output, task=row, prompt=prompt)
    )


class _Noting(Generic[T]):
    """Calls `fn`; an error other than the cost cap is noted for the recorder
    first, because gepa swallows it (docs/gepa-notes.md §3). `batch_complete`,
    set on a reflection LM that sends a round's prompts together, is what gepa
    looks for (it calls the LM once per prompt without it)."""

    batch_complete: Callable[[list[list[dict[str, Any]]]], list[str]]

    def __init__(self, fn: Callable[..., T], recorder: RunRecorder) -> None:
        self.fn = fn
        self.recorder = recorder

    def __call__(self, *args: Any) -> T:
        try:
            return self.fn(*args)
        except BudgetReached:
            raise  # the cost cap, not a reflection error: the run stops before the next iteration
        except Exception as error:
            self.recorder.reflection_errors.append(f"{type(error).__name__}: {error}")
            raise


def _reflection_kwargs(
    config: RunConfig,
    recorder: RunRecorder,
    meter: UsageMeter,
    limits: BudgetGuard,
    carried: CarriedState,
) -> dict[str, Any]:
    """gepa.optimize's reflection arguments. The demo simulator proposes directly
    (through gepa's reflection_strategy); a real model reflects through gepa's
    prompt (metered: its tokens come from the provider's usage). Either way a
    round's proposals are asked for at once, within the run's concurrency, and a
    failure is noted for the recorder (_Noting)."""
    reflection = resolved_lm(config.reflection_lm)
    # gepa asks a round's parallel proposals together, before it keeps or drops
    # any: the simulator must not take an earlier one as rejected.
    proposer = build_candidate_proposer(reflection, remember=config.parallel_proposals == 1)
    if proposer is not None:
        carried.add("proposer", proposer.remembered, proposer.recall)
        propose = _Noting(_metered_proposer(proposer.propose, meter), recorder)
        return {"reflection_strategy": ProposerReflection(propose, config.concurrency)}
    lm = MeteredLM(build_lm(reflection), meter, "reflection", limits=limits)
    reflection_lm = _Noting(ReflectionCallable(lm), recorder)
    if config.parallel_proposals > 1:
        # gepa sends a round's reflection prompts together when its LM has
        # batch_complete (else one after another). A failure fails the batch;
        # gepa then retries per task.
        def batch_complete(messages_list: list[list[dict[str, Any]]]) -> list[str]:
            return _at_once(reflection_lm, messages_list, config.concurrency)

        reflection_lm.batch_complete = batch_complete
    return {"reflection_lm": reflection_lm}


def _at_once(fn: Callable[[A], T], items: list[A], width: int) -> list[T]:
    """`fn` over `items`, up to `width` at a time, results in order."""
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(
        max_workers=max(1, min(width, len(items))), thread_name_prefix="frontier-reflect"
    ) as pool:
        return list(pool.map(fn, items))


Explained = tuple[dict[str, str], dict[str, str]]  # new texts, reasoning per component
ExplainingProposer = Callable[[dict[str, str], Any, list[str]], Explained]


class ProposerReflection:
    """gepa's ReflectionLM (its `reflection_strategy`) over a proposer that explains
    itself (the demo simulator). gepa hands it a round's proposals in one
    `reflect_many` (else it would call a custom proposer once per proposal, one
    after another): they are asked for at once, within `width`. Each proposal's
    reasoning travels in its own `raw_lm_outputs`, the one per-proposal field of
    gepa's on_proposal_end."""

    def __init__(self, propose: ExplainingProposer, width: int) -> None:
        self.propose = propose
        self.width = width

    def reflect(
        self, candidate: dict[str, str], reflective_dataset: Any, components_to_update: list[str]
    ) -> tuple[ReflectionProposal, ProposerReflection]:
        return self.reflect_many([(candidate, reflective_dataset, components_to_update)])[0]

    def reflect_many(
        self, jobs: list[tuple[dict[str, str], Any, list[str]]]
    ) -> list[tuple[ReflectionProposal, ProposerReflection]]:
        from optimizer.lm.simulator import labelled_reasoning

        answers = _at_once(lambda job: self.propose(*job), jobs, self.width)
        return [
            (ReflectionProposal(new_texts=texts, raw_lm_outputs=labelled_reasoning(why)), self)
            for texts, why in answers
        ]


def _metered_proposer(propose: ExplainingProposer, meter: UsageMeter) -> ExplainingProposer:
    """The demo simulator's proposer is one (free) reflection call; its token counts are
    estimated like the simulated task model's, since no provider reports them."""
    from optimizer.lm.simulator import approx_tokens, reasoning_text

    def metered(
        candidate: dict[str, str], reflective_dataset: Any, components: list[str]
    ) -> Explained:
        texts, why = propose(candidate, reflective_dataset, components)
        meter.record(
            "reflection",
            approx_tokens(str(candidate)) + approx_tokens(str(reflective_dataset)),
            approx_tokens(str(texts)) + approx_tokens(reasoning_text(why)),
        )
        return texts, why

    return metered


def _proposal_kwargs(config: RunConfig) -> dict[str, Any]:
    """Parallel proposals: P parents, each with its own minibatch, per iteration
    (gepa's IndependentSampling); every improving child is kept (AllImprovements).
    The adapter's batch_evaluate runs each stage of the round at once."""
    if config.parallel_proposals == 1:
        return {}
    return {"sampling_strategy": IndependentSampling(config.parallel_proposals)}


def _score_holdout(
    run: Run,
    run_claim: RunClaim,
    config: RunConfig,
    adapter: FrontierAdapter,
    recorder: RunRecorder,
) -> None:
    """The promotion report: the seed and the best candidate on the holdout split."""
    holdout = config.splits.holdout
    rows = (
        task_rows(run, holdout) if holdout else []
    )  # _run_gepa calls this only with a holdout split
    retry_db(run.refresh_from_db, what=f"run {run.pk}: read")
    if not rows or run.best_candidate is None:
        return
    summary: dict[int, float] = {}
    for candidate in Candidate.objects.filter(run=run, index__in={0, run.best_candidate.index}):
        adapter.evaluate(rows, candidate.components)
        records = []
        for row in rows:
            taken = adapter.take_record(candidate.components, row["task_id"])
            if taken is None:  # evaluate() has just stored one for every row
                raise SystemicFailure(f"holdout: task {row['task_id']!r} was not evaluated")
            records.append(taken)

        def record(candidate: Candidate = candidate, records: list[EvalRecord] = records) -> None:
            with transaction.atomic():
                run_claim.hold()
                trials = recorder.record_evaluations(
                    candidate=candidate, split=Split.HOLDOUT, records=records
                )
                publish_run_event(run.pk, *trials, claim=run_claim)

        retry_db(record, what=f"run {run.pk}: holdout evaluations")
        summary[candidate.index] = sum(r.score for r in records) / len(records)
    scored = {
        "seed_score": summary.get(0),
        "best_index": run.best_candidate.index,
        "best_score": summary[run.best_candidate.index],
        "tasks": len(rows),
    }
    retry_db(
        lambda: publish_run_event(run.pk, ev.HOLDOUT_SCORED, scored, claim=run_claim),
        what=f"run {run.pk}: holdout",
    )


def _finish(
    run_claim: RunClaim,
    heartbeat: Heartbeat,
    *,
    phase: str = "finished",
    failure: str = "",
    reason: str = "",
) -> str | None:
    """The run's last words, written in one transaction only if this worker still
    holds it (exactly one run.finished however many workers touched the run)."""
    heartbeat.done.set()
    heartbeat.join()  # no heartbeat lands after the run is finished
    return run_finish(run_claim, phase=phase, failure=failure, reason=reason)


def run_finish(
    run_claim: RunClaim,
    *,
    phase: str = "finished",
    failure: str = "",
    stopped: bool = False,
    reason: str = "",
    abandoned: bool = False,
) -> str | None:
    """Mark the run failed, stopped (asked to, or `stopped` by its own stopper),
    `abandoned` (an external run whose tracker went silent) or completed, and send
    its run.finished event, if `run_claim` still holds it. External runs
    (optimizer/external/services.py) finish through here too."""
    run_id = run_claim.run_id

    def finish() -> str:
        # Only the fields read here, not the frozen config and task rows (a JSON parse per read).
        requested = Run.objects.filter(pk=run_id).values("stop_requested", "cancel_requested").get()
        if failure:
            status = RunStatus.FAILED
        elif abandoned:
            status = RunStatus.ABANDONED
        elif stopped or requested["stop_requested"] or requested["cancel_requested"]:
            status = RunStatus.STOPPED
        else:
            status = RunStatus.COMPLETED
        with transaction.atomic():
            run_claim.hold()
            if failure:
                publish_run_event(
                    run_id,
                    ev.ERROR,
                    {"where": "runner", "message": failure[:1000], "iteration": None},
                    claim=run_claim,
                )
            run_set_status(
                run_claim, status, "failed" if failure else phase, error=failure[:2000] or None
            )
            stop_reason = "" if failure else reason
            run_claim.runs().update(stop_reason=stop_reason)
            run = (
                Run.objects.filter(pk=run_id)
                .values(
                    "best_candidate__index",
                    "best_score",
                    "seed_score",
                    "progress__budget_used",
                    "progress__cost",
                )
                .get()
            )
            publish_run_event(
                run_id,
                ev.RUN_FINISHED,
                {
                    "status": status,
                    "best_index": run["best_candidate__index"],
                    "best_score": run["best_score"],
                    "seed_score": run["seed_score"],
                    "metric_calls": run["progress__budget_used"],
                    "cost": round(run["progress__cost"], 8),
                    "stop_reason": stop_reason,
                },
                claim=run_claim,
            )
        return status

    try:
        return retry_db(finish, what=f"run {run_id}: finish")
    except ClaimLost:
        return None
