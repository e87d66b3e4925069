"""What counting tokens and money costs (target: at most 2 % of a run's time): scoring + recording
with cost accounting on vs off.

Run: ``.venv/bin/python bench/cost_accounting.py [--rounds N] [--tasks N]``. A
throwaway SQLite database is created in a temporary directory (migrations
applied) and removed at the end.

One round = one evaluation batch as the runner does it: the adapter answers and
scores N tasks (the demo simulator, no latency, concurrency 4), the recorder
writes the N Evaluation rows, and the run's counters are updated as a budget
event does. "on": the task model is wrapped in MeteredLM, each evaluation runs
in a meter tally, the run's guard checks every batch, and the run's usage
JSON and cost are written with the budget; "on + cost cap" also reserves each
call against a cost cap (one more lock per call). "off": the bare model, no
meter, no guard, only budget_used written. The order rotates each round; each of `--repeats` repeats
prints the ratios of the median wall and CPU times (on / off), then the median
ratio over the repeats and their spread (target: on ≤ 1.02 × off). On a loaded
machine trust the CPU column: wall time there mostly measures the neighbours.

It runs with DEBUG off, as a worker beside PostgreSQL and Redis runs (DEBUG is
off as soon as services are configured). `--debug` measures the development
mode instead (`make demo` without services): there Django logs every query and,
on SQLite, quotes each parameter through the database for the log, which makes
writing the run's usage JSON ~0.45 ms dearer per budget update (measured:
0.64 ms vs 0.15 ms for a counter-only write; 0.20 ms with DEBUG off).
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
import scratch  # noqa: E402

DATA_DIR = scratch.setup("cost", debug="--debug" in sys.argv)

import django  # noqa: E402

django.setup()

import logging  # noqa: E402

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from optimizer.adapter import FrontierAdapter  # noqa: E402
from optimizer.budget import MeteredLM, Price, BudgetGuard, UsageMeter  # noqa: E402
from optimizer.lm import build_lm  # noqa: E402
from optimizer.models import Candidate, Run, Split, run_progress  # noqa: E402
from optimizer.recorder import RunRecorder  # noqa: E402
from verifiers_app.engine import compile_specs  # noqa: E402

logging.disable(logging.WARNING)
SPEC = {
    "id": "refund", "name": "Refund", "kind": "native",
    "checks": [
        {"id": "window", "type": "contains", "params": {"value": "30 days"}},
        {"id": "expectations", "type": "task_expectations"},
    ],
}
PROMPT = {"instructions": 'Answer refund questions. Always mention "30 days" and "receipt".'}


def rows(n: int) -> list[dict]:
    return [
        {
            "task_id": f"t{i}", "input": f"Question {i}: can I return the item I bought {i} days ago?",
            "metadata": {"expectations": {"mustMention": [{"text": "receipt", "message": "Ask for the receipt"}]}},
        }
        for i in range(n)
    ]


def contender(run: Run, candidate: Candidate, *, accounting: bool, cap: float | None = None):
    lm = build_lm({"provider": "demo", "model": "demo-task"})
    scorer = compile_specs([SPEC])
    if accounting:
        meter = UsageMeter({"task": Price(0.15, 0.60)})  # priced as a real endpoint would be
        limits = BudgetGuard(budget_total=10**9, iteration_cost=1, meter=meter, max_cost=cap)
        limits.in_iteration = True
        adapter = FrontierAdapter(
            task_lm=MeteredLM(lm, meter, "task", limits=limits), scorer=scorer, meter=meter, limits=limits
        )
    else:
        meter = limits = None
        adapter = FrontierAdapter(task_lm=lm, scorer=scorer)
    recorder = RunRecorder(run=run, adapter=adapter, valset=[], task_pks={}, budget_total=10**9, meter=meter, limits=limits)

    def one_round(batch: list[dict]) -> tuple[float, float]:
        started, cpu = time.perf_counter(), time.process_time()
        adapter.evaluate(batch, PROMPT)
        records = [adapter.take_record(PROMPT, row["task_id"]) for row in batch]
        recorder.record_evaluations(candidate=candidate, split=Split.TRAIN, records=records)
        recorder.metric_calls += len(batch)
        if accounting:
            recorder.save_usage()
        else:
            run_progress(run.pk).update(budget_used=recorder.metric_calls)
        return time.perf_counter() - started, time.process_time() - cpu

    return one_round


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=150, help="rounds of each contender per repeat")
    parser.add_argument("--repeats", type=int, default=3, help="independent repeats (each prints its ratios)")
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--debug", action="store_true", help="measure with DEBUG on (development mode: SQL logged)")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench")
    batch = rows(args.tasks)
    names = ["off", "on", "on + cost cap"]
    ratios: dict[tuple[int, str], list[float]] = {(column, name): [] for column in (0, 1) for name in names[1:]}
    print(f"scoring + recording one batch of {args.tasks} tasks; each repeat: median of {args.rounds} rounds per contender"
          f" (DEBUG {'on' if args.debug else 'off'})")
    for repeat in range(args.repeats):
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
        rounds = {}
        for name in names:
            run = Run.objects.create(owner=owner, name=f"cost {name} {repeat}", budget_total=10**9)
            candidate = Candidate.objects.create(run=run, index=0, components=PROMPT)
            rounds[name] = contender(run, candidate, accounting=name != "off", cap=10**9 if "cap" in name else None)
            rounds[name](batch)  # warm up (first rows inserted, caches filled)
        for i in range(args.rounds):
            for name in names[i % 3:] + names[: i % 3]:  # rotate the order
                times[name].append(rounds[name](batch))
        line = f"  repeat {repeat + 1}:"
        for column, label in ((0, "wall"), (1, "CPU")):
            off = statistics.median(t[column] for t in times["off"])
            line += f"  {label} off {off * 1000:.2f} ms"
            for name in names[1:]:
                ratio = statistics.median(t[column] for t in times[name]) / off
                ratios[(column, name)].append(ratio)
                line += f", {name} ×{ratio:.3f}"
        print(line)
    for column, label in ((0, "wall"), (1, "CPU (this process, every thread)")):
        parts = []
        for name in names[1:]:
            values = ratios[(column, name)]
            parts.append(f"{name} ×{statistics.median(values):.3f} (spread {min(values):.3f}-{max(values):.3f})")
        print(f"  {label}, median of {args.repeats} repeats: " + " · ".join(parts) + "  (target ≤ ×1.02)")


if __name__ == "__main__":
    main()
