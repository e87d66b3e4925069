"""What counting tokens and money costs (target: at most 2 % of a run's time): scoring + recording
with cost accounting on vs off.

Run: ``.venv/bin/python bench/cost_accounting.py [--rounds N] [--repeats N] [--tasks N]``, or with
``--instructions`` to count instructions under valgrind instead of timing. A throwaway SQLite
database is created in a temporary directory (migrations applied) and removed at the end.

One round = one evaluation batch as the runner does it: the adapter answers and scores N tasks
(the demo simulator, no latency, concurrency 4), the recorder writes the N Evaluation rows, and
the run's counters are updated as a budget event does. "on": the task model is wrapped in
MeteredLM, the run's guard checks every batch, and the run's usage JSON and cost are written with
the budget; "on + cost cap" also reserves each call against a cost cap (a lock per call). "off":
the bare model, no meter, no guard, only budget_used written. "off (again)" is "off" a second
time: what two identical contenders differ by, the bench's resolution.

Timed (the default): the order rotates each round and the contenders are created in a rotated
order each repeat; each of `--repeats` repeats prints the ratios of the median wall and CPU times
to "off", then the median ratio over the repeats and their spread. On a shared machine the spread
of "off (again)" says how far to trust the others.

`--instructions`: each contender runs `--rounds` rounds in a process of its own under valgrind's
callgrind, which counts every thread's instructions whatever else the machine does; only the
rounds are counted (not the set-up), on one evaluation thread (the note above counted_child).

It runs with DEBUG off, as a worker beside PostgreSQL and Redis runs (DEBUG is
off as soon as services are configured). `--debug` measures the development
mode instead (`make demo` without services): there Django logs every query and,
on SQLite, quotes each parameter through the database for the log, which makes
writing the run's usage JSON dearer per budget update (figures:
docs/benchmarks.md "bench/cost_accounting.py").
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import scratch

DATA_DIR = scratch.setup("cost", debug="--debug" in sys.argv)

import django

django.setup()

import logging

from django.contrib.auth import get_user_model
from django.core.management import call_command

from optimizer.lm import build_lm
from optimizer.models import Candidate, Run, Split, run_progress
from optimizer.runs.adapter import FrontierAdapter
from optimizer.runs.budget import BudgetGuard, MeteredLM, Price, UsageMeter
from optimizer.runs.recorder import RunRecorder
from verifiers_app.engine import compile_specs

logging.disable(logging.WARNING)
SPEC = {
    "id": "refund",
    "name": "Refund",
    "kind": "native",
    "checks": [
        {"id": "window", "type": "contains", "params": {"value": "30 days"}},
        {"id": "expectations", "type": "task_expectations"},
    ],
}
PROMPT = {"instructions": 'Answer refund questions. Always mention "30 days" and "receipt".'}


def rows(n: int) -> list[dict]:
    return [
        {
            "task_id": f"t{i}",
            "input": f"Question {i}: can I return the item I bought {i} days ago?",
            "metadata": {
                "expectations": {
                    "mustMention": [{"text": "receipt", "message": "Ask for the receipt"}]
                }
            },
        }
        for i in range(n)
    ]


def contender(
    run: Run,
    candidate: Candidate,
    *,
    accounting: bool,
    cap: float | None = None,
    concurrency: int = 4,
):
    lm = build_lm({"provider": "demo", "model": "demo-task"})
    scorer = compile_specs([SPEC])
    if accounting:
        meter = UsageMeter({"task": Price(0.15, 0.60)})  # priced as a real endpoint would be
        limits = BudgetGuard(budget_total=10**9, iteration_cost=1, meter=meter, max_cost=cap)
        limits.in_iteration = True
        adapter = FrontierAdapter(
            task_lm=MeteredLM(lm, meter, "task", limits=limits),
            scorer=scorer,
            meter=meter,
            limits=limits,
            concurrency=concurrency,
        )
    else:
        meter = limits = None
        adapter = FrontierAdapter(task_lm=lm, scorer=scorer, concurrency=concurrency)
    recorder = RunRecorder(
        run=run,
        adapter=adapter,
        valset=[],
        task_pks={},
        budget_total=10**9,
        meter=meter,
        limits=limits,
    )

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


NAMES = [
    "off",
    "on",
    "on + cost cap",
    "off (again)",
]  # the last: what two identical contenders differ by


def make_contender(owner, name: str, label: str, concurrency: int = 4):
    run = Run.objects.create(owner=owner, name=f"cost {name} {label}", budget_total=10**9)
    candidate = Candidate.objects.create(run=run, index=0, components=PROMPT)
    return contender(
        run,
        candidate,
        accounting=name.startswith("on"),
        cap=10**9 if "cap" in name else None,
        concurrency=concurrency,
    )


def timed(args, owner, batch: list[dict]) -> None:
    ratios: dict[tuple[int, str], list[float]] = {
        (column, name): [] for column in (0, 1) for name in NAMES[1:]
    }
    print(
        f"timed: scoring + recording one batch of {args.tasks} tasks on {args.concurrency} evaluation threads; each"
        f" repeat: median of {args.rounds} rounds per contender (DEBUG {'on' if args.debug else 'off'})"
    )
    for repeat in range(args.repeats):
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in NAMES}
        rounds = {}
        # Created in a rotated order too: two identical contenders differed by ~1 % by their place.
        for name in NAMES[repeat % len(NAMES) :] + NAMES[: repeat % len(NAMES)]:
            rounds[name] = make_contender(owner, name, str(repeat), args.concurrency)
            rounds[name](batch)  # warm up (first rows inserted, caches filled)
        for i in range(args.rounds):
            for name in NAMES[i % len(NAMES) :] + NAMES[: i % len(NAMES)]:  # rotate the order
                times[name].append(rounds[name](batch))
        line = f"  repeat {repeat + 1}:"
        for column, label in ((0, "wall"), (1, "CPU")):
            off = statistics.median(t[column] for t in times["off"])
            line += f"  {label} off {off * 1000:.2f} ms"
            for name in NAMES[1:]:
                ratio = statistics.median(t[column] for t in times[name]) / off
                ratios[(column, name)].append(ratio)
                line += f", {name} ×{ratio:.3f}"
        print(line, flush=True)
    for column, label in ((0, "wall"), (1, "CPU (this process, every thread)")):
        parts = []
        for name in NAMES[1:]:
            values = ratios[(column, name)]
            parts.append(
                f"{name} ×{statistics.median(values):.3f} (spread {min(values):.3f}-{max(values):.3f})"
            )
        print(
            f"  {label}, median of {args.repeats} repeats: "
            + " · ".join(parts)
            + "  (target ≤ ×1.02)"
        )


# --instructions: each contender in a process of its own under valgrind's callgrind, which counts
# the instructions of every thread, whatever else the machine does. The counters are zeroed when
# the process calls os.getppid() (after its set-up and warm-up) and dumped when it calls
# os.getpgrp() (after its rounds): only the rounds are counted. Python's hash seed is fixed, and
# the tasks are answered on one evaluation thread: with four, how often the threads hand the
# interpreter lock to each other follows the timer, and two identical contenders differed by 2 %.
ZERO, DUMP = "os_getppid", "os_getpgrp"


def counted_child(args, owner, batch: list[dict]) -> None:
    one_round = make_contender(owner, args.child, "counted", concurrency=1)
    for _ in range(2):
        one_round(batch)
    os.getppid()
    for _ in range(args.rounds):
        one_round(batch)
    os.getpgrp()


def count_instructions(name: str, args, directory: Path) -> int:
    out = directory / f"contender-{NAMES.index(name)}"
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        f"--zero-before={ZERO}",
        f"--dump-before={DUMP}",
        sys.executable,
        __file__,
        "--child",
        name,
        "--rounds",
        str(args.rounds),
        "--tasks",
        str(args.tasks),
        *(["--debug"] if args.debug else []),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=3600, check=False
    )
    dumps = sorted(directory.glob(out.name + ".*"))
    if done.returncode or len(dumps) != 1:
        raise SystemExit(
            f"{name}: callgrind gave {len(dumps)} dumps of the rounds (one expected), exit {done.returncode}:\n"
            f"{done.stderr[-3000:]}"
        )
    summary = re.search(r"^summary: (\d+)$", dumps[0].read_text(), re.MULTILINE)
    return int(summary.group(1))


def instructions(args) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (Debian: apt-get install valgrind)")
    print(
        f"instructions (valgrind callgrind, every thread): {args.rounds} rounds of a batch of {args.tasks} tasks per"
        f" contender on one evaluation thread, after 2 warm-up rounds (DEBUG {'on' if args.debug else 'off'}); 2 contenders at a time"
    )
    with (
        tempfile.TemporaryDirectory(prefix="frontier-bench-callgrind-") as directory,
        ThreadPoolExecutor(2) as pool,
    ):
        counts = dict(
            zip(
                NAMES, pool.map(lambda name: count_instructions(name, args, Path(directory)), NAMES)
            )
        )
    off = counts["off"]
    print(
        f"  off {off / args.rounds / 1e6:.2f} M instructions a round; "
        + ", ".join(f"{name} ×{counts[name] / off:.4f}" for name in NAMES[1:])
        + "  (target ≤ ×1.02)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--rounds",
        type=int,
        help="rounds of each contender per repeat (default 150; --instructions: 30 in all)",
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="independent repeats (each prints its ratios)"
    )
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=4,
        help="evaluation threads (timed; --instructions uses 1)",
    )
    parser.add_argument(
        "--debug", action="store_true", help="measure with DEBUG on (development mode: SQL logged)"
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions under valgrind instead of timing",
    )
    parser.add_argument("--child", choices=NAMES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.rounds = args.rounds or (30 if args.instructions else 150)
    if args.instructions and not args.child:
        instructions(args)  # each contender in a process (and a database) of its own
        return
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench")
    (counted_child if args.child else timed)(args, owner, rows(args.tasks))


if __name__ == "__main__":
    main()
