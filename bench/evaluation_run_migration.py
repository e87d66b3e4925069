"""What migration 0022_evaluation_run (Evaluation.run: added, backfilled,
made NOT NULL) and 0023_evaluation_csv_order_by_run (the CSV export's index
led by the run) cost on a big table that is in use meanwhile.

Builds --runs runs of --candidates × --tasks val evaluations (bench/export.py's
loader), migrates back to 0021 (the column and the new index gone, the old
index back; the table vacuumed and analysed), then migrates forward again
while two probe connections use the table every --probe-ms: a reader (one
evaluation by primary key) and a writer (an UPDATE of one random evaluation,
rolled back). Prints each statement the migrations ran (the backfill's
batches summed up) with its time, and the probes' waits: median, p99 and
max, and the slowest with what the migration was running then.

    .venv/bin/python bench/evaluation_run_migration.py [--runs 2] [--candidates 1000] [--tasks 1000]

Needs PostgreSQL (BENCH_POSTGRES_URL); uses a scratch database, dropped at
the end, also when the bench fails or is stopped (bench/scratch.py).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import live
import scratch


class Statements:
    """A Django execute wrapper that times every statement the migrations run."""

    def __init__(self):
        self.rows: list[tuple[float, float, str]] = []  # start, seconds, sql
        self.now = "(between statements)"

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        self.now = " ".join(sql.split())[:90]
        try:
            return execute(sql, params, many, context)
        finally:
            self.rows.append((started, time.perf_counter() - started, self.now))
            self.now = "(between statements)"


def probe(kind: str, top: int, every: float, stop: threading.Event, log: list, doing) -> None:
    import psycopg

    with psycopg.connect(live.DATABASE_URL, autocommit=True) as conn:
        while not stop.is_set() and not scratch.stopping.is_set():
            pk = random.randint(1, top)
            started = time.perf_counter()
            during = doing()
            if kind == "read":
                conn.execute("SELECT score FROM optimizer_evaluation WHERE id = %s", [pk])
            else:
                with conn.transaction(force_rollback=True):
                    conn.execute(
                        "UPDATE optimizer_evaluation SET score = score WHERE id = %s", [pk]
                    )
            log.append((started, time.perf_counter() - started, during))
            time.sleep(every)


def summary(values: list[float]) -> str:
    return (
        f"median {statistics.median(values) * 1000:.1f} ms, p99 {live.pct(values, 0.99) * 1000:.1f} ms, "
        f"max {max(values) * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--candidates", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--probe-ms", type=float, default=50)
    args = parser.parse_args()
    os.environ.update(live.ENV)
    try:
        live.create_database()
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connection
        from export import build_big_run  # bench/export.py

        call_command("migrate", verbosity=0)
        user = get_user_model().objects.create_user("bench", password="x")
        for n in range(args.runs):
            started = time.perf_counter()
            build_big_run(user, candidates=args.candidates, tasks=args.tasks, megabytes=8)
            print(
                f"built run {n + 1}: {args.candidates} × {args.tasks} in {time.perf_counter() - started:.0f} s",
                flush=True,
            )
        call_command("migrate", "optimizer", "0021", verbosity=0)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE optimizer_evaluation")
            cursor.execute("SELECT count(*), max(id) FROM optimizer_evaluation")
            count, top = cursor.fetchone()
            cursor.execute("SELECT pg_size_pretty(pg_total_relation_size('optimizer_evaluation'))")
            size = cursor.fetchone()[0]
        print(f"back at 0021: {count:,} evaluations, {size} with indexes", flush=True)

        statements = Statements()
        stop = threading.Event()
        logs: dict[str, list] = {"read": [], "write": []}
        probes = [
            threading.Thread(
                target=probe,
                args=(kind, top, args.probe_ms / 1000, stop, logs[kind], lambda: statements.now),
            )
            for kind in logs
        ]
        for thread in probes:
            thread.start()
        try:
            time.sleep(2)
            started = time.perf_counter()
            with connection.execute_wrapper(statements):
                call_command("migrate", "optimizer", "0022", verbosity=0)
                at_0022 = time.perf_counter()
                call_command("migrate", "optimizer", "0023", verbosity=0)
            ended = time.perf_counter()
            time.sleep(2)
        finally:
            stop.set()
            for thread in probes:
                thread.join()
        print(f"0022 in {at_0022 - started:.1f} s, 0023 in {ended - at_0022:.1f} s; statements:")
        batches = [seconds for _, seconds, sql in statements.rows if sql.startswith("UPDATE")]
        for _, seconds, sql in statements.rows:
            if not sql.startswith(("UPDATE", "SET LOCAL", "SELECT")) and (
                seconds > 0.001 or "ALTER" in sql or "INDEX" in sql
            ):
                print(f"  {seconds * 1000:9.1f} ms  {sql}")
        if batches:
            print(
                f"  backfill: {len(batches)} batches, {sum(batches):.1f} s in all; per batch {summary(batches)}"
            )
        for kind, log in logs.items():
            before = [s for t, s, _ in log if t < started]
            during = [s for t, s, _ in log if started <= t < ended]
            print(
                f"{kind} probe: before {summary(before)} ({len(before)}); during {summary(during)} ({len(during)})"
            )
            for t, seconds, doing in sorted(log, key=lambda row: -row[1])[:3]:
                print(f"  waited {seconds * 1000:.0f} ms at +{t - started:.1f} s during: {doing}")
    finally:
        live.clean_up(redis=False)


if __name__ == "__main__":
    main()
