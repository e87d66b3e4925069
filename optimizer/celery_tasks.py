"""Celery tasks of the optimizer. Thin: the work is in optimizer.runs.runner."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path

from celery import shared_task
from celery.contrib.testing.worker import test_worker_started, test_worker_stopped
from celery.signals import worker_init, worker_process_init, worker_ready, worker_shutdown
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from optimizer.models import Run, RunKind, RunStatus, run_progress
from optimizer.runs.claims import process_lock
from optimizer.runs.runner import STALE_AFTER, execute_run, run_dir, warm_up
from optimizer.runs.status import run_set_status

log = logging.getLogger(__name__)
_watchdog_lock = threading.Lock()
_watchdog_stop: threading.Event | None = None  # set while a watchdog runs in this process
_pin_runs = False  # this process is a prefork child that pins its runs (pin_pool_child_runs)
#: One lock file per CPU, so two runs on this machine (in one container) take different ones.
CPU_LOCKS = Path(tempfile.gettempdir()) / "frontier-cpus"


@shared_task(
    name="optimizer.run_optimization",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def run_optimization(run_id: int) -> str | None:
    """Run or resume one optimization. Delivered twice, it does nothing harmful:
    a finished run, or one whose worker is alive, is skipped (runner.claim).
    In a prefork child, on one CPU (on_one_cpu)."""
    with on_one_cpu() if _pin_runs else contextlib.nullcontext():
        return execute_run(run_id)


# A queued run handed to the broker this long ago and still not started is sent
# again: its message may have been lost (a Redis restarted without persistence).
QUEUED_RESEND_AFTER = timedelta(seconds=settings.RUN_QUEUED_RESEND_SECONDS)
WAITING_FOR_BROKER = "queued: waiting for the broker"


def enqueue_run(run_id: int) -> bool:
    """Hand a queued run to the workers. The run's row is the durable queue: when
    the broker is unreachable (Redis down) this logs, marks the run as due to be
    sent again and returns False; a worker's watchdog sends it once the broker
    is back (requeue_orphaned_runs). Never raises."""
    try:
        run_optimization.delay(run_id)
        return True
    except Exception as error:
        log.warning(
            "run %s stays queued: the broker is unreachable (%s); a worker sends it again later",
            run_id,
            error,
        )
        try:
            due = timezone.now() - QUEUED_RESEND_AFTER
            Run.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
                enqueued_at=due, phase=WAITING_FOR_BROKER
            )
        except Exception:  # the watchdog also resends runs whose sending is old
            log.exception("could not mark run %s as not sent", run_id)
        return False


@shared_task(
    name="optimizer.rescore_run",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def rescore_run(scoring_id: int) -> str:
    """Re-score a run's stored outputs (optimizer/scorings.py); no model is called."""
    from optimizer.scorings.execute import scoring_execute

    return scoring_execute(scoring_id)


def enqueue_scoring(scoring_id: int) -> bool:
    """Hand a scoring to the workers; with the broker unreachable it is marked
    failed, saying so (asking again makes a new one). Never raises."""
    try:
        rescore_run.delay(scoring_id)
        return True
    except Exception as error:
        log.warning("scoring %s not sent: the broker is unreachable (%s)", scoring_id, error)
        from optimizer.models import Scoring, ScoringStatus

        try:
            Scoring.objects.filter(pk=scoring_id, status=ScoringStatus.QUEUED).update(
                status=ScoringStatus.FAILED,
                error=f"the workers could not be reached ({error}); re-score again",
                finished_at=timezone.now(),
            )
        except Exception:
            log.exception("could not mark scoring %s as not sent", scoring_id)
        return False


def requeue_interrupted_scorings() -> list[int]:
    """Embedded mode, as the server starts: the scorings the last server had queued
    or was scoring (its in-memory queue went with it) are sent again; a scoring
    starts over from the stored outputs, which never change."""
    from optimizer.models import Scoring, ScoringStatus

    ids = list(
        Scoring.objects.filter(
            status__in=[ScoringStatus.QUEUED, ScoringStatus.RUNNING]
        ).values_list("pk", flat=True)
    )
    Scoring.objects.filter(pk__in=ids, status=ScoringStatus.RUNNING).update(
        status=ScoringStatus.QUEUED, done=0, heartbeat_at=None
    )
    return [pk for pk in ids if enqueue_scoring(pk)]


