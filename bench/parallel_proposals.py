"""Parallel proposals: does P=4 reach P=1's best val score in half the wall time?

Run: ``.venv/bin/python bench/parallel_proposals.py [--seeds N] [--budget N]
[--task-ms MS] [--reflection-ms MS] [--skip-gepa]``. A throwaway SQLite
database in a temporary directory.

The example task sets "Facility requests" and "Refund tickets" with their
example verifiers; the demo task model answers in ``--task-ms`` (100 ms) and
the demo reflection in ``--reflection-ms`` (2 s: a real reflection model takes
seconds). Concurrency 8, minibatch 3, the same budget for P=1 and P=4, seeds
0..N-1 (each seed: P=1 then P=4, ours then plain gepa).

Per seed: the best val score P=1 reaches within the budget, the wall time
each setting takes to first reach it (from the start of the run, the seed's
evaluation included), and the ratio P=4 / P=1. P=4 is given P times the
budget (a round spends P proposals' metric calls: the question is wall time)
and is stopped once it reaches P=1's best or has run as long as P=1 took to
reach it ("not by P=1's time": slower than P=1). Then the medians and the
spread (min-max) of the ratios. Target: ≤ 0.5.

Ours: the whole runner (`execute_run`), a score counted when its candidate's
event is written. Plain gepa: `gepa.optimize` with our adapter at the same
concurrency and the same rows, seed, selector and minibatch size, the demo
reflection answering gepa's own reflection prompt (its P=4 round sent at once
through the reflection LM's ``batch_complete``, as litellm does for gepa's
users); P=4 is gepa 0.1.4's ``IndependentSampling(4)``, as in our runs. A
score counts at gepa's ``on_valset_evaluated``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import scratch

DATA_DIR = scratch.setup("parallel")

import django

django.setup()

import logging

import gepa
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from gepa.strategies.proposal_sampling import IndependentSampling

from optimizer.config import parse_run_config
from optimizer.examples import load_examples
from optimizer.lm import build_lm
from optimizer.lm.config import coerce_config
from optimizer.lm.simulator import DemoReflectionLM
from optimizer.models import Run, TaskSet
from optimizer.runs import event_types as ev
from optimizer.runs.adapter import FrontierAdapter
from optimizer.runs.runner import execute_run, task_rows
from optimizer.services import run_launch
from verifiers_app.engine import compile_specs

logging.disable(logging.WARNING)
EXAMPLES = [
    ("Facility requests", "facility-extraction-quality"),
    ("Refund tickets", "refund-policy-quality"),
]
CONCURRENCY = 8
MINIBATCH = 3
P = (1, 4)


@dataclass(frozen=True)
class Point:
    """One candidate's val score, when it was first known, and where it stands."""

    seconds: float  # from the start of the run
    score: float
    iteration: int  # gepa's iteration (a round with P=4) that proposed it; 0 for the seed
    depth: int  # generations from the seed along its first parents


Reached = list[Point]  # in the order the scores became known


def with_depth(rows: list[tuple[float, float, int, int, list[int]]]) -> Reached:
    """(seconds, score, iteration, index, parents) rows to points with their depth."""
    depth: dict[int, int] = {}
    points = []
    for seconds, score, iteration, index, parents in rows:
        depth[index] = depth.get(parents[0], -1) + 1 if parents else 0
        points.append(Point(seconds, score, iteration, depth[index]))
    return points


@dataclass(frozen=True)
class Goal:
    """P=1's best val score and the time it took to first reach it."""

    score: float
    seconds: float

    def reached(self, reached: Reached, started: float) -> bool:
        return time.time() - started >= self.seconds or any(
            point.score >= self.score - 1e-9 for point in reached
        )


class Quiet:
    def log(self, message: str) -> None:
        pass


def lms(args) -> tuple[dict, dict]:
    task = {"provider": "demo", "model": "demo-task", "simulated_latency_ms": args.task_ms}
    reflection = {
        "provider": "demo",
        "model": "demo-reflection",
        "simulated_latency_ms": args.reflection_ms,
    }
    return task, reflection


