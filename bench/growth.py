"""Growth benchmark: what a long run costs the database
and the worker as it goes.

Runs one demo-simulator run of --calls metric calls (default 20,000) in a
worker process (`optimizer.runs.runner.execute_run`, what the Celery task runs) on a
scratch PostgreSQL database, and prints:

- per table, `pg_total_relation_size` growth per 1,000 metric calls, for the
  first and the second half of the run (flat: the second half costs what the
  first did);
- the worker's RSS at 10 %, 25 %, 50 %, 75 % and 100 % of the budget.

Usage:  .venv/bin/python bench/growth.py [--calls 20000]

Needs PostgreSQL and Redis (BENCH_POSTGRES_URL, BENCH_REDIS_URL: give your own
Redis DB number); uses a scratch database, queue and channel prefix, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import live

TABLES = (
    "optimizer_run",
    "optimizer_runprogress",
    "optimizer_candidate",
    "optimizer_evaluation",
    "optimizer_runevent",
)
WORKER = "import sys, django; django.setup(); from optimizer.runs.runner import execute_run; print(execute_run(int(sys.argv[1])))"


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except FileNotFoundError:
        return None
    return None


def table_sizes() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        return {
            t: cursor.execute("SELECT pg_total_relation_size(%s)", [t]).fetchone()[0]
            for t in TABLES
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()

    env = {**live.ENV, "FRONTIER_QUEUE": live.TAG, "FRONTIER_RUNS_DIR": f"/tmp/{live.TAG}-runs"}
    os.environ.update(env)
    live.create_database()
    try:
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from optimizer.models import run_progress
        from optimizer.services import run_launch
        from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config

        call_command("migrate", verbosity=0)
        user = get_user_model().objects.create_user("bench", password="x")
        refund_verifier(user)
        run = run_launch(
            owner=user,
            config=run_config(refund_task_set(user), budget={"max_metric_calls": args.calls}),
        )
        before = table_sizes()
        started = time.perf_counter()
        worker = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(run.pk)],
            cwd=HERE.parent,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        samples: list[tuple[int, float]] = []  # (metric calls, worker RSS MB)
        half = None
        while worker.poll() is None:
            used = run_progress(run.pk).values_list("budget_used", flat=True).get()
            rss = rss_mb(worker.pid)
            if rss is not None:
                samples.append((used, rss))
            if half is None and used >= args.calls / 2:
                half = (used, table_sizes())
            time.sleep(0.5)
        out, err = worker.communicate()
        seconds = time.perf_counter() - started
        run.refresh_from_db()
        after = table_sizes()
        print(
            f"run of {run.budget_used} metric calls ({run.status}, {run.candidates.count()} candidates, "
            f"{run.last_seq} events) in {seconds:.0f} s; worker said {out.strip() or err.strip()[-500:]}"
        )
        if half is None:
            half = (run.budget_used, after)
        used_half, sizes_half = half
        print(f"{'table':<24} {'bytes / 1,000 calls':>20} {'1st half':>12} {'2nd half':>12}")
        for t in TABLES:
            whole = (after[t] - before[t]) * 1000 / max(1, run.budget_used)
            first = (sizes_half[t] - before[t]) * 1000 / max(1, used_half)
            second = (after[t] - sizes_half[t]) * 1000 / max(1, run.budget_used - used_half)
            print(f"{t:<24} {whole:>20,.0f} {first:>12,.0f} {second:>12,.0f}")
        marks = []
        for fraction in (0.1, 0.25, 0.5, 0.75, 1.0):
            hit = next(
                ((u, r) for u, r in samples if u >= fraction * run.budget_used),
                samples[-1] if samples else (0, 0),
            )
            marks.append(f"{fraction:.0%} ({hit[0]} calls): {hit[1]:.0f} MB")
        print("worker RSS at " + ", ".join(marks) + f"; load average {os.getloadavg()[0]:.1f}")
    finally:
        from django.db import connections

        connections.close_all()
        live.drop_database()
        import redis

        r = redis.Redis.from_url(live.REDIS)
        keys = list(r.scan_iter(f"{live.TAG}*"))
        if keys:
            r.delete(*keys)
        subprocess.run(["rm", "-rf", f"/tmp/{live.TAG}-runs"], check=False)


if __name__ == "__main__":
    main()