def requeue_stale_scorings() -> list[int]:
    """Queue again every scoring whose worker died (its heartbeat went stale, as
    for runs): it starts over from the stored outputs, the results being written
    in one transaction at the end. Each is sent by one watchdog per round (the
    conditional UPDATE back to queued decides which); with the broker unreachable
    it is marked failed, saying so (enqueue_scoring)."""
    from optimizer.models import Scoring, ScoringStatus
    from optimizer.scorings.execute import stale_scorings

    sent = []
    for pk in Scoring.objects.filter(stale_scorings()).values_list("pk", flat=True):
        if Scoring.objects.filter(stale_scorings(), pk=pk).update(
            status=ScoringStatus.QUEUED, done=0, heartbeat_at=None
        ):
            log.info("scoring %s lost its worker: sending it again", pk)
            if enqueue_scoring(pk):
                sent.append(pk)
    return sent


def release_unheld_runs() -> list[int]:
    """Embedded mode: a running run that no process on this machine holds
    (claims.process_lock) lost its runner, to a Ctrl-C or a crash. It says
    "resuming" now (pages show it at once, even while the worker's threads are
    busy with other runs) and its heartbeat is cleared, so this watchdog round
    re-queues it rather than one after that heartbeat is stale. Done while
    holding the run's lock: no process can be running it meanwhile. Returns
    their ids."""
    active = [RunStatus.RUNNING, RunStatus.STOPPING]
    released = []
    for run_id, token in Run.objects.filter(
        status__in=active, imported=False, kind=RunKind.NATIVE
    ).values_list("pk", "claim"):
        with process_lock(run_dir(run_id)) as free, transaction.atomic():
            run = (
                Run.objects.select_for_update()
                .filter(pk=run_id, claim=token, status__in=active)
                .first()
                if free
                else None
            )
            if run is not None:
                run_progress(run_id).update(heartbeat_at=None)
                run_set_status(run, run.status, "resuming")
                released.append(run_id)
    return released


def requeue_orphaned_runs(*, include_queued: bool = False) -> list[int]:
    """Queue again every run whose worker died (its heartbeat went stale) and
    every queued run whose hand-over to the broker failed (Redis was down) or
    happened long ago without the run starting (the message may be lost).
    Each run is sent by one watchdog per round (a conditional UPDATE decides
    which), and a duplicate delivery is harmless anyway: runner.claim starts a
    run at most once. A queued row that never went through enqueue_run
    (enqueued_at empty) is left alone. `include_queued`: every queued run
    (embedded mode at startup: the in-memory broker lost its queue with the
    previous process)."""
    now = timezone.now()
    stale = Q(status__in=[RunStatus.RUNNING, RunStatus.STOPPING]) & (
        Q(progress__heartbeat_at__isnull=True) | Q(progress__heartbeat_at__lt=now - STALE_AFTER)
    )
    unsent = Q(status=RunStatus.QUEUED)
    if not include_queued:
        unsent &= Q(enqueued_at__lte=now - QUEUED_RESEND_AFTER)
    run_ids = []
    # External runs are driven by their owners' own processes: nothing here resumes them.
    for run_id in Run.objects.filter(
        stale | unsent, imported=False, kind=RunKind.NATIVE
    ).values_list("pk", flat=True):
        # Several workers each run a watchdog: the one whose UPDATE matched sends it.
        if Run.objects.filter(stale | unsent, pk=run_id).update(enqueued_at=now):
            # The runner says "started" or "resumed" when a worker takes it.
            log.debug("sending run %s to a worker (again)", run_id)
            if enqueue_run(run_id):
                run_ids.append(run_id)
    return run_ids


def _abandon_silent_external_runs() -> None:
    from optimizer.external.services import external_runs_abandon_silent

    external_runs_abandon_silent()


def _watch(stop: threading.Event) -> None:
    # In embedded mode the in-memory broker lost its queue with the previous
    # process, so queued runs are re-queued once at startup as well; and a
    # run nobody runs any more is taken back at once (release_unheld_runs).
    include_queued = settings.EMBEDDED
    while not stop.is_set():
        try:
            # Once, as the server starts: the runs it finds running were left by the
            # last server. Later ones belong to a process starting them (a CLI, a
            # test's factory) and fall under the heartbeat rule like any other.
            if include_queued:
                release_unheld_runs()
                requeue_interrupted_scorings()
            requeue_orphaned_runs(include_queued=include_queued)
            requeue_stale_scorings()
            _abandon_silent_external_runs()
        except Exception:  # the next round tries again
            log.exception("could not look for orphaned runs")
        finally:
            connection.close()
        include_queued = False
        stop.wait(STALE_AFTER.total_seconds() / 2)