def ours(
    owner, task_set: TaskSet, verifier: str, p: int, seed: int, args, goal: Goal | None
) -> tuple[Run, Reached]:
    task_lm, reflection_lm = lms(args)
    run = run_launch(
        owner=owner,
        config={
            "task_set_id": task_set.pk,
            "verifier_ids": [verifier],
            "task_lm": task_lm,
            "reflection_lm": reflection_lm,
            "budget": {"max_metric_calls": args.budget * (p if goal else 1)},
            "concurrency": CONCURRENCY,
            "minibatch_size": MINIBATCH,
            "seed": seed,
            "parallel_proposals": p,
        },
    )
    started = time.time()
    done = threading.Event()
    if goal is not None:
        watcher = threading.Thread(target=watch, args=(run.pk, goal, started, done))
        watcher.start()
    try:
        execute_run(run.pk)
    finally:
        done.set()
    if goal is not None:
        watcher.join()
    run = Run.objects.get(pk=run.pk)
    # When each val score was first published (the run's own event log).
    reached = with_depth(
        [
            (
                e.created_at.timestamp() - started,
                e.payload["val_score"],
                e.payload["iteration"] or 0,
                e.payload["index"],
                [p for p in e.payload["parents"] if p is not None],
            )
            for e in run.events.filter(type=ev.CANDIDATE_NEW).order_by("seq")
        ]
    )
    return run, reached


def watch(run_id: int, goal: Goal, started: float, done: threading.Event) -> None:
    """Stop the run (between iterations, as a user would) once it has reached the
    goal's score or run for the goal's time: after that the verdict cannot change."""
    try:
        while not done.wait(0.25):
            score = Run.objects.filter(pk=run_id).values_list("best_score", flat=True).get()
            if (score or 0) >= goal.score - 1e-9 or time.time() - started >= goal.seconds:
                Run.objects.filter(pk=run_id).update(stop_requested=True)
                return
    finally:
        connection.close()


def plain_gepa(run: Run, p: int, seed: int, args, goal: Goal | None) -> Reached:
    """gepa.optimize on the rows, verifiers and seed prompt of `run` (one of ours)."""
    config = parse_run_config(run.config)
    task_lm, reflection_lm = lms(args)
    reflection = DemoReflectionLM(coerce_config(reflection_lm))
    width = min(CONCURRENCY, p)

    def batch_complete(messages_list: list[list[dict[str, Any]]]) -> list[str]:
        with ThreadPoolExecutor(max_workers=max(1, min(width, len(messages_list)))) as pool:
            return list(pool.map(reflection, messages_list))

    reflection.batch_complete = batch_complete  # type: ignore[attr-defined]
    adapter = FrontierAdapter(
        task_lm=build_lm(task_lm),
        scorer=compile_specs(run.verifier_specs, aggregator=config.aggregator),
        concurrency=CONCURRENCY,
    )
    rows: list[tuple[float, float, int, int, list[int]]] = []
    reached: Reached = []
    started = time.time()

    class Clock:
        def on_valset_evaluated(self, event) -> None:
            parents = [p for p in event["parent_ids"] if p is not None]
            rows.append(
                (
                    time.time() - started,
                    event["average_score"],
                    event["iteration"],
                    event["candidate_idx"],
                    parents,
                )
            )
            reached[:] = with_depth(rows)

    try:
        gepa.optimize(
            seed_candidate=dict(config.seed_components),
            trainset=task_rows(run, config.splits.train),
            valset=task_rows(run, config.splits.val),
            adapter=adapter,
            reflection_lm=reflection,
            reflection_minibatch_size=MINIBATCH,
            max_metric_calls=args.budget * (p if goal else 1),
            stop_callbacks=[lambda state: goal is not None and goal.reached(reached, started)],
            logger=Quiet(),
            callbacks=[Clock()],
            track_best_outputs=False,
            display_progress_bar=False,
            seed=seed,
            **({"sampling_strategy": IndependentSampling(p)} if p > 1 else {}),
        )
    finally:
        adapter.close()
    return reached


def goal_of(reached: Reached) -> Goal:
    score = best(reached)
    seconds = first_time(reached, score)
    assert seconds is not None
    return Goal(score, seconds)


def first(reached: Reached, target: float) -> Point | None:
    return next((point for point in reached if point.score >= target - 1e-9), None)


