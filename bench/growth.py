"""Growth benchmark: what a long run costs the database
and the worker as it goes, and what our recording costs against bare gepa.

Runs demo-simulator runs of --calls metric calls (default 20,000) in a
worker process (the Celery task `optimizer.celery_tasks.run_optimization`, as a
pool process of `celery worker` runs it: on one CPU; with --unpinned as with
FRONTIER_WORKER_PIN_CPUS=0) on a scratch PostgreSQL database, and prints:

- per table, `pg_total_relation_size` growth per 1,000 metric calls, for the
  first and the second half of the first run (flat: the second half costs what
  the first did);
- the worker's RSS at 10 %, 25 %, 50 %, 75 % and 100 % of the budget, and its
  peak, for each simulated task-model latency of --latencies (default 0 and 20
  ms; the reflection is the demo's, 0 ms). With a model that answers at once
  gepa reports faster than the recorder commits: the engine then waits for it
  (optimizer/runs/recording_thread.py), so the worker's memory stays flat;
- wall time with the 0 ms model, --repeats times interleaved (every other
  round in the reverse order): our runner against bare gepa on the same
  budget. "Bare gepa" is gepa.optimize with our adapter (the same demo task
  model and verifier scoring), the demo simulator's proposer, the run's
  seed, minibatch size and budget, and nothing of ours around it: no
  recorder, no run_dir (no checkpoint), no stoppers, and on whichever CPUs
  the kernel gives it, as plain gepa's users run it. Medians with the spread
  (min-max), the ratio of the medians and the median of each round's ratio
  (on a machine whose speed drifts from one minute to the next the steadier
  of the two), and each side's CPU seconds (the worker process's,
  PostgreSQL's not counted): on a loaded machine wall time follows the CPU
  share a process gets, CPU time less so.

`--baseline PATH` runs the worker of another checkout (the code before a
change, on the same database schema) beside ours in every interleaved
round, so a change is measured against its ratio to bare gepa in one
invocation.

`--resumable` adds, once, plain gepa as its users configure a run they can
resume: the same bare gepa given a run_dir, where gepa.optimize saves its
whole state (a pickle and its JSON logs) after every iteration. Ours is
always resumable; this prints what that costs plain gepa (minutes at
20,000 calls: its saves grow with the run).

Usage:  .venv/bin/python bench/growth.py [--calls 20000] [--latencies 0,20] [--repeats 3]
        [--baseline PATH] [--resumable] [--unpinned]

Needs PostgreSQL and Redis (BENCH_POSTGRES_URL, BENCH_REDIS_URL: give your own
Redis DB number); uses a scratch database, queue and channel prefix, removed at
the end, also when the bench fails (the worker process is stopped first).
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

TABLES = (
    "optimizer_run",
    "optimizer_runprogress",
    "optimizer_candidate",
    "optimizer_evaluation",
    "optimizer_runevent",
)
# A Celery worker process warms up as it starts (optimizer/celery_tasks.py), before its
# first run, and its pool processes are set up to run each run on one CPU
# (pin_pool_child_runs); a --baseline checkout older than either does neither.
WORKER = (
    "import sys, time, django; django.setup(); from optimizer.runs import runner; "
    "getattr(runner, 'warm_up', lambda: None)(); "
    "from optimizer import celery_tasks; getattr(celery_tasks, 'pin_pool_child_runs', lambda: None)(); "
    "started, cpu = time.perf_counter(), time.process_time(); "
    "status = celery_tasks.run_optimization(int(sys.argv[1])); "
    "print(status, time.perf_counter() - started, time.process_time() - cpu)"
)


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


def bare_gepa(run_id: int, run_dir: str | None = None) -> None:
    """In a process of its own: gepa.optimize on run `run_id`'s tasks, model,
    scoring, seed and budget, with nothing of ours around it (but `run_dir`,
    given: gepa's own checkpoint); prints its time."""
    import django

    django.setup()
    import gepa

    from optimizer.config import parse_run_config, resolved_lm
    from optimizer.lm import build_candidate_proposer, build_lm
    from optimizer.models import Run
    from optimizer.runs.adapter import FrontierAdapter
    from optimizer.runs.runner import task_rows
    from verifiers_app.engine import compile_specs

    run = Run.objects.get(pk=run_id)
    config = parse_run_config(run.config)
    trainset = task_rows(run, config.splits.train)
    valset = task_rows(run, config.splits.val)
    adapter = FrontierAdapter(
        task_lm=build_lm(resolved_lm(config.task_lm)),
        scorer=compile_specs(
            run.verifier_specs,
            aggregator=config.aggregator,
            thresholds=config.thresholds.as_engine(),
        ),
        concurrency=config.concurrency,
    )
    proposer = build_candidate_proposer(resolved_lm(config.reflection_lm))

    class Quiet:
        def log(self, message: str) -> None:
            pass

    started, cpu = time.perf_counter(), time.process_time()
    result = gepa.optimize(
        seed_candidate=dict(config.seed_components),
        trainset=trainset,
        valset=valset,
        adapter=adapter,
        custom_candidate_proposer=proposer,
        reflection_minibatch_size=config.minibatch_size,
        candidate_selection_strategy=config.candidate_selection,
        max_metric_calls=run.budget_total,
        logger=Quiet(),
        seed=config.seed,
        track_best_outputs=False,
        display_progress_bar=False,
        run_dir=run_dir,
    )
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    adapter.close()
    print(f"{result.total_metric_calls} {seconds} {cpu}")


class Child:
    """A child process of the bench, its peak RSS sampled; stopped if the bench ends first."""

    def __init__(self, *args: str, checkout: Path = HERE.parent) -> None:
        env = dict(os.environ)
        if checkout != HERE.parent:  # another checkout's code (--baseline)
            env["PYTHONPATH"] = os.pathsep.join([str(checkout), str(checkout / "clients/python")])
        self.process = subprocess.Popen(
            [sys.executable, *args],
            cwd=checkout,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.peak = 0.0

    def sample(self) -> float | None:
        rss = rss_mb(self.process.pid)
        if rss is not None:
            self.peak = max(self.peak, rss)
        return rss

    def finish(self) -> tuple[str, str]:
        while self.process.poll() is None:
            self.sample()
            time.sleep(0.2)
        return self.process.communicate()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def last_fields(out: str) -> list[str]:
    """The first three fields of a child's last line of output ("" for those missing)."""
    return [*out.strip().rpartition("\n")[-1].split(" "), "", "", ""][:3]


def spread(values: list[float], unit: str = "s") -> str:
    return (
        f"median {statistics.median(values):.1f} {unit} "
        f"(min {min(values):.1f}, max {max(values):.1f}; runs {', '.join(f'{v:.1f}' for v in values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument(
        "--latencies", default="0,20", help="simulated task-model latencies in ms, comma-separated"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="interleaved wall-time runs (0 ms) of each side"
    )
    parser.add_argument(
        "--baseline", type=Path, help="another checkout whose worker runs beside ours"
    )
    parser.add_argument(
        "--resumable",
        action="store_true",
        help="once more: bare gepa with a run_dir (gepa's own checkpoint, which resume needs)",
    )
    parser.add_argument(
        "--unpinned",
        action="store_true",
        help="our workers (and a --baseline's) with FRONTIER_WORKER_PIN_CPUS=0",
    )
    parser.add_argument("--bare-run", type=int, help=argparse.SUPPRESS)  # the bare gepa child
    parser.add_argument("--bare-run-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_run is not None:
        bare_gepa(args.bare_run, args.bare_run_dir)
        return
    if args.unpinned:
        os.environ["FRONTIER_WORKER_PIN_CPUS"] = "0"  # the workers' setting; bare gepa has none

    children: list[Child] = []
    try:
        live.create_database()
        user, task_set = live.demo_operator()
        from optimizer.models import Run, run_progress
        from optimizer.services import run_launch
        from tests.optimizer.run_helpers import run_config

        def launch(latency_ms: float) -> Run:
            lm = {"provider": "demo", "model": "demo-task", "simulated_latency_ms": latency_ms}
            return run_launch(
                owner=user,
                config=run_config(task_set, task_lm=lm, budget={"max_metric_calls": args.calls}),
            )

        def frontier(
            latency_ms: float, *, growth: bool = False, checkout: Path = HERE.parent
        ) -> tuple[float, float, float]:
            """One run in a worker of `checkout`: prints its RSS (and table growth);
            returns (seconds, peak MB, CPU seconds)."""
            run = launch(latency_ms)
            before = table_sizes()
            worker = Child("-c", WORKER, str(run.pk), checkout=checkout)
            children.append(worker)
            samples: list[tuple[int, float]] = []  # (metric calls, worker RSS MB)
            half = None
            while worker.process.poll() is None:
                used = run_progress(run.pk).values_list("budget_used", flat=True).get()
                rss = worker.sample()
                if rss is not None:
                    samples.append((used, rss))
                if growth and half is None and used >= args.calls / 2:
                    half = (used, table_sizes())
                time.sleep(0.5)
            out, err = worker.finish()
            _, seconds, cpu = last_fields(out)
            if not cpu:
                raise SystemExit(f"the worker failed: {err.strip()[-2000:]}")
            run.refresh_from_db()
            after = table_sizes()
            who = "" if checkout == HERE.parent else f"baseline {checkout.name}, "
            print(
                f"{who}{latency_ms:g} ms model: run of {run.budget_used} metric calls ({run.status}, "
                f"{run.candidates.count()} candidates, {run.last_seq} events) in {float(seconds):.1f} s, "
                f"{float(cpu):.1f} CPU s"
            )
            if growth:
                if half is None:
                    half = (run.budget_used, after)
                used_half, sizes_half = half
                print(
                    f"  {'table':<24} {'bytes / 1,000 calls':>20} {'1st half':>12} {'2nd half':>12}"
                )
                for t in TABLES:
                    whole = (after[t] - before[t]) * 1000 / max(1, run.budget_used)
                    first = (sizes_half[t] - before[t]) * 1000 / max(1, used_half)
                    second = (after[t] - sizes_half[t]) * 1000 / max(1, run.budget_used - used_half)
                    print(f"  {t:<24} {whole:>20,.0f} {first:>12,.0f} {second:>12,.0f}")
            marks = []
            for fraction in (0.1, 0.25, 0.5, 0.75, 1.0):
                hit = next(
                    ((u, r) for u, r in samples if u >= fraction * run.budget_used),
                    samples[-1] if samples else (0, 0),
                )
                marks.append(f"{fraction:.0%} ({hit[0]} calls): {hit[1]:.0f} MB")
            print(
                f"  worker RSS at {', '.join(marks)}; peak {worker.peak:.0f} MB; "
                f"load average {os.getloadavg()[0]:.1f}"
            )
            return float(seconds), worker.peak, float(cpu)

        def bare(run: Run, run_dir: str | None = None) -> tuple[float, float]:
            """bare gepa in a process of its own (with gepa's checkpoint in
            `run_dir`, given): (seconds, CPU seconds)."""
            where = ["--bare-run-dir", run_dir] if run_dir else []
            child = Child(str(HERE / "growth.py"), "--bare-run", str(run.pk), *where)
            children.append(child)
            out, err = child.finish()
            calls, seconds, cpu = last_fields(out)
            if not cpu:
                raise SystemExit(f"bare gepa failed: {err.strip()[-2000:]}")
            what = "with a run_dir" if run_dir else "(0 ms)"
            print(
                f"  bare gepa {what}: {calls} metric calls in {float(seconds):.1f} s, "
                f"{float(cpu):.1f} CPU s; peak RSS {child.peak:.0f} MB"
            )
            return float(seconds), float(cpu)

        latencies = [float(x) for x in args.latencies.split(",") if x.strip()]
        peaks: dict[float, list[float]] = {}
        sides = {"our runner": HERE.parent}
        if args.baseline is not None:
            sides["baseline"] = args.baseline.resolve()
        times: dict[str, list[float]] = {name: [] for name in [*sides, "bare gepa"]}
        cpus: dict[str, list[float]] = {name: [] for name in times}
        # Interleaved, a busy neighbour slows every side; every other round in the
        # reverse order, so a machine that speeds up or slows down favours none.
        for repeat in range(max(1, args.repeats)):
            order = [*sides, "bare gepa"]
            for name in order if repeat % 2 == 0 else order[::-1]:
                if name == "bare gepa":
                    seconds, cpu = bare(launch(0.0))
                else:
                    ours = name == "our runner"
                    growth = ours and repeat == 0
                    seconds, peak, cpu = frontier(0.0, growth=growth, checkout=sides[name])
                    if ours:
                        peaks.setdefault(0.0, []).append(peak)
                times[name].append(seconds)
                cpus[name].append(cpu)
        for latency in latencies:
            if latency != 0.0:
                peaks.setdefault(latency, []).append(frontier(latency)[1])
        resumable = None
        if args.resumable:
            resumable = bare(launch(0.0), run_dir=str(live.RUNS_DIR / "bare-gepa"))[0]
        print(f"\nworker peak RSS over {args.calls} metric calls (target <= 300 MB):")
        for latency, values in sorted(peaks.items()):
            print(f"  {latency:g} ms model: {spread(values, 'MB')}")
        bare_times = times["bare gepa"]
        for label, values in (("wall time", times), ("CPU time", cpus)):
            pinned = " (our workers unpinned)" if args.unpinned else ""
            print(f"{label}, 0 ms model, {len(bare_times)} interleaved runs of each{pinned}:")
            for name, seconds in values.items():
                print(f"  {name + ':':<12} {spread(seconds)}")
        if resumable is not None:
            print(
                f"  bare gepa with a run_dir (once): {resumable:.1f} s, "
                f"{resumable / statistics.median(bare_times):.1f}x bare gepa's median; our runner "
                f"takes {statistics.median(times['our runner']) / resumable:.2f}x its time"
            )
        # Against the baseline too: within a round the two checkouts meet the same machine.
        pairs = [(name, "bare gepa") for name in sides]
        if args.baseline is not None:
            pairs.append(("our runner", "baseline"))
        for name, other in pairs:
            for label, values, plain in (
                ("wall", times[name], times[other]),
                ("CPU", cpus[name], cpus[other]),
            ):
                target = " (target <= 1.2x)" if label == "wall" and other == "bare gepa" else ""
                rounds = [o / b for o, b in zip(values, plain, strict=True)]
                print(
                    f"  {name} / {other}, {label}: "
                    f"{statistics.median(values) / statistics.median(plain):.2f}x{target}; "
                    f"median of the rounds {statistics.median(rounds):.2f}x; per round "
                    f"{', '.join(f'{r:.2f}' for r in rounds)}"
                )
    finally:  # clean_up drops the database WITH (FORCE), this process's connections too
        scratch.run_each(*(child.stop for child in children), live.clean_up)


if __name__ == "__main__":
    main()
