"""Infrastructure faults in distributed mode, for real: PostgreSQL connections
terminated under a running worker, a Redis that goes away mid-run or is down
when a run is launched (a redis-server of the test's own, on its own port), and
a websocket left idle through Redis."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from django.db import connection
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import connect

from optimizer.models import Run, RunEvent, RunStatus
from optimizer.services import run_launch
from tests.integration.conftest import (
    api_token,
    broker_control,
    session_cookie,
    start_web,
    start_worker,
)
from tests.integration.test_distributed_mode import ws_url
from tests.integration.test_runs_on_workers import assert_event_log_is_whole
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config
from tests.polling import wait_until

SLOW_DEMO = {"provider": "demo", "model": "demo-task", "simulated_latency_ms": 60}


def finished(run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, status__in=RunStatus.finished()).exists()


def assert_ran_once(run: Run) -> None:
    """What a second runner of the same run would break: one run.finished, a
    gapless event log, each candidate once, and no more budget than promised."""
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.error
    assert RunEvent.objects.filter(run=run, type="run.finished").count() == 1
    assert_event_log_is_whole(run)
    assert run.budget_used <= run.budget_total


def terminate_connections(*, only_heartbeats: bool = False) -> int:
    """pg_terminate_backend the worker's sessions on the test database (every
    other session, or only those whose last query was a heartbeat): what a
    PostgreSQL restart, a failover or a proxy dropping idle connections does."""
    heartbeats = (
        """AND (query LIKE 'UPDATE "optimizer_runprogress" SET "heartbeat_at"%%'"""
        """ OR query LIKE 'SELECT 1 AS "a" FROM "optimizer_run" WHERE %%cancel_requested%%')"""
        if only_heartbeats
        else ""
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            f" WHERE datname = current_database() AND pid <> pg_backend_pid() {heartbeats}"
        )
        return cursor.fetchone()[0]


def test_pinging_a_worker_through_a_redis_of_the_test_leaves_this_process_launching_runs_on_its_own_broker(
    own_redis,
):
    from celery import current_app

    from dashboard.celery import app
    from optimizer.celery_tasks import run_optimization

    with broker_control(own_redis.url) as control:
        assert control.app.conf.broker_url == own_redis.url
    # A run launched by a later test goes through the shared task, which resolves through the current app.
    assert current_app._get_current_object() is app
    assert run_optimization.app is app


def test_terminating_the_workers_database_connections_mid_run_never_runs_it_twice(
    services_env, user, tmp_path
):
    refund_verifier(user)
    task_set = refund_task_set(user)
    # Two pool processes: a second runner is there to take the run if the first one looks dead.
    worker = start_worker(services_env, tmp_path / "worker.log")
    try:
        run = run_launch(
            owner=user,
            config=run_config(task_set, budget={"max_metric_calls": 300}, task_lm=SLOW_DEMO),
        )
        wait_until(
            lambda: run.candidates.count() >= 1,
            timeout=120,
            what=f"the seed candidate\n{worker.log()}",
        )
        terminated = 0
        for round in range(6):
            if finished(run.pk):
                break
            # A dropped heartbeat connection alone is the nastiest case: the run goes on, its heartbeat must too.
            terminated += terminate_connections(only_heartbeats=round % 2 == 0)
            time.sleep(
                4
            )  # longer than the stale window (FRONTIER_RUN_STALE_SECONDS=3 in services_env)
        wait_until(lambda: finished(run.pk), timeout=180, what=f"the run to finish\n{worker.log()}")
    finally:
        worker.stop()
    assert terminated >= 3, "the worker's connections were not terminated mid-run"
    assert_ran_once(run)


def launch_through_the_api(server, token: str, config: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        server.url + "/api/runs/",
        data=json.dumps({"config": config}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, {"body": error.read().decode(errors="replace")[:2000]}


def test_a_run_launched_while_redis_is_down_is_queued_and_starts_once_redis_is_back(
    services_env, own_redis, user, tmp_path
):
    refund_verifier(user)
    task_set = refund_task_set(user)
    env = own_redis.env(services_env)  # not started yet: Redis is down
    web = start_web(env, tmp_path / "web.log")
    try:
        status, body = launch_through_the_api(
            web, api_token(user), run_config(task_set, budget={"max_metric_calls": 40})
        )
    finally:
        web.stop()
    assert status == 201, body
    run = Run.objects.get(pk=body["id"])
    assert run.status == RunStatus.QUEUED  # kept, and known not to be sent:
    assert "broker" in run.phase

    own_redis.start()
    worker = start_worker(
        env, tmp_path / "worker.log"
    )  # its watchdog sends what never reached the broker
    try:
        wait_until(
            lambda: finished(run.pk),
            timeout=120,
            what=f"the queued run to be picked up and finish\n{worker.log()}",
        )
    finally:
        worker.stop()
    assert_ran_once(run)


def test_an_idle_websocket_through_redis_stays_open_for_a_minute(
    web_server, services_env, user, settings
):
    # This process publishes on the web process's channel prefix (the real channel-layer settings otherwise).
    layers = {"default": {**settings.CHANNEL_LAYERS["default"]}}
    layers["default"]["CONFIG"] = {
        **layers["default"]["CONFIG"],
        "prefix": services_env["FRONTIER_CHANNEL_PREFIX"],
    }
    settings.CHANNEL_LAYERS = layers
    run = Run.objects.create(owner=user, name="idle")
    with connect(
        ws_url(web_server, run.pk),
        additional_headers={"Cookie": session_cookie(user)},
        origin=web_server.url,
        open_timeout=10,
    ) as ws:
        opened = time.monotonic()
        while (left := opened + 60 - time.monotonic()) > 0:
            try:
                message = ws.recv(timeout=left)
            except TimeoutError:
                break
            except ConnectionClosed as closed:
                raise AssertionError(
                    f"the idle socket was closed after {time.monotonic() - opened:.0f} s: {closed}"
                ) from None
            raise AssertionError(f"an idle socket received {message!r}")
        # Still open and still subscribed: an event published now arrives.
        from optimizer.runs.events import publish_run_event

        publish_run_event(run.pk, "worker.ping", {"host": "test", "note": "after a minute"})
        assert json.loads(ws.recv(timeout=30))["data"]["note"] == "after a minute"


def read_until_finished(
    server, run_id: int, cookie: str, seqs: list[int], *, deadline: float
) -> None:
    """What the run page does: (re)connect from the last seq it has and read
    until run.finished, reconnecting whenever the socket closes."""
    while time.monotonic() < deadline:
        try:
            after = seqs[-1] if seqs else 0
            with connect(
                ws_url(server, run_id, after=after),
                additional_headers={"Cookie": cookie},
                origin=server.url,
                open_timeout=10,
            ) as ws:
                while True:
                    message = json.loads(ws.recv(timeout=max(1, deadline - time.monotonic())))
                    seqs.append(message["seq"])
                    if message["type"] == "run.finished":
                        return
        except (ConnectionClosed, InvalidHandshake, OSError, TimeoutError):
            time.sleep(1)
    raise AssertionError(f"run.finished never arrived; seqs so far end at {seqs[-5:]}")


def test_a_redis_outage_mid_run_neither_kills_the_worker_nor_loses_the_run(
    services_env, own_redis, user, tmp_path
):
    refund_verifier(user)
    task_set = refund_task_set(user)
    own_redis.start()
    env = own_redis.env(services_env)
    web = start_web(env, tmp_path / "web.log")
    worker = start_worker(env, tmp_path / "worker.log")
    cookie = session_cookie(user)
    seqs: list[int] = []
    try:
        config = run_config(task_set, budget={"max_metric_calls": 400}, task_lm=SLOW_DEMO)
        status, body = launch_through_the_api(web, api_token(user), config)
        assert status == 201, body
        run = Run.objects.get(pk=body["id"])
        with connect(
            ws_url(web, run.pk),
            additional_headers={"Cookie": cookie},
            origin=web.url,
            open_timeout=10,
        ) as ws:
            while True:  # until the seed candidate: the run is well under way
                message = json.loads(ws.recv(timeout=120))
                seqs.append(message["seq"])
                if message["type"] == "candidate.new":
                    break
            own_redis.stop()  # mid-run: the worker is executing it, the browser is watching
            time.sleep(10)
            own_redis.start()
            try:
                while True:
                    seqs.append(json.loads(ws.recv(timeout=5))["seq"])
            except (ConnectionClosed, TimeoutError):
                pass  # the page reconnects from the last seq it has
        read_until_finished(web, run.pk, cookie, seqs, deadline=time.monotonic() + 180)
        wait_until(
            lambda: finished(run.pk), timeout=60, what="the run to be finished in the database"
        )
        # Still serving, not merely finishing its task before an exit: it runs the next run.
        status, body = launch_through_the_api(
            web, api_token(user), run_config(task_set, budget={"max_metric_calls": 20})
        )
        assert status == 201, body
        wait_until(
            lambda: finished(body["id"]),
            timeout=60,
            what=f"a run launched after the outage\n{worker.log()[-3000:]}",
        )
    finally:
        worker.stop()
        web.stop()
    assert seqs == list(range(1, len(seqs) + 1)), "the browser missed or repeated events"
    assert_ran_once(run)
