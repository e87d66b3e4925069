"""A bench leaves nothing behind (bench/scratch.py, bench/live.py), also when
it is stopped or fails half-way: no scratch database, no Redis key, no child
process, no directory, and nothing written into the checkout."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
import redis
from django.conf import settings

from tests.integration.conftest import checkout_served_url

ROOT = Path(__file__).resolve().parents[2]


def _admin_url() -> str:
    db = settings.DATABASES["default"]
    return f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/postgres"


def _scratch_databases(pid: int) -> list[str]:
    """The scratch databases of the bench process `pid` (bench/live.py's TAG)."""
    with psycopg.connect(_admin_url()) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", [f"bench_live_{pid}_%"]
        ).fetchall()
    return [name for (name,) in rows]


def _remove_what_is_left(bench: subprocess.Popen, children: list[int]) -> None:
    """What a failing bench left, removed so that the test itself leaves nothing:
    its processes (killed with their groups) and its scratch databases."""
    for pid in [bench.pid, *children]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    bench.wait(timeout=10)
    with psycopg.connect(_admin_url(), autocommit=True) as conn:
        for name in _scratch_databases(bench.pid):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _wait_for(what, seconds: float, log: Path, message: str):
    deadline = time.monotonic() + seconds
    while not (found := what()):
        if time.monotonic() > deadline:
            pytest.fail(f"{message} within {seconds:.0f} s:\n{log.read_text(errors='replace')}")
        time.sleep(0.2)
    return found


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_bench_stopped_half_way_leaves_no_database_keys_or_processes(signum, tmp_path):
    """bench/live.py is stopped while its web process pushes events to websocket
    clients through Redis: afterwards its scratch database, every Redis key
    under its channel prefix and its web process are gone."""
    admin = _admin_url()
    env = {
        **os.environ,
        "BENCH_POSTGRES_URL": admin,
        "BENCH_REDIS_URL": settings.REDIS_URL,
        "PYTHONUNBUFFERED": "1",
    }
    log = tmp_path / "bench.log"
    r = redis.Redis.from_url(settings.REDIS_URL)
    tag, children = None, []
    served_url = checkout_served_url()
    with open(log, "w") as out:
        bench = subprocess.Popen(
            [sys.executable, "bench/live.py", "--clients", "2", "--events", "3000"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        tag = _wait_for(
            lambda: (m := re.search(r"built the run \((\w+)\)", log.read_text())) and m[1],
            180,
            log,
            "the bench built no run",
        )
        # Its clients have joined their groups: the channel layer's keys exist.
        _wait_for(lambda: list(r.scan_iter(f"*{tag}*")), 120, log, "no Redis keys appeared")
        children = _children(bench.pid)
        assert children, "the bench's web process is running"

        os.kill(bench.pid, signum)
        bench.wait(timeout=60)

        assert list(r.scan_iter(f"*{tag}*")) == []
        with psycopg.connect(admin) as conn:
            left = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [tag]).fetchall()
        assert left == [], f"the scratch database {tag} is left"
        time.sleep(0.5)  # an orphan is reaped by init
        assert [pid for pid in children if _alive(pid)] == []
        assert not list(Path("/tmp").glob(f"{tag}-*")), "its runs or data directory is left"
        # Its web process recorded its address in a data directory of the bench's
        # own, not in the checkout's, where the CLI would link to it after it is gone.
        assert checkout_served_url() == served_url
    finally:
        _remove_what_is_left(bench, children)
        if tag:
            for key in r.scan_iter(f"*{tag}*"):
                r.delete(key)
        r.close()


def test_a_bench_that_starts_celery_workers_leaves_its_redis_empty(own_redis, tmp_path):
    """bench/worker_start.py starts real `celery worker` processes (ours and,
    with --baseline, another checkout's) on a redis-server of the test's own.
    Afterwards that Redis holds no key at all: not the bench's queue, nor the
    control and event bindings its workers declared, nor the deadlines kombu
    keeps for them (`_kombu.binding_deadlines`, named by exchange, not by the
    bench's tag, unless the bench gives its processes a key prefix)."""
    own_redis.start()
    admin = _admin_url()
    env = {**os.environ, "BENCH_POSTGRES_URL": admin, "BENCH_REDIS_URL": own_redis.url}
    bench = subprocess.run(
        [sys.executable, "bench/worker_start.py", "--pools", "threads", "--rounds", "1",
         "--calls", "10", "--concurrency", "1", "--baseline", str(ROOT)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "baseline: first run of 10 calls" in bench.stdout, bench.stdout
    r = redis.Redis.from_url(own_redis.url)
    try:
        assert sorted(r.scan_iter("*")) == []
    finally:
        r.close()


def test_a_bench_whose_database_went_away_still_deletes_its_keys(own_redis, monkeypatch):
    """bench/live.py's clean_up with PostgreSQL unreachable (its DROP DATABASE
    fails): the failure is raised, and the bench's Redis keys and its runs
    directory are removed all the same."""
    own_redis.start()
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    with socket.socket() as s:  # a port nothing listens on: PostgreSQL is gone
        s.bind(("127.0.0.1", 0))
        gone = s.getsockname()[1]
    monkeypatch.setenv("BENCH_POSTGRES_URL", f"postgres://postgres@127.0.0.1:{gone}/postgres")
    monkeypatch.setenv("BENCH_REDIS_URL", own_redis.url)
    spec = importlib.util.spec_from_file_location(
        "bench_live_under_test", ROOT / "bench" / "live.py"
    )
    live = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(live)
    r = redis.Redis.from_url(own_redis.url)
    try:
        r.set(f"{live.TAG}:1:a-cached-value", "x")
        live.RUNS_DIR.mkdir()
        with pytest.raises(psycopg.OperationalError):
            live.clean_up()
        assert list(r.scan_iter("*")) == []
        assert not live.RUNS_DIR.exists()
    finally:
        r.close()
        shutil.rmtree(live.RUNS_DIR, ignore_errors=True)


def test_a_bench_stopped_while_its_web_processes_start_stops_those_that_started(tmp_path):
    """bench/fanout.py --webs 2 gets SIGTERM while its second web process starts:
    the first one, already serving (in a session of its own, so the signal does
    not reach it), is stopped too, and the scratch database is dropped."""
    env = {
        **os.environ,
        "BENCH_POSTGRES_URL": _admin_url(),
        "BENCH_REDIS_URL": settings.REDIS_URL,
        "PYTHONUNBUFFERED": "1",
    }
    log = tmp_path / "bench.log"
    with open(log, "w") as out:
        bench = subprocess.Popen(
            [sys.executable, "bench/fanout.py", "--webs", "2", "--viewers", "1",
             "--seconds", "1", "--repeats", "1", "--servers", "uvicorn"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    children: list[int] = []
    try:
        # start_web returns once a web process serves: a second child means the first serves.
        children = _wait_for(
            lambda: len(found := _children(bench.pid)) >= 2 and found,
            180,
            log,
            "the bench started no second web process",
        )
        os.kill(bench.pid, signal.SIGTERM)
        bench.wait(timeout=60)
        time.sleep(0.5)  # an orphan is reaped by init
        assert [pid for pid in children if _alive(pid)] == [], log.read_text(errors="replace")
        assert _scratch_databases(bench.pid) == []
    finally:
        _remove_what_is_left(bench, children)


def test_a_bench_that_fails_as_django_starts_drops_its_database():
    """bench/growth.py with a Redis URL Django refuses (its settings raise
    ImproperlyConfigured as the bench sets Django up, after the scratch database
    exists): it exits with the error, and its scratch database is gone."""
    env = {
        **os.environ,
        "BENCH_POSTGRES_URL": _admin_url(),
        "BENCH_REDIS_URL": "http://127.0.0.1:1/",
    }
    bench = subprocess.Popen(
        [sys.executable, "bench/growth.py", "--calls", "20"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        output, _ = bench.communicate(timeout=120)
        assert bench.returncode != 0
        assert "REDIS_URL" in output, output
        assert _scratch_databases(bench.pid) == [], output
    finally:
        _remove_what_is_left(bench, [])
