"""Pause and resume in distributed mode: PostgreSQL, Redis and real `celery
worker` processes. A paused run holds no worker; resumed, it goes on as the
same run uninterrupted does; a worker killed on the way to a pause leaves the
run paused, not stuck, and its budget line what gepa recorded; a candidate
added while paused joins at the first boundary after the resume."""

from pathlib import Path

from gepa.core.state import GEPAState

from optimizer.models import InjectionStatus, Origin, Run, RunEvent, RunStatus
from optimizer.services import run_inject_candidate, run_launch, run_pause, run_resume
from tests.integration.conftest import start_worker
from tests.integration.test_injected_candidates import EDITED, VAL_TASKS
from tests.integration.test_runs_on_workers import assert_event_log_is_whole
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config, run_outcome
from tests.polling import wait_until

BUDGET = 150


def config(task_set) -> dict:
    return run_config(
        task_set,
        budget={"max_metric_calls": BUDGET},
        task_lm={"provider": "demo", "model": "demo-task", "simulated_latency_ms": 20},
    )


def wait_for_status(run: Run, status: str, what: str, worker) -> Run:
    wait_until(
        lambda: Run.objects.filter(pk=run.pk, status=status).exists(),
        timeout=120,
        what=f"{what}\n{worker.log()}",
    )
    return Run.objects.select_related("progress").get(pk=run.pk)


def test_a_run_paused_and_resumed_twice_on_workers_ends_as_the_uninterrupted_run(
    services_env, user, tmp_path
):
    """Paused each time once it has one more candidate, resumed at once: the
    same budget_used, candidates (texts, parents, scores) and task calls as
    the same seeded run straight through, and budget_used equals the task
    calls counted at every pause."""
    refund_verifier(user)
    task_set = refund_task_set(user)
    worker = start_worker(services_env, tmp_path / "worker.log")
    try:
        straight = run_launch(owner=user, config=config(task_set))
        straight = wait_for_status(
            straight, RunStatus.COMPLETED, "the run straight through", worker
        )
        expected = run_outcome(straight)
        assert expected["budget_used"] == expected["task_calls"]

        run = run_launch(owner=user, config=config(task_set))
        for candidates in (2, 4):
            wait_until(
                lambda n=candidates: run.candidates.count() >= n,
                timeout=120,
                what=f"{candidates} candidates\n{worker.log()}",
            )
            run_pause(run=run, by=user)
            paused = wait_for_status(run, RunStatus.PAUSED, "the pause", worker)
            assert paused.claim == "" and paused.heartbeat_at is None
            assert not Run.objects.active().filter(pk=run.pk).exists()
            spent = run_outcome(run)
            assert spent["budget_used"] == spent["task_calls"] < expected["budget_used"]
            run_resume(run=run)
        wait_for_status(run, RunStatus.COMPLETED, "the resumed run to finish", worker)
    finally:
        worker.stop()
    assert run_outcome(run) == expected
    assert RunEvent.objects.filter(run=run, type="run.paused").count() == 2
    assert_event_log_is_whole(run)


