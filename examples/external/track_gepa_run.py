"""A plain `gepa.optimize` run, in your own process, watched live in Frontier.

    pip install ./clients/python            # frontier-tracker (needs only gepa)
    python examples/external/track_gepa_run.py --url http://127.0.0.1:8000 --token ft_…

The adapter and both "models" are deterministic stand-ins so the example runs
offline: the task model answers with the phrases the instructions quote, a
task scores 1 when the answer holds its required phrase, and the reflection
model adds a rule quoting a phrase the feedback asked for. Replace them with
your own adapter and `reflection_lm`; the two tracker lines stay the same.
Prints a JSON summary on stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time

import gepa
from gepa import EvaluationBatch

from frontier_tracker import FrontierTracker

PHRASES = [
    "refund",
    "receipt",
    "30 days",
    "store credit",
    "manager",
    "apology",
    "tracking number",
    "warranty",
]
TASKS = [
    {"task_id": f"t{n}", "input": f"Customer question number {n}", "must_mention": phrase}
    for n, phrase in enumerate(PHRASES)
]


class PhraseAdapter:
    """gepa's adapter protocol, duck-typed (it must define propose_new_texts = None: Frontier's docs/gepa-notes.md §2)."""

    propose_new_texts = None

    def __init__(self, delay: float = 0.0):
        self.delay = delay

    def evaluate(self, batch, candidate, capture_traces=False):
        if self.delay:
            time.sleep(self.delay)
        quoted = re.findall(r'"([^"]+)"', candidate["instructions"])
        outputs, scores, trajectories = [], [], []
        for task in batch:
            answer = f"Re: {task['input']}. " + " ".join(q for q in quoted if q in PHRASES)
            ok = task["must_mention"] in answer
            outputs.append(answer)
            scores.append(1.0 if ok else 0.0)
            trajectories.append(
                {"feedback": "" if ok else f'The answer must mention "{task["must_mention"]}".'}
            )
        return EvaluationBatch(
            outputs=outputs, scores=scores, trajectories=trajectories if capture_traces else None
        )

    def make_reflective_dataset(self, candidate, eval_batch, components_to_update):
        records = [
            {"Inputs": out, "Generated Outputs": out, "Feedback": traj["feedback"] or "Correct."}
            for out, traj in zip(eval_batch.outputs, eval_batch.trajectories or [])
        ]
        return dict.fromkeys(components_to_update, records)


_calls = {"n": 0}


def reflection_lm(prompt: str) -> str:
    """Keeps the current instructions and adds the first phrase the feedback asks
    for; every third call it forgets the rules instead (gepa rejects that one)."""
    _calls["n"] += 1
    if _calls["n"] % 3 == 0:
        return "```\nAnswer the customer briefly.\n```"
    current = re.search(r"```\n?(.*?)```", prompt, re.DOTALL)
    text = current.group(1).strip() if current else "Answer the customer."
    for phrase in re.findall(r'must mention \\?"([^"\\]+)\\?"', prompt):
        if f'"{phrase}"' not in text:
            return f'```\n{text}\nAlways mention "{phrase}".\n```'
    return f"```\n{text}\n```"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="the Frontier server (default: $FRONTIER_URL)")
    parser.add_argument("--token", help="an API token of yours (default: $FRONTIER_TOKEN)")
    parser.add_argument("--name", default="PhraseAdapter example")
    parser.add_argument("--budget", type=int, default=120, help="max metric calls")
    parser.add_argument(
        "--delay", type=float, default=0.0, help="seconds per evaluate() call (to watch it move)"
    )
    parser.add_argument(
        "--run-dir",
        default=None,
        help="gepa's run_dir (checkpoint; `optimize import-gepa` replays it)",
    )
    parser.add_argument("--task-set-id", type=int, default=None)
    parser.add_argument(
        "--done-file",
        default=None,
        help="written when gepa.optimize returns (before the tracker flushes)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    # No --url / --token: the tracker reads FRONTIER_URL and FRONTIER_TOKEN.
    tracker = FrontierTracker(
        args.url, args.token, name=args.name, valset=TASKS, task_set_id=args.task_set_id
    )

    class QuietLogger:
        def log(self, message: str) -> None:
            pass

    started = time.monotonic()
    result = gepa.optimize(
        seed_candidate={"instructions": "Answer the customer."},
        trainset=TASKS,
        valset=TASKS,
        adapter=PhraseAdapter(args.delay),
        reflection_lm=reflection_lm,
        max_metric_calls=args.budget,
        reflection_minibatch_size=2,
        callbacks=[tracker],
        stop_callbacks=[tracker.stopper],
        run_dir=args.run_dir,
        logger=QuietLogger(),
        seed=0,
        display_progress_bar=False,
    )
    optimize_seconds = time.monotonic() - started
    if args.done_file:
        with open(args.done_file, "w") as done:
            done.write("gepa.optimize returned")
    delivered = tracker.close()
    best = result.val_aggregate_scores[result.best_idx]
    print(
        json.dumps(
            {
                "run_id": tracker.run_id,
                "best_score": best,
                "candidates": len(result.candidates),
                "optimize_seconds": round(optimize_seconds, 2),
                "metric_calls": result.total_metric_calls,
                "stopped": tracker.stop_requested,
                "delivered": delivered,
                "dropped": tracker.dropped,
                "batches": tracker.sent_batches,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