def first_time(reached: Reached, target: float) -> float | None:
    point = first(reached, target)
    return None if point is None else point.seconds


def best(reached: Reached) -> float:
    return max(point.score for point in reached)


def path_text(point: Point | None) -> str:
    """How the score was reached: generations deep, after how many iterations, at what pace."""
    if point is None:
        return ""
    pace = point.seconds / point.iteration if point.iteration else 0.0
    return f" (depth {point.depth}, iteration {point.iteration}, {pace:.1f} s per iteration)"


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def ratio_text(ratios: list[float | None]) -> str:
    """Median and spread; a seed where P=4 had not got there by P=1's time (None)
    counts as slower than P=1."""
    finite = [r for r in ratios if r is not None]
    slower = len(ratios) - len(finite)
    ordered = sorted(finite) + [float("inf")] * slower
    median = statistics.median(ordered)
    text = ">1x" if median == float("inf") else f"{median:.2f}x"
    low = f"{min(finite):.2f}x" if finite else ">1x"
    high = ">1x" if slower else f"{max(finite):.2f}x"
    verdict = "meets" if median <= 0.5 else "misses"
    return (
        f"median {text} ({low}-{high}), {slower} of {len(ratios)} not by P=1's time; "
        f"{verdict} <= 0.5x"
    )


def report(engine: str, per_seed: list[dict[int, Reached]]) -> None:
    ratios: list[float | None] = []
    walls: dict[int, list[float]] = {p: [] for p in P}
    for seed, reached in enumerate(per_seed):
        target = best(reached[1])
        times = {p: first_time(reached[p], target) for p in P}
        one, four = times[1], times[4]
        ratio = four / one if four is not None and one else None
        ratios.append(ratio)
        for p in P:
            if times[p] is not None:
                walls[p].append(times[p])
        four_text = f"{four:5.1f} s" if four is not None else "not by P=1's time"
        paths = {p: path_text(first(reached[p], target)) for p in P}
        print(
            f"   {engine} seed {seed}: P=1 best {target:.3f} after {one:5.1f} s{paths[1]}; "
            f"P=4 best {best(reached[4]):.3f}, P=1's best after {four_text}{paths[4]}"
            + (f" = {ratio:.2f}x" if ratio is not None else "")
        )
    print(
        f"   {engine}: time to P=1's best, P=1 {spread(walls[1])} s"
        + (f", P=4 {spread(walls[4])} s" if walls[4] else ", P=4 not by P=1's time")
        + f"; P=4 / P=1 {ratio_text(ratios)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=150)
    parser.add_argument("--task-ms", type=float, default=100)
    parser.add_argument("--reflection-ms", type=float, default=2000)
    parser.add_argument("--skip-gepa", action="store_true")
    parser.add_argument("--only", choices=[name for name, _ in EXAMPLES])
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_superuser("bench")
    load_examples(user=owner)
    started = time.time()
    for name, verifier in EXAMPLES:
        if args.only and name != args.only:
            continue
        task_set = TaskSet.objects.get(name=name)
        print(
            f"Parallel proposals: {name!r}, task model {args.task_ms:.0f} ms, reflection "
            f"{args.reflection_ms:.0f} ms, concurrency {CONCURRENCY}, minibatch {MINIBATCH}, "
            f"budget {args.budget} metric calls, seeds 0-{args.seeds - 1}",
            flush=True,
        )
        ours_runs: list[dict[int, Reached]] = []
        gepa_runs: list[dict[int, Reached]] = []
        for seed in range(args.seeds):
            run, one = ours(owner, task_set, verifier, 1, seed, args, None)
            _, four = ours(owner, task_set, verifier, 4, seed, args, goal_of(one))
            ours_runs.append({1: one, 4: four})
            if not args.skip_gepa:
                one = plain_gepa(run, 1, seed, args, None)
                four = plain_gepa(run, 4, seed, args, goal_of(one))
                gepa_runs.append({1: one, 4: four})
        report("ours      ", ours_runs)
        if gepa_runs:
            report("plain gepa", gepa_runs)
        print(f"   ({time.time() - started:.0f} s so far)", flush=True)


if __name__ == "__main__":
    main()
