"""Live dashboard benchmark.

1. Builds a 300-candidate × 100-val-task run (tests/factories.py)
   and prints the run page's JSON snapshot size and build time (median of 5
   after one warm-up). Targets: ≤ 2 MB, ≤ 300 ms.
2. Starts a web process (`manage.py serve`) on that database with the channels-redis layer, connects 20
   websocket clients to the run (`/ws/runs/<id>/?after=<last seq>`), publishes
   events with `optimizer.runs.events.publish_run_event` and prints the median and
   p95 latency from each event's commit to its arrival at every client.
   Target: p95 ≤ 100 ms.
3. The same for the runs list: 20 clients on `/ws/runs/` and run.budget
   events; prints the latency from commit to the run's pushed list row (the
   publisher reads the row after commit, so this includes that query).

Usage:  .venv/bin/python bench/live.py [--clients 20] [--events 200] [--interval-ms 20]

It needs PostgreSQL and Redis (BENCH_POSTGRES_URL, default
postgres://postgres@127.0.0.1:5432/postgres; BENCH_REDIS_URL, default
redis://127.0.0.1:6379/0). It creates a uniquely named scratch database and a
unique channel prefix, and removes both at the end (`clean_up`), also when it
fails or gets SIGTERM or Ctrl-C (bench/scratch.py).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import scratch  # bench/, beside this file

TAG = f"bench_live_{os.getpid()}_{uuid.uuid4().hex[:6]}"
ADMIN_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
DATABASE_URL = urlunsplit(urlsplit(ADMIN_URL)._replace(path=f"/{TAG}"))
# The workers' runs directory of a bench that runs demo runs (demo_operator).
RUNS_DIR = Path(f"/tmp/{TAG}-runs")
# The web processes' data directory (scratch.web_data_env).
DATA_DIR = Path(f"/tmp/{TAG}-data")

ENV = {
    "DATABASE_URL": DATABASE_URL,
    "REDIS_URL": REDIS,
    "FRONTIER_CHANNEL_PREFIX": TAG,
    # Every Celery key, also those kombu names by exchange (the workers' control
    # and event bindings and their deadlines), holds the tag: clean_up finds them.
    "FRONTIER_BROKER_KEY_PREFIX": f"{TAG}.",
    "SECRET_KEY": f"bench-only-{uuid.uuid4().hex}",
    "DEBUG": "0",
    "ALLOWED_HOSTS": "127.0.0.1,localhost",
    "DJANGO_SETTINGS_MODULE": "dashboard.settings",
}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def create_database() -> None:
    """The scratch database; from here on SIGTERM exits through the bench's `finally`."""
    import psycopg

    scratch.exit_on_signals()
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{TAG}"')


def drop_database() -> None:
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TAG}" WITH (FORCE)')


def demo_operator():
    """For a bench whose workers run demo runs, after `create_database`: the
    workers' environment (the scratch database, a queue, channel prefix and
    runs directory of the bench's own), Django set up and migrated, and an
    operator (who may give the simulated model's latency inline) with the
    refund example's verifier and task set. Returns (operator, task set)."""
    os.environ.update({**ENV, "FRONTIER_QUEUE": TAG, "FRONTIER_RUNS_DIR": str(RUNS_DIR)})
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from tests.optimizer.run_helpers import refund_task_set, refund_verifier

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_superuser("bench")
    refund_verifier(user)
    return user, refund_task_set(user)


def clean_up(processes=(), *, redis: bool = True) -> None:
    """What a bench's `finally` runs: its child processes stopped, the scratch
    database dropped, every Redis key under its prefix deleted, its runs and
    data directories removed; each step also when one before it fails
    (scratch.run_each)."""
    scratch.run_each(
        *(functools.partial(scratch.stop, process) for process in processes),
        drop_database,  # WITH (FORCE): the bench's own open connections are closed
        *([functools.partial(scratch.delete_keys, REDIS, TAG)] if redis else []),
        functools.partial(shutil.rmtree, RUNS_DIR, ignore_errors=True),
        functools.partial(shutil.rmtree, DATA_DIR, ignore_errors=True),
    )


def bench_snapshot(run) -> None:
    from dashboard.selectors import run_snapshot
    from optimizer.models import Run

    run = Run.objects.select_related("task_set", "owner", "best_candidate").get(pk=run.pk)
    run_snapshot(run)
    times, size = [], 0
    for _ in range(5):
        started = time.perf_counter()
        size = len(json.dumps(run_snapshot(run)).encode())
        times.append((time.perf_counter() - started) * 1000)
    print(
        f"snapshot: {size / 1e6:.2f} MB, built in {statistics.median(times):.0f} ms median "
        f"(min {min(times):.0f}, max {max(times):.0f}) for {run.candidates.count()} candidates × 100 val tasks"
    )


