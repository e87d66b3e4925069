"""A real optimization run in distributed mode: launched here, executed by a
`celery worker` process, streamed by a web process, and resumed by another
worker when its first worker is killed; and the CPUs a worker's pool
processes run on."""

import json
import os
from pathlib import Path

from websockets.sync.client import connect

from optimizer.models import Run, RunEvent, RunStatus
from optimizer.services import run_launch
from tests.integration.conftest import session_cookie, start_worker
from tests.integration.test_distributed_mode import ws_url
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config
from tests.polling import wait_until


def assert_event_log_is_whole(run: Run) -> None:
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    announced = [e.payload["index"] for e in run.events.filter(type="candidate.new")]
    assert sorted(announced) == sorted(set(announced)), "a candidate was announced twice"
    indices = sorted(run.candidates.values_list("index", flat=True))
    assert indices == list(range(len(indices)))
    assert sorted(announced) == indices


def test_a_demo_run_executes_in_a_worker_process_and_streams_to_a_websocket_client(
    web_server, celery_worker, user
):
    refund_verifier(user)
    task_set = refund_task_set(user)
    run = run_launch(owner=user, config=run_config(task_set, budget={"max_metric_calls": 60}))

    received = []
    with connect(
        ws_url(web_server, run.pk),
        additional_headers={"Cookie": session_cookie(user)},
        origin=web_server.url,
    ) as ws:
        while not received or received[-1]["type"] != "run.finished":
            received.append(json.loads(ws.recv(timeout=120)))

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.error
    types = {m["type"] for m in received}
    assert {"run.status", "run.budget", "candidate.new", "front.updated", "run.finished"} <= types
    assert [m["seq"] for m in received] == list(range(1, len(received) + 1))
    assert run.best_score >= run.seed_score
    # The budget is a hard cap; the run stops when less than one iteration (2·2 + 4 calls) is left.
    assert 60 - 8 < run.budget_used <= 60 and run.stop_reason == "budget reached"
    assert_event_log_is_whole(run)


def test_a_run_whose_worker_is_killed_is_resumed_by_another_worker_without_gaps_or_duplicates(
    services_env, user, tmp_path
):
    refund_verifier(user)
    task_set = refund_task_set(user)
    first = start_worker(services_env, tmp_path / "first-worker.log")
    try:
        config = run_config(
            task_set,
            budget={"max_metric_calls": 160},
            task_lm={"provider": "demo", "model": "demo-task", "simulated_latency_ms": 60},
        )
        run = run_launch(owner=user, config=config)
        wait_until(
            lambda: run.candidates.count() >= 2,
            timeout=120,
            what="two candidates from the first worker",
        )
        first.kill()
    finally:
        first.stop()
    killed_at = run.candidates.count()
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING  # nobody told it: its worker just vanished

    second = start_worker(services_env, tmp_path / "second-worker.log")
    try:
        wait_until(
            lambda: Run.objects.filter(pk=run.pk, status__in=RunStatus.finished()).exists(),
            timeout=180,
            what=f"the second worker to finish the run\n{second.log()}",
        )
    finally:
        second.stop()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.candidates.count() >= killed_at
    assert_event_log_is_whole(run)
    assert RunEvent.objects.filter(run=run, type="run.finished").count() == 1


def allowed_cpus(pid: int | str = "self") -> str:
    """The CPUs a process may run on, as /proc lists them ("0-1", "1")."""
    status = Path(f"/proc/{pid}/status").read_text()
    return status.split("Cpus_allowed_list:")[1].split()[0]


def pool_cpus(worker) -> list[str]:
    """allowed_cpus of each pool process of a `celery worker`, by pid."""
    pid = worker.popen.pid
    children: list[str] = []

    def started() -> bool:
        children[:] = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return len(children) == 2  # start_worker's --concurrency

    wait_until(started, timeout=30, what="the worker's two pool processes")
    return [allowed_cpus(child) for child in sorted(children, key=int)]


def fast_runs(user, count: int) -> list[Run]:
    """`count` demo runs whose model answers at once, too long to end on their own
    while a test looks at them (stopped with stop_runs)."""
    refund_verifier(user)
    task_set = refund_task_set(user)
    lm = {"provider": "demo", "model": "demo-task", "simulated_latency_ms": 0}
    config = run_config(task_set, task_lm=lm, budget={"max_metric_calls": 50_000})
    return [run_launch(owner=user, config=config) for _ in range(count)]


def stop_runs(runs: list[Run]) -> None:
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(stop_requested=True)
    for run in runs:
        wait_until(
            lambda run=run: (
                Run.objects.get(pk=run.pk).status in {RunStatus.STOPPED, RunStatus.COMPLETED}
            ),
            timeout=60,
            what=f"run {run.pk} to stop",
        )


def test_a_worker_runs_each_optimization_on_a_cpu_of_its_own(celery_worker, user):
    """A run's threads share one interpreter lock, handed over faster within a
    core: a prefork child pins itself to one CPU for each run, the least busy
    one no other run holds, so two runs at once take one each; between runs
    (and the worker itself) every CPU. This machine has two (CI's too)."""
    cpus = sorted(os.sched_getaffinity(0))
    assert len(cpus) >= 2, "pinning needs two CPUs; this machine has one"
    assert pool_cpus(celery_worker) == [allowed_cpus(), allowed_cpus()]
    runs = fast_runs(user, 2)
    try:

        def each_on_one_cpu() -> list[str] | None:
            seen = pool_cpus(celery_worker)
            return seen if not any("-" in c or "," in c for c in seen) else None

        pinned = wait_until(each_on_one_cpu, timeout=60, what="both pool processes on one CPU each")
        assert sorted(pinned) == sorted([str(cpus[0]), str(cpus[1])])
        assert allowed_cpus(celery_worker.popen.pid) == allowed_cpus()
    finally:
        stop_runs(runs)
    wait_until(
        lambda: pool_cpus(celery_worker) == [allowed_cpus(), allowed_cpus()],
        timeout=10,
        what="the pool processes back on every CPU",
    )


def test_a_worker_told_not_to_pin_leaves_its_runs_on_every_cpu(services_env, user, tmp_path):
    worker = start_worker(
        {**services_env, "FRONTIER_WORKER_PIN_CPUS": "0"}, tmp_path / "unpinned-worker.log"
    )
    runs = fast_runs(user, 1)
    try:
        wait_until(
            lambda: Run.objects.get(pk=runs[0].pk).budget_used > 100,
            timeout=60,
            what="the run under way",
        )
        assert pool_cpus(worker) == [allowed_cpus(), allowed_cpus()]
    finally:
        stop_runs(runs)
        worker.stop()
