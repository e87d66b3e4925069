"""Several web processes behind one Redis (docs/deployment.md "Distributed mode"):
a run executed by a `celery worker` reaches a websocket client of each of two
web processes, every event, in order, and each runs list gets the run's
final row."""

import json
import os
import shutil
import threading
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml
from websockets.sync.client import connect

from optimizer.export import run_export_stream
from optimizer.models import RunStatus
from optimizer.services import run_launch
from tests.integration.conftest import (
    ROOT,
    Process,
    _bin,
    free_port,
    session_cookie,
    start_web,
    wait_until_serving,
)
from tests.integration.test_distributed_mode import ws_url
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config


def test_a_client_of_each_of_two_web_processes_gets_every_event_of_a_run(
    services_env, celery_worker, user, tmp_path
):
    webs = [start_web(services_env, tmp_path / f"web-{n}.log") for n in range(2)]
    try:
        cookie = session_cookie(user)
        refund_verifier(user)
        run = run_launch(
            owner=user, config=run_config(refund_task_set(user), budget={"max_metric_calls": 40})
        )
        received: list[list[dict]] = [[], []]
        rows: list[list[dict]] = [[], []]
        stack = ExitStack()
        lists = [
            stack.enter_context(
                connect(
                    web.url.replace("http://", "ws://") + "/ws/runs/",
                    additional_headers={"Cookie": cookie},
                    origin=web.url,
                    open_timeout=10,
                )
            )
            for web in webs
        ]

        def watch(n: int) -> None:
            with connect(
                ws_url(webs[n], run.pk),
                additional_headers={"Cookie": cookie},
                origin=webs[n].url,
                open_timeout=10,
            ) as ws:
                while not received[n] or received[n][-1]["type"] != "run.finished":
                    received[n].append(json.loads(ws.recv(timeout=120)))

        def watch_list(n: int) -> None:
            while not rows[n] or rows[n][-1]["status"] != RunStatus.COMPLETED:
                rows[n].append(json.loads(lists[n].recv(timeout=120))["data"])

        threads = [
            threading.Thread(target=f, args=(n,)) for n in range(2) for f in (watch, watch_list)
        ]
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


def start_compose_web(env: dict, log_path) -> Process:
    """The compose file's `web` command (its flags as they are), on a free local port."""
    command = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"][
        "command"
    ]
    port = free_port()
    args = [
        _bin(command[0]),
        *("127.0.0.1" if a == "0.0.0.0" else str(port) if a == "8000" else a for a in command[1:]),
    ]
    process = Process(args, env, log_path)
    process.url = f"http://127.0.0.1:{port}"
    wait_until_serving(process, process.url + "/login/", name="the web process", seconds=60)
    return process


def start_compose_proxy(webs: list, tmp_path) -> Process:
    """The compose file's nginx config as Compose hands it to nginx ($$ → $), with
    `server web:8000;` (Compose's DNS name of the scaled web containers) as the
    web processes' addresses, in front of `webs`."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        pytest.fail("nginx is needed (Debian package nginx-light; .ci/run installs it)")
    site = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["configs"]["nginx"][
        "content"
    ].replace("$$", "$")
    assert "server web:8000;" in site and "listen 8000;" in site
    port = free_port()
    site = site.replace(
        "server web:8000;", " ".join(f"server {web.url.removeprefix('http://')};" for web in webs)
    )
    site = site.replace("listen 8000;", f"listen 127.0.0.1:{port};")
    temp = {
        name: tmp_path / f"nginx-{name}" for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")
    }
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        ("user root;\n" if os.geteuid() == 0 else "")
        + f"worker_processes 1;\npid {tmp_path / 'nginx.pid'};\nerror_log {tmp_path / 'nginx-error.log'};\n"
        + "events {}\nhttp {\n"
        # Which web process answered each request (the test's own log format).
        + "log_format upstream '$upstream_addr \"$request\" $status';\n"
        + f"access_log {tmp_path / 'nginx-access.log'} upstream;\n"
        + "".join(f"{name}_temp_path {path};\n" for name, path in temp.items()).replace(
            "body_temp", "client_body_temp"
        )
        + site
        + "}\n"
    )
    process = Process(
        [nginx, "-p", str(tmp_path), "-c", str(conf), "-g", "daemon off;"],
        {},
        tmp_path / "nginx.log",
    )
    process.url = f"http://127.0.0.1:{port}"
    wait_until_serving(process, process.url + "/login/", name="nginx", seconds=30)
    return process


def test_the_compose_proxy_spreads_pages_and_live_sockets_over_two_web_processes(
    services_env, celery_worker, user, tmp_path
):
    """docker-compose.yml's own nginx config (buffering on) and web command, run
    for real: a browser's requests through the proxy reach both web processes,
    its websockets are upgraded through it, a viewer on each gets every event of
    a run, and the run's export streams through it whole."""
    webs = [start_compose_web(services_env, tmp_path / f"web-{n}.log") for n in range(2)]
    proxy = None
    try:
        proxy = start_compose_proxy(webs, tmp_path)
        cookie = session_cookie(user)
        refund_verifier(user)
        run = run_launch(
            owner=user, config=run_config(refund_task_set(user), budget={"max_metric_calls": 40})
        )
        received: list[list[dict]] = [[], []]
        connected = [threading.Event(), threading.Event()]

        def watch(n: int) -> None:
            with connect(
                ws_url(proxy, run.pk),
                additional_headers={"Cookie": cookie},
                origin=proxy.url,
                open_timeout=10,
            ) as ws:
                connected[n].set()
                while not received[n] or received[n][-1]["type"] != "run.finished":
                    received[n].append(json.loads(ws.recv(timeout=120)))

        threads = [threading.Thread(target=watch, args=(n,)) for n in range(2)]
        for thread, opened in zip(
            threads, connected
        ):  # one after the other: the proxy's round robin
            thread.start()
            assert opened.wait(timeout=30), "a websocket through the proxy did not open"
        for _ in range(6):  # pages through the proxy: round robin over both processes
            request = urllib.request.Request(
                proxy.url + f"/runs/{run.pk}/", headers={"Cookie": cookie}
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status == 200 and b"<html" in response.read(2000).lower()
        for thread in threads:
            thread.join(timeout=180)

        run.refresh_from_db()
        assert run.status == RunStatus.COMPLETED, run.error
        log = [e.as_message() for e in run.events.order_by("seq")]
        assert received[0] == log and received[1] == log
        # An export through the buffering proxy arrives streamed (chunked, as the
        # web process writes it), byte for byte.
        request = urllib.request.Request(
            proxy.url + f"/runs/{run.pk}/export.json", headers={"Cookie": cookie}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert (
                response.headers["Transfer-Encoding"] == "chunked"
                and response.headers["Content-Length"] is None
            )
            assert response.read() == b"".join(run_export_stream(run))
        served = (tmp_path / "nginx-access.log").read_text()
        for web in webs:  # each process answered pages and one of the two sockets (101: upgraded)
            address = web.url.removeprefix("http://")
            assert f'{address} "GET /runs/{run.pk}/ HTTP/1.1" 200' in served, served
            assert f'{address} "GET /ws/runs/{run.pk}/?after=0 HTTP/1.1" 101' in served, served
    finally:
        if proxy is not None:
            proxy.stop()
        for web in webs:
            web.stop()
