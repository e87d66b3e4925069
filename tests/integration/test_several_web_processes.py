"""Several web processes behind one Redis (README "How it runs", several web processes):
a run executed by a `celery worker` reaches a websocket client of each of two
`daphne` processes, every event, in order, and each runs list gets the run's
final row."""

import json
import threading
from contextlib import ExitStack

from websockets.sync.client import connect

from optimizer.models import RunStatus
from optimizer.services import run_launch
from tests.integration.conftest import session_cookie, start_daphne
from tests.integration.test_distributed_mode import ws_url
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config


def test_a_client_of_each_of_two_daphne_processes_gets_every_event_of_a_run(services_env, celery_worker, user, tmp_path):
    webs = [start_daphne(services_env, tmp_path / f"daphne-{n}.log") for n in range(2)]
    try:
        cookie = session_cookie(user)
        refund_verifier(user)
        run = run_launch(owner=user, config=run_config(refund_task_set(user), budget={"max_metric_calls": 40}))
        received: list[list[dict]] = [[], []]
        rows: list[list[dict]] = [[], []]
        stack = ExitStack()
        lists = [stack.enter_context(connect(web.url.replace("http://", "ws://") + "/ws/runs/", additional_headers={"Cookie": cookie},
                                             origin=web.url, open_timeout=10)) for web in webs]

        def watch(n: int) -> None:
            with connect(ws_url(webs[n], run.pk), additional_headers={"Cookie": cookie}, origin=webs[n].url, open_timeout=10) as ws:
                while not received[n] or received[n][-1]["type"] != "run.finished":
                    received[n].append(json.loads(ws.recv(timeout=120)))

        def watch_list(n: int) -> None:
            while not rows[n] or rows[n][-1]["status"] != RunStatus.COMPLETED:
                rows[n].append(json.loads(lists[n].recv(timeout=120))["data"])

        threads = [threading.Thread(target=f, args=(n,)) for n in range(2) for f in (watch, watch_list)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=180)
        stack.close()

        run.refresh_from_db()
        assert run.status == RunStatus.COMPLETED, run.error
        log = [e.as_message() for e in run.events.order_by("seq")]
        # run.finished is the last event: nothing after it could have made a consumer
        # catch up from the database, so each process received it live through Redis.
        assert received[0] == log and received[1] == log
        assert rows[0][-1]["last_seq"] == rows[1][-1]["last_seq"] == run.last_seq
        assert len(rows[0]) < len(log)  # coalesced: not one row per event
    finally:
        for web in webs:
            web.stop()
