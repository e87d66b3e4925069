"""Parallel proposals: P=1 vs P=4 proposals per iteration.

Run: ``.venv/bin/python bench/parallel_proposals.py [--repeats N] [--budget N]``.
A throwaway SQLite database in a temporary directory.

The example task sets "Facility requests" and "Refund tickets" with their
example verifiers; the demo task model answers in 100 ms
(simulated), the demo reflection proposes at once (its proposer is called one
proposal after another by gepa, so giving it a latency would charge P=4 for
something a real reflection model, asked concurrently, does not pay).
Concurrency 8, the same seed and budget for both. Prints, per setting, the wall
time, the accepted proposals and the wall time per accepted proposal, and the
time each run took to first reach the best val score that both settings reach.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import scratch

DATA_DIR = scratch.setup("parallel")

import django

django.setup()

import logging

from django.contrib.auth import get_user_model
from django.core.management import call_command

from optimizer.examples import load_examples
from optimizer.models import Run, TaskSet
from optimizer.runs import event_types as ev
from optimizer.runs.runner import execute_run
from optimizer.services import run_launch

logging.disable(logging.WARNING)
TASK_LM = {"provider": "demo", "model": "demo-task", "simulated_latency_ms": 100}
REFLECTION_LM = {"provider": "demo", "model": "demo-reflection"}
EXAMPLES = [
    ("Facility requests", "facility-extraction-quality"),
    ("Refund tickets", "refund-policy-quality"),
]


def one_run(owner, task_set: TaskSet, verifier: str, proposals: int, budget: int) -> dict:
    run = run_launch(
        owner=owner,
        config={
            "task_set_id": task_set.pk,
            "verifier_ids": [verifier],
            "task_lm": TASK_LM,
            "reflection_lm": REFLECTION_LM,
            "budget": {"max_metric_calls": budget},
            "concurrency": 8,
            "seed": 0,
            "parallel_proposals": proposals,
        },
    )
    started = time.time()
    execute_run(run.pk)
    wall = time.time() - started
    run = Run.objects.get(pk=run.pk)
    # When each val score was first published (the run's own event log), seconds from the start.
    reached = [
        (e.created_at.timestamp() - started, e.payload["val_score"])
        for e in run.events.filter(type=ev.CANDIDATE_NEW).order_by("seq")
    ]
    accepted = run.events.filter(type=ev.PROPOSAL, payload__accepted=True).count()
    proposals_made = run.events.filter(type=ev.PROPOSAL).count()
    return {
        "wall": wall,
        "accepted": accepted,
        "proposals": proposals_made,
        "reached": reached,
        "best": run.best_score,
        "metric_calls": run.budget_used,
        "status": run.status,
    }


def first_time(reached: list[tuple[float, float]], target: float) -> float | None:
    return next((t for t, score in reached if score >= target - 1e-9), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--budget", type=int, default=400)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_superuser("bench")
    load_examples(user=owner)
    for name, verifier in EXAMPLES:
        task_set = TaskSet.objects.get(name=name)
        compare(owner, task_set, verifier, args)


def compare(owner, task_set: TaskSet, verifier: str, args) -> None:
    results = {
        p: [one_run(owner, task_set, verifier, p, args.budget) for _ in range(args.repeats)]
        for p in (1, 4)
    }
    target = min(max(r["best"] for r in runs) for runs in results.values())
    print(
        f"Parallel proposals: {task_set.name!r}, demo task model at 100 ms, concurrency 8, budget {args.budget}, "
        f"seed 0, {args.repeats} run(s) each"
    )
    for p, runs in results.items():
        walls = [r["wall"] for r in runs]
        per_accepted = [r["wall"] / r["accepted"] for r in runs if r["accepted"]]
        times = [first_time(r["reached"], target) for r in runs]
        reached = [t for t in times if t is not None]
        print(
            f"   P={p}: wall {statistics.median(walls):5.1f} s; {runs[0]['proposals']} proposals, "
            f"{runs[0]['accepted']} accepted: "
            + (
                f"{statistics.median(per_accepted):5.2f} s per accepted proposal"
                if per_accepted
                else "none accepted"
            )
            + f"; best {max(r['best'] for r in runs):.3f}; val {target:.3f} first reached after "
            + (f"{statistics.median(reached):4.1f} s" if reached else "never")
            + f"  ({runs[0]['metric_calls']} metric calls)"
        )


if __name__ == "__main__":
    main()