def test_a_worker_killed_on_the_way_to_a_pause_leaves_the_run_paused_and_resumable(
    services_env, user, tmp_path
):
    """The pause is asked, the worker is killed before the iteration ends (after
    it spent on it): another worker's watchdog finds the run's heartbeat stale
    and, instead of running it, pauses it at its last checkpoint, with the
    budget line gepa's count there; resumed, it completes with the budget line
    gepa's count again."""
    refund_verifier(user)
    task_set = refund_task_set(user)
    slow = run_config(
        task_set,
        budget={"max_metric_calls": BUDGET},
        task_lm={"provider": "demo", "model": "demo-task", "simulated_latency_ms": 400},
    )
    first = start_worker(services_env, tmp_path / "first-worker.log")
    try:
        run = run_launch(owner=user, config=slow)
        wait_until(
            lambda: run.candidates.count() >= 2,
            timeout=120,
            what=f"two candidates\n{first.log()}",
        )
        run_pause(run=run, by=user)
        # Killed once the iteration in flight has spent metric calls (400 ms per task
        # call: long before its end), which the checkpoint does not count.
        born = run.candidates.order_by("-index").values_list("metric_calls", flat=True)[0]
        wait_until(
            lambda: Run.objects.get(pk=run.pk).budget_used > born,
            timeout=60,
            interval=0.02,
            what=f"the iteration in flight to spend\n{first.log()}",
        )
        first.kill()
    finally:
        first.stop()
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING

    second = start_worker(services_env, tmp_path / "second-worker.log")
    try:
        paused = wait_for_status(run, RunStatus.PAUSED, "the watchdog to pause the run", second)
        assert paused.phase == "paused by alice" and paused.claim == ""
        # Paused at its last checkpoint: the budget line is what gepa recorded there,
        # not the calls of the killed iteration (a resume runs that one again).
        assert paused.budget_used == recorded_metric_calls(services_env, run)
        run_resume(run=run)
        wait_for_status(run, RunStatus.COMPLETED, "the resumed run to finish", second)
    finally:
        second.stop()
    run = Run.objects.select_related("progress").get(pk=run.pk)
    # The killed worker's iteration in flight runs again (its calls were paid, not recorded).
    assert run.budget_used <= BUDGET and run.budget_used <= run.usage["task"]["calls"]
    assert run.budget_used == recorded_metric_calls(services_env, run)
    assert_event_log_is_whole(run)


def recorded_metric_calls(env: dict, run: Run) -> int:
    """The metric calls gepa's checkpoint of the run counts."""
    return GEPAState.load(str(Path(env["FRONTIER_RUNS_DIR"]) / str(run.pk))).total_num_evals


def test_a_candidate_added_to_a_paused_run_is_applied_once_at_the_first_boundary_after_resume(
    services_env, user, tmp_path
):
    """Added while the run is paused, it waits (pending: nothing runs); resumed,
    the run evaluates it before anything else, charged one val evaluation on
    top of what was spent at the pause, and it is in gepa's pool exactly once;
    the run's event seqs stay 1..N with no gap or repeat."""
    refund_verifier(user)
    task_set = refund_task_set(user)
    worker = start_worker(services_env, tmp_path / "worker.log")
    try:
        run = run_launch(owner=user, config=config(task_set))
        wait_until(
            lambda: run.candidates.count() >= 2,
            timeout=120,
            what=f"two candidates\n{worker.log()}",
        )
        run_pause(run=run, by=user)
        paused = wait_for_status(run, RunStatus.PAUSED, "the pause", worker)
        injection = run_inject_candidate(
            run=run, components={"instructions": EDITED}, edited_from=0, user=user
        )
        assert injection.status == InjectionStatus.PENDING
        born_before = paused.candidates.count()
        run_resume(run=run)
        wait_for_status(run, RunStatus.COMPLETED, "the resumed run to finish", worker)
    finally:
        worker.stop()

    injection.refresh_from_db()
    assert injection.status == InjectionStatus.APPLIED
    run = Run.objects.select_related("progress").get(pk=run.pk)
    human = run.candidates.get(origin=Origin.HUMAN)
    # The first candidate after the resume, born at the pause's budget plus its val evaluation.
    assert human.index == injection.candidate_index == born_before
    assert human.metric_calls == paused.budget_used + VAL_TASKS
    state = GEPAState.load(str(Path(services_env["FRONTIER_RUNS_DIR"]) / str(run.pk)))
    assert state.program_candidates.count({"instructions": EDITED}) == 1
    assert human.metric_calls - state.num_metric_calls_by_discovery[human.index] == VAL_TASKS
    assert run.budget_used == state.total_num_evals == run.usage["task"]["calls"] <= BUDGET
    statuses = [e.payload["status"] for e in run.events.filter(type="candidate.injected")]
    assert statuses == ["pending", "applied"]
    assert_event_log_is_whole(run)
