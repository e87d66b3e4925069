"""Pause and resume of real gepa runs (the demo simulator) executed by
optimizer.runs.runner: a paused run holds no worker, and a resumed one goes on
exactly as the same run would have gone on uninterrupted."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.lib.db_retry import retry_db
from optimizer.lm.simulator import DemoLanguageModel
from optimizer.models import Run, RunEvent, RunStatus, run_progress
from optimizer.runs import event_types as ev
from optimizer.runs import runner
from optimizer.runs.checkpoint import checkpoint_metric_calls
from optimizer.runs.recorder import RunRecorder, writes
from optimizer.runs.runner import execute_run
from optimizer.services import run_launch, run_pause, run_resume
from tests.optimizer.run_helpers import (
    act_at_iterations,
    refund_task_set,
    refund_verifier,
    run_config,
    run_outcome,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("runs_dir")]

BUDGET = 150


@pytest.fixture
def task_set(user):
    refund_verifier(user)
    return refund_task_set(user, splits=["train", "val"] * 4)


def launch(user, task_set, **overrides) -> Run:
    config = {"budget": {"max_metric_calls": BUDGET}, **overrides}
    return run_launch(owner=user, config=run_config(task_set, **config))


def events(run, type=None):
    rows = RunEvent.objects.filter(run=run).order_by("seq")
    return [e for e in rows if type is None or e.type == type]


def test_a_paused_run_holds_no_worker_and_is_not_active(user, task_set, monkeypatch):
    """Pause asked mid-iteration: the iteration finishes, gepa's checkpoint is
    written, the worker lets the run go (no claim, no heartbeat), and the run
    says paused, by whom, with a run.paused event."""
    run = launch(user, task_set)
    act_at_iterations(monkeypatch, {2}, lambda _: run_pause(run=run, by=user))
    assert execute_run(run.pk) == RunStatus.PAUSED

    run = Run.objects.select_related("progress").get(pk=run.pk)
    assert run.status == RunStatus.PAUSED and run.phase == "paused by alice"
    assert run.claim == "" and run.heartbeat_at is None and not run.pause_requested
    assert run.finished_at is None and run.status not in RunStatus.active()
    assert not Run.objects.active().filter(pk=run.pk).exists()
    assert (runner.run_dir(run.pk) / "gepa_state.bin").exists()
    paused = events(run, ev.RUN_PAUSED)
    assert [e.payload for e in paused] == [
        {"by": "alice", "iteration": 2, "metric_calls": run.budget_used}
    ]
    assert not events(run, ev.RUN_FINISHED)
    phases = [(e.payload["status"], e.payload["phase"]) for e in events(run, ev.RUN_STATUS)]
    assert phases[-2:] == [
        ("running", "pausing after this iteration (asked by alice)"),
        ("paused", "paused by alice"),
    ]
    # A paused run delivered to a worker again (a duplicate message) is left alone.
    assert execute_run(run.pk) is None
    assert Run.objects.get(pk=run.pk).status == RunStatus.PAUSED


def test_a_pause_asked_before_the_optimizing_phase_is_written_keeps_its_phase(
    user, task_set, monkeypatch
):
    """The writer's thread lags the engine's: the run's "optimizing" phase
    (written when gepa's first iteration starts) may reach the database after
    a pause was asked. The pause's phase stays; no status event says
    "optimizing" after it."""
    run = launch(user, task_set)
    asked = threading.Event()
    announce = RunRecorder._announce_optimizing.__wrapped__

    def late(self, event):
        asked.wait(timeout=30)  # the writer gets here only once the pause was asked
        announce(self, event)

    monkeypatch.setattr(RunRecorder, "_announce_optimizing", writes(late))
    act_at_iterations(monkeypatch, {1}, lambda _: (run_pause(run=run, by=user), asked.set()))
    assert execute_run(run.pk) == RunStatus.PAUSED

    phases = [(e.payload["status"], e.payload["phase"]) for e in events(run, ev.RUN_STATUS)]
    assert phases[-2:] == [
        ("running", "pausing after this iteration (asked by alice)"),
        ("paused", "paused by alice"),
    ]


def test_a_run_paused_and_resumed_twice_spends_and_finds_what_the_uninterrupted_run_does(
    user, task_set, monkeypatch
):
    """The same seeded demo run, once straight through and once paused at
    iterations 2 and 4: the same budget used, candidates (texts, parents,
    scores, metric calls at birth), task calls and tokens; and after every
    resume budget_used equals the task calls counted (nothing evaluated twice:
    gepa 0.1.4 evaluates the seed again on resume, answered from its records)."""
    straight = launch(user, task_set)
    assert execute_run(straight.pk) == RunStatus.COMPLETED
    expected = run_outcome(straight)
    assert expected["budget_used"] == expected["task_calls"]

    run = launch(user, task_set)
    act_at_iterations(monkeypatch, {2, 4}, lambda _: run_pause(run=run, by=user))
    assert execute_run(run.pk) == RunStatus.PAUSED
    for _ in range(2):
        paused = run_outcome(run)
        assert paused["status"] == RunStatus.PAUSED
        assert paused["budget_used"] == paused["task_calls"]
        run_resume(run=run)
        status = execute_run(run.pk)
    assert status == RunStatus.COMPLETED
    assert len(events(run, ev.RUN_PAUSED)) == 2
    assert run_outcome(run) == expected
    seqs = [e.seq for e in events(run)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_pause_withdrawn_by_a_resume_before_its_boundary_lets_the_run_go_on(
    user, task_set, monkeypatch
):
    """Pause, then Resume before the iteration ends: the run never pauses."""
    run = launch(user, task_set)

    def pause_then_resume(_):
        run_pause(run=run, by=user)
        run_resume(run=run)

    act_at_iterations(monkeypatch, {2}, pause_then_resume)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    assert not events(run, ev.RUN_PAUSED)
    assert not Run.objects.get(pk=run.pk).pause_requested


def test_a_pause_withdrawn_after_gepa_stopped_for_it_resumes_on_the_same_worker(
    user, task_set, monkeypatch
):
    """The resume lands between gepa stopping for the pause and the runner
    releasing the run: the runner goes on from the checkpoint it just wrote,
    and the run ends as the uninterrupted one does."""
    straight = launch(user, task_set)
    assert execute_run(straight.pk) == RunStatus.COMPLETED
    expected = run_outcome(straight)

    run = launch(user, task_set)
    act_at_iterations(monkeypatch, {2}, lambda _: run_pause(run=run, by=user))
    pause = runner._pause

    def resumed_first(run_claim, heartbeat, *, iteration):
        run_resume(run=run)
        return pause(run_claim, heartbeat, iteration=iteration)

    monkeypatch.setattr(runner, "_pause", resumed_first)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    assert not events(run, ev.RUN_PAUSED)
    assert run_outcome(run) == expected


def test_asking_twice_to_pause_pauses_once(user, task_set, monkeypatch):
    run = launch(user, task_set)

    def pause_twice(_):
        run_pause(run=run, by=user)
        run_pause(run=run, by=user)

    act_at_iterations(monkeypatch, {2}, pause_twice)
    assert execute_run(run.pk) == RunStatus.PAUSED
    run_pause(run=run, by=user)  # paused already: nothing changes
    assert len(events(run, ev.RUN_PAUSED)) == 1
    pausing = [e for e in events(run, ev.RUN_STATUS) if e.payload["phase"].startswith("pausing")]
    assert len(pausing) == 1


class WorkerDied(BaseException):
    """Stands in for kill -9: nothing in gepa or the runner catches it."""


def test_a_run_whose_worker_died_while_pausing_ends_paused_and_resumable(
    user, task_set, monkeypatch
):
    """Pause asked, then the worker is killed before the boundary: the
    watchdog's redelivery does not run it, the run ends paused (from its last
    checkpoint, its budget line what that checkpoint counts), and a resume
    completes it."""
    run = launch(user, task_set)
    original = DemoLanguageModel.complete
    calls = {"n": 0}

    def dying(self, messages):
        calls["n"] += 1
        if calls["n"] == 20:  # mid-iteration: the pause is asked, then the worker dies
            retry_db(lambda: run_pause(run=run, by=user), what="pause")
            raise WorkerDied()
        return original(self, messages)

    monkeypatch.setattr(DemoLanguageModel, "complete", dying)
    with pytest.raises(WorkerDied):
        execute_run(run.pk)
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    monkeypatch.setattr(DemoLanguageModel, "complete", original)
    # The broker redelivers once the worker is gone; the heartbeat has gone stale.
    run_progress(run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert execute_run(run.pk) is None

    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.PAUSED and run.claim == "" and run.phase == "paused by alice"
    assert [e.payload["iteration"] for e in events(run, ev.RUN_PAUSED)] == [None]
    # Its budget line is the checkpoint's count, not the dead iteration's calls.
    recorded = checkpoint_metric_calls(runner.run_dir(run.pk))
    assert run.budget_used == recorded < run.usage["task"]["calls"]
    assert [e.payload["metric_calls"] for e in events(run, ev.RUN_PAUSED)] == [recorded]
    run_resume(run=run)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    run = Run.objects.select_related("progress").get(pk=run.pk)
    seqs = [e.seq for e in events(run)]
    assert seqs == list(range(1, len(seqs) + 1))