@worker_init.connect
def warm_up_worker(**_kwargs) -> None:
    """A worker loads what runs need (runner.warm_up) as it starts, before it
    makes its pool: prefork children inherit it (and share its pages), a solo
    or threads pool runs tasks in this process. Not an embedded worker: its
    web process loads the URLconf with its first request, and freezing its
    objects gave a web process nothing (docs/benchmarks.md)."""
    if not settings.EMBEDDED:
        warm_up()


@worker_process_init.connect
def pin_pool_child_runs(**_kwargs) -> None:
    """A prefork child (the only kind this signal starts) runs each optimization
    on one CPU (on_one_cpu), unless FRONTIER_WORKER_PIN_CPUS is off."""
    global _pin_runs
    _pin_runs = settings.FRONTIER_WORKER_PIN_CPUS


@contextmanager
def on_one_cpu(*, sample_seconds: float = 0.05) -> Iterator[int | None]:
    """Within: every thread of this process, and those it starts, runs on one
    CPU, the least busy of those it may use whose lock no other run here holds
    (yields it; None: not pinned). A run's threads (the engine, the evaluations,
    the writer) take turns holding one interpreter lock: within one core it
    changes hands in the same cache, while across cores each hand-off wakes the
    other core, and with a fast model that took a run much longer
    (docs/deployment.md). Busy is measured over `sample_seconds` (/proc/stat),
    so a CPU that a run in another container holds looks taken too. Not pinned:
    one CPU, no affinity or flock on this system, or every CPU held."""
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_setaffinity") else set()
    if len(allowed) < 2:
        yield None
        return
    busy = cpu_busy(allowed, sample_seconds)
    with ExitStack() as locks:
        cpu = _hold_a_cpu(locks, sorted(allowed, key=lambda c: (busy.get(c, 0.0), c)))
        if cpu is None:
            yield None
            return
        _set_affinity({cpu})
        try:
            yield cpu
        finally:
            _set_affinity(allowed)


def _hold_a_cpu(locks: ExitStack, cpus: list[int]) -> int | None:
    """The first of `cpus` whose lock this process now holds (in `locks`), or None:
    every one held by another run, no flock on this system (runs could not tell
    each other apart), or a lock directory this user may not write."""
    for cpu in cpus:
        try:
            held = locks.enter_context(process_lock(CPU_LOCKS / str(cpu)))
        except OSError:
            return None
        if held is not False:
            return cpu if held else None
    return None


def _set_affinity(cpus: set[int]) -> None:
    for tid in os.listdir("/proc/self/task"):  # sched_setaffinity sets one thread's
        with contextlib.suppress(ProcessLookupError):  # the thread ended meanwhile
            os.sched_setaffinity(int(tid), cpus)


def cpu_busy(cpus: set[int], seconds: float) -> dict[int, float]:
    """The share of `seconds` each of `cpus` spent busy (not idle or waiting for
    I/O), from /proc/stat; empty where there is none."""

    def read() -> dict[int, tuple[int, int]]:
        try:
            lines = Path("/proc/stat").read_text().splitlines()
        except OSError:
            return {}
        times = {}
        for line in lines:
            name, _, fields = line.partition(" ")
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
                # user nice system idle iowait irq softirq steal
                ticks = [int(v) for v in fields.split()[:8]]
                times[int(name[3:])] = (sum(ticks), ticks[3] + ticks[4])
        return times

    before = read()
    time.sleep(seconds)
    after = read()
    busy = {}
    for cpu, (total, idle) in after.items():
        was_total, was_idle = before.get(cpu, (total, idle))
        if total > was_total:
            busy[cpu] = 1 - (idle - was_idle) / (total - was_total)
    return busy


@worker_ready.connect
@test_worker_started.connect  # the embedded worker (dashboard/embedded.py) announces itself with this one
def start_watchdog(**_kwargs) -> None:
    """Each worker process looks for orphaned runs (and scorings) at startup and then
    every STALE_AFTER / 2, so a run whose worker was killed resumes within a minute
    (in embedded mode, a run interrupted by a stopped server resumes as the
    server starts again)."""
    global _watchdog_stop
    with _watchdog_lock:
        if _watchdog_stop is None:
            _watchdog_stop = threading.Event()
            threading.Thread(
                target=_watch, args=(_watchdog_stop,), name="orphaned-runs-watchdog", daemon=True
            ).start()


@worker_shutdown.connect
@test_worker_stopped.connect
def stop_watchdog(**_kwargs) -> None:
    """The watchdog lives as long as its worker (an embedded worker can be stopped
    and started again in one process, as the tests do)."""
    global _watchdog_stop
    with _watchdog_lock:
        if _watchdog_stop is not None:
            _watchdog_stop.set()
            _watchdog_stop = None