def start_web(
    port: int, server: str = "uvicorn", extra_env: dict | None = None, root: Path = ROOT
) -> subprocess.Popen:
    """A web process on `port` serving this database: Frontier's own (`manage.py
    serve`, uvicorn), or with --server daphne the previous server, plain
    (`pip install daphne==4.2.3`), for side-by-side figures; `root` is the
    checkout it serves (another one: its code beside ours, same database)."""
    command = {
        "uvicorn": [
            sys.executable,
            "manage.py",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        "daphne": [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "dashboard.asgi:application",
        ],
    }[server]
    process = subprocess.Popen(
        command,
        cwd=root,
        env={**os.environ, **ENV, **scratch.web_data_env(DATA_DIR, root), **(extra_env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # scratch.stop stops it with what it starts
    )
    return scratch.serving(process, port, server)


def publish_events(
    run_id: int, count: int, interval: float, commits: dict[int, float], type: str = "worker.ping"
) -> None:
    """Publish `count` events; record when each one's transaction committed."""
    from django.db import close_old_connections, transaction

    from optimizer.runs.events import publish_run_event

    for i in range(count):
        if scratch.stopping.is_set():  # the bench is stopped: its clean-up waits for this thread
            return
        with transaction.atomic():
            # Registered before publish_run_event's own on_commit, so it runs first:
            # the timestamp is taken right after COMMIT, before the group_send.
            holder: dict = {}
            transaction.on_commit(lambda: holder.setdefault("t", time.perf_counter()))
            data = (
                {"used": i, "total": count}
                if type == "run.budget"
                else {"host": "bench", "note": str(i)}
            )
            event = publish_run_event(run_id, type, data)
        commits[event.seq] = holder["t"]
        time.sleep(interval)
    close_old_connections()


async def bench_latency(run, user, port: int, clients: int, events: int, interval: float) -> None:
    import websockets
    from asgiref.sync import sync_to_async
    from django.test import Client

    client = Client()
    await sync_to_async(client.force_login)(user)
    after = await sync_to_async(lambda: run.last_seq)()  # the progress row: a query
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    url = f"ws://127.0.0.1:{port}/ws/runs/{run.pk}/?after={after}"
    headers = {"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"}
    arrivals: list[dict[int, float]] = [{} for _ in range(clients)]
    sockets = [await websockets.connect(url, additional_headers=headers) for _ in range(clients)]

    async def listen(k: int, ws) -> None:
        async for raw in ws:
            arrivals[k][json.loads(raw)["seq"]] = time.perf_counter()
            if len(arrivals[k]) == events:
                return

    listeners = [asyncio.create_task(listen(k, ws)) for k, ws in enumerate(sockets)]
    await asyncio.sleep(0.5)  # every consumer has joined the group
    commits: dict[int, float] = {}
    await asyncio.to_thread(publish_events, run.pk, events, interval, commits)
    await asyncio.wait_for(asyncio.gather(*listeners), timeout=30)
    for ws in sockets:
        await ws.close()

    latencies = [(arrived[seq] - commits[seq]) * 1000 for arrived in arrivals for seq in commits]
    delivered = sum(len(a) for a in arrivals)
    print(
        f"websocket: {events} events × {clients} clients = {delivered} deliveries through Redis "
        f"(uvicorn + channels-redis); commit → arrival median {statistics.median(latencies):.1f} ms, "
        f"p95 {pct(latencies, 0.95):.1f} ms, max {max(latencies):.1f} ms"
    )


async def bench_list_latency(
    run, user, port: int, clients: int, events: int, interval: float
) -> None:
    import websockets
    from asgiref.sync import sync_to_async
    from django.test import Client

    client = Client()
    await sync_to_async(client.force_login)(user)
    headers = {
        "Cookie": f"sessionid={client.cookies['sessionid'].value}",
        "Origin": f"http://127.0.0.1:{port}",
    }
    arrivals: list[dict[int, float]] = [{} for _ in range(clients)]
    sockets = [
        await websockets.connect(f"ws://127.0.0.1:{port}/ws/runs/", additional_headers=headers)
        for _ in range(clients)
    ]

    done = asyncio.Event()  # set once the publisher knows the last seq
    last: list[int] = []

    async def listen(k: int, ws) -> None:
        async for raw in ws:
            row = json.loads(raw)["data"]
            if row["id"] == run.pk:
                arrivals[k][row["last_seq"]] = time.perf_counter()
            # Rows are coalesced (at most one a second per run): the one showing the last event ends it.
            if done.is_set() and last[0] in arrivals[k]:
                return

    listeners = [asyncio.create_task(listen(k, ws)) for k, ws in enumerate(sockets)]
    await asyncio.sleep(0.5)
    commits: dict[int, float] = {}
    await asyncio.to_thread(publish_events, run.pk, events, interval, commits, "run.budget")
    last.append(max(commits))
    done.set()
    deadline = time.perf_counter() + 30
    while time.perf_counter() < deadline and not all(last[0] in a for a in arrivals):
        await asyncio.sleep(0.05)
    for task in listeners:
        task.cancel()
    for ws in sockets:
        await ws.close()
    # A coalesced row shows the state as of its last_seq: its latency runs from that event's commit.
    latencies = [(arrived[seq] - commits[seq]) * 1000 for arrived in arrivals for seq in arrived]
    print(
        f"runs list: {events} run.budget events × {clients} clients on /ws/runs/ = {sum(len(a) for a in arrivals)} rows pushed "
        f"(coalesced: ≤ 1 a second per run); commit → row arrival median {statistics.median(latencies):.1f} ms, p95 {pct(latencies, 0.95):.1f} ms, "
        f"max {max(latencies):.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--interval-ms", type=float, default=20)
    args = parser.parse_args()

    os.environ.update(ENV)
    web = None
    try:
        create_database()
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connections

        from tests.factories import recorded_run

        call_command("migrate", verbosity=0)
        user = get_user_model().objects.create_user("bench", password=uuid.uuid4().hex)
        started = time.perf_counter()
        run = recorded_run(owner=user, candidates=300, val_tasks=100)
        print(f"built the run ({TAG}) in {time.perf_counter() - started:.1f} s")
        bench_snapshot(run)

        port = scratch.free_port()
        web = start_web(port)
        asyncio.run(
            bench_latency(run, user, port, args.clients, args.events, args.interval_ms / 1000)
        )
        asyncio.run(
            bench_list_latency(run, user, port, args.clients, args.events, args.interval_ms / 1000)
        )
        connections.close_all()
    finally:
        clean_up([web] if web is not None else [])


if __name__ == "__main__":
    main()
