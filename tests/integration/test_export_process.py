"""A big run export is built by a child process (`python -m
optimizer.export_process`) whose output the web process relays: the same
bytes as the in-process stream, from PostgreSQL under the web server and from the
embedded SQLite file under `frontier serve`; the child stops when the client
goes away."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from optimizer.export import run_export, run_export_csv
from optimizer.models import Evaluation
from tests.factories import recorded_run
from tests.integration.conftest import (
    ROOT,
    Process,
    free_port,
    session_cookie,
    start_web,
    wait_until_serving,
)


def _get(url: str, cookie: str) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Cookie": cookie}), timeout=60) as response:
        return response.read()


def _export_children(pid: int) -> list[int]:
    """The export processes `pid` has started that have not been reaped (a zombie counts)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes() if Path(f"/proc/{child}").exists() else b""
            stat = Path(f"/proc/{child}/stat").read_text() if Path(f"/proc/{child}").exists() else ""
            if b"optimizer.export_process" in cmdline or ") Z " in stat:
                found.append(int(child))
    return found


def _niceness(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def test_a_big_export_is_built_by_a_child_process_with_the_bytes_of_the_in_process_stream(services_env, user, tmp_path):
    big = recorded_run(user, candidates=6, val_tasks=5, holdout_tasks=2, name="big")  # 42 evaluations
    small = recorded_run(user, candidates=2, val_tasks=3, name="small")  # 6
    web = start_web(dict(services_env, FRONTIER_EXPORT_PROCESS_MIN_EVALUATIONS="30",
                                      FRONTIER_EXPORT_CSV_PROCESS_MIN_EVALUATIONS="30"), tmp_path / "web.log")
    try:
        cookie = session_cookie(user)
        for run in (big, small):
            document = json.dumps(run_export(run), ensure_ascii=False).encode()
            assert _get(f"{web.url}/runs/{run.pk}/export.json", cookie) == document
            assert _get(f"{web.url}/api/runs/{run.pk}/export", cookie) == document
            assert _get(f"{web.url}/runs/{run.pk}/export.csv", cookie) == run_export_csv(run).encode()
        log = web.log()
        assert f"export of run {big.pk} as json: built by process" in log
        assert f"export of run {big.pk} as csv: built by process" in log
        assert f"export of run {small.pk}" not in log  # 6 evaluations: in the web process
        assert "Traceback" not in log
    finally:
        web.stop()


def test_a_client_that_goes_away_stops_the_export_process_which_ran_below_the_web_process_s_priority(services_env, user, tmp_path):
    run = recorded_run(user, candidates=20, val_tasks=20, name="long")
    Evaluation.objects.filter(candidate__run=run).update(output="The refund window is 30 days. " * 2000)  # ~24 MB
    web = start_web(dict(services_env, FRONTIER_EXPORT_PROCESS_MIN_EVALUATIONS="1"), tmp_path / "web.log")
    try:
        address = urlsplit(web.url)
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
        connection.request("GET", f"/runs/{run.pk}/export.json", headers={"Cookie": session_cookie(user)})
        response = connection.getresponse()
        assert response.status == 200 and response.read(100_000)
        children = _export_children(web.popen.pid)
        assert len(children) == 1  # blocked on the pipe: the client reads no more
        assert _niceness(children[0]) == min(19, _niceness(web.popen.pid) + 10)
        connection.close()
        deadline = time.monotonic() + 20
        while _export_children(web.popen.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _export_children(web.popen.pid) == [] and not Path(f"/proc/{children[0]}").exists()
    finally:
        web.stop()


def test_the_export_process_refuses_bad_arguments_and_logs_a_failure(services_env, user):
    def export_process(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "optimizer.export_process", *args], cwd=ROOT, env=services_env,
                              capture_output=True, timeout=120)

    run = recorded_run(user, candidates=2, val_tasks=2)
    done = export_process(str(run.pk), "csv")
    assert done.returncode == 0 and done.stdout == run_export_csv(run).encode()
    assert export_process(str(run.pk), "xml").returncode == 2
    assert export_process("1; ls", "json").returncode == 2
    missing = export_process(str(run.pk + 1000), "json")
    assert missing.returncode == 1 and missing.stdout == b""
    assert f"export of run {run.pk + 1000} as json failed" in missing.stderr.decode()


@pytest.mark.standalone
def test_the_embedded_server_builds_a_big_export_in_a_child_process_from_its_sqlite_file():
    with tempfile.TemporaryDirectory(prefix="frontier-export-") as data_dir:
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG"}}
        env.update(FRONTIER_DATA_DIR=data_dir, PYTHONUNBUFFERED="1", DJANGO_SETTINGS_MODULE="dashboard.settings",
                   FRONTIER_EXPORT_PROCESS_MIN_EVALUATIONS="30", FRONTIER_EXPORT_CSV_PROCESS_MIN_EVALUATIONS="30")

        def manage(*args: str) -> str:
            return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                                  check=True, timeout=300).stdout

        manage("migrate", "--noinput", "-v", "0")
        setup = (
            "import hashlib, json\n"
            "from django.contrib.auth import get_user_model\n"
            "from django.test import Client\n"
            "from optimizer.export import run_export_csv_stream, run_export_stream\n"
            "from tests.factories import recorded_run\n"
            "user = get_user_model().objects.create_user('ada', password='x')\n"
            "run = recorded_run(user, candidates=6, val_tasks=6)\n"
            "client = Client(); client.force_login(user)\n"
            "print(json.dumps({'run': run.pk, 'cookie': client.cookies['sessionid'].value,\n"
            "  'json': hashlib.sha256(b''.join(run_export_stream(run))).hexdigest(),\n"
            "  'csv': hashlib.sha256(b''.join(run_export_csv_stream(run))).hexdigest()}))\n"
        )
        made = json.loads(manage("shell", "-c", setup).strip().splitlines()[-1])
        port = free_port()
        server = Process([sys.executable, "manage.py", "serve", "--port", str(port), "--no-worker"], env,
                         Path(data_dir) / "serve.log")
        try:
            wait_until_serving(server, f"http://127.0.0.1:{port}/login/", name="frontier serve", seconds=60)
            cookie = f"sessionid={made['cookie']}"
            for fmt in ("json", "csv"):
                got = _get(f"http://127.0.0.1:{port}/runs/{made['run']}/export.{fmt}", cookie)
                assert hashlib.sha256(got).hexdigest() == made[fmt]
            assert f"export of run {made['run']} as json: built by process" in server.log()
        finally:
            server.stop()
