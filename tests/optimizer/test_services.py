"""Run workflows: the launch → Celery task → runner path, and the state guards."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.celery import app
from optimizer import services
from optimizer.models import Run, RunEvent, RunStatus, run_progress
from optimizer.runs import event_types as ev
from optimizer.runs import runner
from optimizer.services import RunStateError, run_cancel, run_launch, run_resume
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config

pytestmark = pytest.mark.django_db


@pytest.fixture
def task_set(user):
    refund_verifier(user)
    return refund_task_set(user, splits=["train", "val"] * 4)


def test_a_launched_run_is_queued_after_commit_and_executed_by_the_celery_task(
    user, task_set, django_capture_on_commit_callbacks, monkeypatch, settings, tmp_path
):
    settings.RUNS_DIR = tmp_path
    monkeypatch.setattr(
        runner, "HEARTBEAT_SECONDS", 3600
    )  # no second writer on the in-memory test DB
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = run_launch(owner=user, config=run_config(task_set, budget={"max_metric_calls": 30}))
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED  # nothing runs before the commit
    assert len(callbacks) == 2  # the queued status event, then the task

    for callback in callbacks:
        callback()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and run.candidates.exists()


def test_cancelling_a_running_run_asks_the_worker_to_abort(user, task_set):
    run = run_launch(owner=user, config=run_config(task_set))
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    run_progress(run.pk).update(heartbeat_at=timezone.now())
    run = run_cancel(run=run)
    assert (run.status, run.phase, run.stop_requested, run.cancel_requested) == (
        RunStatus.STOPPING,
        "cancelling",
        True,
        True,
    )


def test_a_running_run_resumes_only_once_its_worker_is_gone(user, task_set):
    run = run_launch(owner=user, config=run_config(task_set))
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    run_progress(run.pk).update(heartbeat_at=timezone.now())
    with pytest.raises(
        RunStateError, match="only a paused, stopped, failed, completed or crashed run resumes"
    ):
        run_resume(run=run)
    run_progress(run.pk).update(
        heartbeat_at=timezone.now() - runner.STALE_AFTER - timedelta(seconds=1)
    )
    assert run_resume(run=run).status == RunStatus.QUEUED


def test_an_imported_run_cannot_be_resumed(user, task_set):
    run = Run.objects.create(owner=user, status=RunStatus.COMPLETED, imported=True)
    with pytest.raises(RunStateError, match="imported"):
        run_resume(run=run, extra_budget=10)


def test_a_worker_re_queues_runs_whose_worker_died_but_not_live_ones(user, task_set):
    from optimizer.celery_tasks import requeue_orphaned_runs

    dead = run_launch(owner=user, config=run_config(task_set))
    alive = run_launch(owner=user, config=run_config(task_set))
    queued = run_launch(owner=user, config=run_config(task_set))
    Run.objects.filter(pk=dead.pk).update(status=RunStatus.RUNNING)
    run_progress(dead.pk).update(heartbeat_at=timezone.now() - runner.STALE_AFTER * 2)
    Run.objects.filter(pk=alive.pk).update(status=RunStatus.RUNNING)
    run_progress(alive.pk).update(heartbeat_at=timezone.now())
    assert requeue_orphaned_runs() == [dead.pk]
    assert sorted(requeue_orphaned_runs(include_queued=True)) == sorted([dead.pk, queued.pk])


def test_a_starting_server_takes_back_at_once_the_running_runs_no_process_holds(
    user, task_set, runs_dir
):
    """Embedded mode: the process running a run holds its directory's lock
    (claims.process_lock), and the operating system drops it when that process
    ends. A running run whose lock is free was left by a stopped server: the
    watchdog clears its heartbeat, fresh as it is, and re-queues it in the same
    round, and says "resuming" at once (the run.status event pages show). A
    run whose lock is held (another process runs it: here another file handle,
    which flock treats alike) is left alone, and so is a duplicate delivery of
    it to the runner."""
    from optimizer.celery_tasks import release_unheld_runs, requeue_orphaned_runs
    from optimizer.runs.claims import process_lock

    left, held = (run_launch(owner=user, config=run_config(task_set)) for _ in range(2))
    for run in (left, held):
        Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, claim="a-stopped-worker")
        run_progress(run.pk).update(heartbeat_at=timezone.now())
    with process_lock(runner.run_dir(held.pk)) as mine:
        assert mine
        assert runner.execute_run(held.pk) is None
        assert release_unheld_runs() == [left.pk]
        assert requeue_orphaned_runs() == [left.pk]
    assert run_progress(held.pk).get().heartbeat_at is not None
    assert Run.objects.get(pk=left.pk).phase == "resuming"
    assert Run.objects.get(pk=held.pk).phase != "resuming"
    resuming = RunEvent.objects.filter(run=left, type=ev.RUN_STATUS).last()
    assert resuming is not None and resuming.payload == {"status": "running", "phase": "resuming"}


def test_a_run_launched_while_the_broker_is_down_is_kept_and_sent_by_one_watchdog_round_only(
    user, task_set, monkeypatch, django_capture_on_commit_callbacks
):
    from kombu.exceptions import OperationalError

    from optimizer.celery_tasks import requeue_orphaned_runs, run_optimization

    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    with monkeypatch.context() as down:
        down.setattr(run_optimization, "delay", broker_down)
        with django_capture_on_commit_callbacks(execute=True):
            unsent = run_launch(
                owner=user, config=run_config(task_set)
            )  # no exception: the launch is kept
    unsent.refresh_from_db()
    assert unsent.status == RunStatus.QUEUED and unsent.phase == "queued: waiting for the broker"
    waiting = run_launch(
        owner=user, config=run_config(task_set)
    )  # sent a moment ago: waits for a free worker
    assert requeue_orphaned_runs() == [unsent.pk]
    assert requeue_orphaned_runs() == []  # another worker's watchdog, the same round: already sent
    assert Run.objects.get(pk=waiting.pk).status == RunStatus.QUEUED


def test_a_queued_run_sent_long_ago_that_never_started_is_sent_again(user, task_set):
    from optimizer.celery_tasks import QUEUED_RESEND_AFTER, requeue_orphaned_runs

    lost = run_launch(
        owner=user, config=run_config(task_set)
    )  # its message went down with a Redis restart
    Run.objects.filter(pk=lost.pk).update(enqueued_at=timezone.now() - QUEUED_RESEND_AFTER * 2)
    assert requeue_orphaned_runs() == [lost.pk]


def test_the_demo_simulator_is_refused_as_an_llm_judge_by_launch_and_dry_run_naming_the_field(
    user, task_set
):
    from optimizer.config import RunConfigError
    from optimizer.models import ModelEndpoint
    from optimizer.services import run_dry_run

    ModelEndpoint.objects.create(name="sim", provider="demo", model="demo")
    for judge_lm in ({"provider": "demo", "model": "demo-judge"}, "sim"):
        config = run_config(
            task_set, verify={"enabled": True, "judge": "llm", "judge_lm": judge_lm}
        )
        runs_before = Run.objects.count()
        with pytest.raises(RunConfigError) as error:
            run_launch(owner=user, config=config)
        assert error.value.problems == [("verify.judge_lm", services.DEMO_JUDGE_PROBLEM)]
        assert "cannot judge answers" in services.DEMO_JUDGE_PROBLEM
        assert Run.objects.count() == runs_before
        assert run_dry_run(owner=user, config=config) == [
            ("verify.judge_lm", services.DEMO_JUDGE_PROBLEM)
        ]

    # The run's verifiers as judge work offline with the demo models.
    config = run_config(task_set, verify={"enabled": True, "judge": "verifiers"})
    assert run_dry_run(owner=user, config=config) == []


def _running(run: Run) -> Run:
    """The run as a live worker holds it."""
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, claim="worker-token")
    run_progress(run.pk).update(heartbeat_at=timezone.now())
    return Run.objects.get(pk=run.pk)


def test_a_queued_run_pauses_at_once_and_a_resume_queues_it_again(user, task_set):
    run = run_launch(owner=user, config=run_config(task_set))
    run = services.run_pause(run=run, by=user)
    run = Run.objects.select_related("progress").get(pk=run.pk)
    assert (run.status, run.phase, run.claim, run.finished_at) == (
        RunStatus.PAUSED,
        "paused by alice",
        "",
        None,
    )
    types = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("type", flat=True))
    assert types == [ev.RUN_STATUS, ev.RUN_PAUSED, ev.RUN_STATUS]
    assert run_resume(run=run).status == RunStatus.QUEUED  # no extra budget needed
    assert Run.objects.get(pk=run.pk).paused_by is None


def test_a_running_run_is_asked_to_pause_at_its_next_iteration_boundary(user, task_set):
    run = _running(run_launch(owner=user, config=run_config(task_set)))
    run = services.run_pause(run=run, by=user)
    assert (run.status, run.phase, run.pause_requested) == (
        RunStatus.RUNNING,
        "pausing after this iteration (asked by alice)",
        True,
    )
    assert run.claim == "worker-token"  # the worker still holds it until the boundary
    services.run_pause(run=run, by=user)  # asked twice: one request, one event
    assert RunEvent.objects.filter(run=run, type=ev.RUN_STATUS).count() == 2


@pytest.mark.parametrize("status", [RunStatus.COMPLETED, RunStatus.STOPPED, RunStatus.FAILED])
def test_only_a_queued_or_running_run_can_be_paused(user, task_set, status):
    run = run_launch(owner=user, config=run_config(task_set))
    Run.objects.filter(pk=run.pk).update(status=status)
    with pytest.raises(
        RunStateError,
        match=rf"^run {run.pk} is {status}; only a queued or running run can be paused$",
    ):
        services.run_pause(run=run, by=user)


def test_an_external_run_cannot_be_paused_and_says_why(user, task_set):
    run = run_launch(owner=user, config=run_config(task_set))
    Run.objects.filter(pk=run.pk).update(kind="external", status=RunStatus.RUNNING)
    with pytest.raises(
        RunStateError, match="cannot be paused: an external run's callbacks are observe-only"
    ):
        services.run_pause(run=run, by=user)


def test_a_paused_run_does_not_count_as_an_active_run(user, task_set, settings):
    """A paused run holds no worker: it frees its owner's active-run slot, and
    the watchdog neither re-queues it nor takes it for a crashed one."""
    from optimizer.celery_tasks import release_unheld_runs, requeue_orphaned_runs
    from optimizer.runs.limits import active_runs_problem, run_limits_for

    settings.FRONTIER_MAX_ACTIVE_RUNS_PER_USER = 1
    settings.RUNS_DIR = str(settings.DATA_DIR)
    run = run_launch(owner=user, config=run_config(task_set))
    assert active_runs_problem(user, run_limits_for(user))
    services.run_pause(run=run, by=user)
    assert active_runs_problem(user, run_limits_for(user)) is None
    Run.objects.filter(pk=run.pk).update(enqueued_at=timezone.now() - timedelta(days=1))
    assert requeue_orphaned_runs(include_queued=True) == []
    assert release_unheld_runs() == []
    assert Run.objects.get(pk=run.pk).status == RunStatus.PAUSED


def test_stopping_a_paused_run_ends_it_at_once(user, task_set):
    run = run_launch(owner=user, config=run_config(task_set))
    services.run_pause(run=run, by=user)
    run = services.run_stop(run=Run.objects.get(pk=run.pk))
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.phase, run.stop_reason) == (
        RunStatus.STOPPED,
        "stopped while paused",
        "stopped by the user",
    )
    finished = RunEvent.objects.filter(run=run, type=ev.RUN_FINISHED).get()
    assert finished.payload["status"] == "stopped"
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_resume_before_the_pause_boundary_withdraws_the_pause(user, task_set):
    run = _running(run_launch(owner=user, config=run_config(task_set)))
    services.run_pause(run=run, by=user)
    with pytest.raises(RunStateError, match="add budget once it is paused"):
        run_resume(run=Run.objects.get(pk=run.pk), extra_budget=10)
    run = run_resume(run=Run.objects.get(pk=run.pk))
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.phase, run.pause_requested, run.claim) == (
        RunStatus.RUNNING,
        "optimizing",
        False,
        "worker-token",
    )


def test_a_stop_while_pausing_wins_over_the_pause(user, task_set):
    run = _running(run_launch(owner=user, config=run_config(task_set)))
    services.run_pause(run=run, by=user)
    run = services.run_stop(run=Run.objects.get(pk=run.pk))
    assert (run.status, run.stop_requested, run.pause_requested) == (
        RunStatus.STOPPING,
        True,
        False,
    )
    with pytest.raises(
        RunStateError, match="is stopping; only a queued or running run can be paused"
    ):
        services.run_pause(run=run, by=user)
