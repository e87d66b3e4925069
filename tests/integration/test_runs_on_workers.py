"""A real optimization run in distributed mode: launched here, executed by a
`celery worker` process, streamed by a web process, and resumed by another
worker when its first worker is killed."""

import json

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
