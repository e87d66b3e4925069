"""A fresh Celery worker: its first run's time and its processes' memory.

For each pool of --pools (default prefork and threads), --rounds times: starts
`celery -A dashboard worker --pool <pool> --concurrency <n>` (as
docker-compose.yml runs it, on a queue of its own), queues one demo run of
--calls metric calls (0 ms simulated task model) at once, and when the run has
completed prints its own time (finished_at minus started_at, so the worker's
start-up is not in it) and, for each process of the worker (the parent and
each pool child), its RSS, PSS and private memory (/proc/<pid>/smaps_rollup:
PSS shares each page among the processes mapping it; private is what only
that process holds). Then it stops the worker. Medians of the rounds;
`--baseline PATH` runs another checkout's worker in the same rounds,
alternated. Each side queues its runs with its own code.

Usage:  .venv/bin/python bench/worker_start.py [--pools prefork,threads]
        [--concurrency 2] [--rounds 3] [--calls 200] [--baseline PATH]

Needs PostgreSQL and Redis (BENCH_POSTGRES_URL, BENCH_REDIS_URL: give your own
Redis DB number); uses a scratch database, queue and key prefix, removed at
the end, also when the bench fails or is stopped (the workers are stopped first).
A baseline older than FRONTIER_BROKER_KEY_PREFIX leaves `_kombu.binding_deadlines`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import live
import scratch

FIELDS = ("Rss", "Pss", "Private")

# Each side queues its runs with its own code: the checkout's settings name the
# Celery keys its worker reads (one that predates FRONTIER_BROKER_KEY_PREFIX
# names them without the bench's prefix). Prints the run's id.
LAUNCH = """
import sys

import django

django.setup()
from django.contrib.auth import get_user_model

from optimizer.models import TaskSet
from optimizer.services import run_launch
from tests.optimizer.run_helpers import run_config

user_id, task_set_id, calls = map(int, sys.argv[1:])
lm = {"provider": "demo", "model": "demo-task", "simulated_latency_ms": 0}
config = run_config(TaskSet.objects.get(pk=task_set_id), task_lm=lm, budget={"max_metric_calls": calls})
print(run_launch(owner=get_user_model().objects.get(pk=user_id), config=config).pk)
"""


def memory_mb(pid: int) -> dict[str, float] | None:
    """RSS, PSS and private (clean + dirty) memory of a process, in MB (None:
    it has just exited)."""
    found = dict.fromkeys(FIELDS, 0.0)
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    for line in text.splitlines()[1:]:
        key, value = line.split(":", 1)
        name = "Private" if key.startswith("Private_") else key
        if name in found:
            found[name] += int(value.split()[0]) / 1024
    return found


def worker_pids(parent: int) -> list[int]:
    """The worker's parent, then its pool children."""
    children = subprocess.run(
        ["pgrep", "-P", str(parent)], check=False, capture_output=True, text=True
    )
    return [parent, *map(int, children.stdout.split())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pools", default="prefork,threads")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument(
        "--baseline", type=Path, help="another checkout whose worker runs beside ours"
    )
    args = parser.parse_args()

    workers: list[subprocess.Popen] = []
    try:
        live.create_database()
        user, task_set = live.demo_operator()
        from optimizer.models import Run

        live.RUNS_DIR.mkdir(parents=True, exist_ok=True)  # the workers' logs too
        sides = {"ours": HERE.parent}
        if args.baseline is not None:
            sides["baseline"] = args.baseline.resolve()

        def first_run(pool: str, checkout: Path, name: str) -> tuple[float, list[dict[str, float]]]:
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join([str(checkout), str(checkout / "clients/python")])
            # A file, not a pipe nobody reads while the worker runs.
            log = live.RUNS_DIR / f"{name}.log"
            with log.open("w") as stderr:
                worker = subprocess.Popen(
                    [str(Path(sys.executable).parent / "celery"), "-A", "dashboard", "worker",
                     "--pool", pool, "--concurrency", str(args.concurrency), "--queues", live.TAG,
                     "--hostname", f"{name}@{live.TAG}", "--loglevel", "WARNING"],
                    cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
                    start_new_session=True,
                )  # fmt: skip
            workers.append(worker)
            # Queued at once: the worker takes it when it is up, and the run's own
            # timestamps leave the start-up out.
            launch = [sys.executable, "-c", LAUNCH, str(user.pk), str(task_set.pk), str(args.calls)]
            launched = subprocess.run(
                launch, check=False, cwd=checkout, env=env, capture_output=True, text=True,
                timeout=120,  # a launch takes ~2 s; one that hangs ends the bench, cleaned up
            )  # fmt: skip
            if launched.returncode:
                raise SystemExit(f"{name}: the run was not launched: {launched.stderr[-2000:]}")
            run = Run.objects.get(pk=int(launched.stdout.split()[-1]))
            deadline = time.monotonic() + 300
            while run.finished_at is None:
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        f"run {run.pk} did not finish ({run.status}): {log.read_text()[-2000:]}"
                    )
                time.sleep(0.2)
                run.refresh_from_db()
            if run.status != "completed":
                raise SystemExit(f"run {run.pk} ended {run.status}: {log.read_text()[-2000:]}")
            memory = [m for pid in worker_pids(worker.pid) if (m := memory_mb(pid)) is not None]
            scratch.stop(worker)
            return (run.finished_at - run.started_at).total_seconds(), memory

        for pool in args.pools.split(","):
            seconds: dict[str, list[float]] = {side: [] for side in sides}
            memories: dict[str, list[list[dict[str, float]]]] = {side: [] for side in sides}
            for repeat in range(args.rounds):
                for side, checkout in sides.items():
                    run_s, memory = first_run(pool, checkout, f"{side}-{pool}-{repeat}")
                    seconds[side].append(run_s)
                    memories[side].append(memory)
            print(
                f"\n{pool} pool, --concurrency {args.concurrency}, {args.rounds} rounds, medians (min-max):"
            )
            for side in sides:
                values = seconds[side]
                print(
                    f"  {side}: first run of {args.calls} calls {statistics.median(values):.3f} s "
                    f"({min(values):.3f}-{max(values):.3f})"
                )
                # A pool child that exited before it was read is missing from its round.
                processes = min(len(m) for m in memories[side])
                for index in range(processes):
                    what = (
                        f"child {index}" if index else "parent" if pool == "prefork" else "worker"
                    )
                    figures = ", ".join(
                        f"{field} {statistics.median(m[index][field] for m in memories[side]):.1f}"
                        for field in FIELDS
                    )
                    print(f"    {what}: {figures} MB")
                total = statistics.median(sum(p["Pss"] for p in m) for m in memories[side])
                print(f"    all {processes} processes: PSS {total:.1f} MB")
    finally:
        live.clean_up(workers)


if __name__ == "__main__":
    main()
