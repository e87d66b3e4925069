"""Scoring throughput: the engine against a hand-written function doing the same checks.

Run: ``python bench/scoring.py [--quick] [--baseline /path/to/other/checkout]``.
For each case it prints the engine's and the hand-written function's
outputs/second (medians of several repeats, one core, in the thread's CPU time)
and the time ratio, without and with reading the feedback text, beside the
ratios before feedback was made cheaper: with ``--baseline`` those of another
checkout's engine measured in the same rounds, else the figures recorded
then. Targets (with feedback read, and so without): engine time ≤ 1.2×
hand-written for (a) and (b), ≤ 1.5× for (c); ≥ 50,000 outputs/s for (a).

(a) facility extraction: task_expectations (4 entries, weight 4), json_valid
    (weight 2), json_keys (weight 1) on ~300-byte JSON outputs
(b) refund policy: task_expectations (3 mustMention + 2 mustNotMention) on
    ~600-byte prose
(c) a 12-check mixed native verifier on ~300-byte JSON outputs

Then hostile input: a catastrophic-backtracking regex against
a 1 MB output (target: about a second, score 0, "timed out"), eight such
checks on one output (they share a per-output regex budget) and the 12-check
verifier on a 10 MB output.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from verifiers_app.engine import compile_specs

REPEATS = 7
OUTPUTS_PER_REPEAT = 20_000
#: Time ratio to the hand-written function each case must stay within, with feedback read.
TARGETS = {"a": 1.2, "b": 1.2, "c": 1.5}
#: The ratios before feedback was made cheaper (2026-11-27, this bench, wall time): without / with feedback.
BEFORE = {"a": (0.98, 1.18), "b": (1.20, 1.34), "c": (1.93, 2.33)}
rng = random.Random(3)

# --- (a) facility extraction ------------------------------------------------------------

FACILITY_SPEC = {
    "id": "facility-extraction-quality",
    "name": "Facility extraction quality",
    "kind": "native",
    "checks": [
        {"id": "field-labels", "type": "task_expectations", "weight": 4, "params": {}},
        {"id": "valid-json", "type": "json_valid", "weight": 2, "params": {}},
        {
            "id": "required-keys",
            "type": "json_keys",
            "weight": 1,
            "params": {"requiredKeys": ["urgency", "sentiment", "categories"]},
        },
    ],
}
FACILITY_TASK = {
    "task_id": "f1",
    "input": "The lift in block C has been stuck for two days and nobody answers the phone.",
    "metadata": {
        "expectations": {
            "mustMention": [
                {"anyOf": ['"urgency": "high"'], "message": "urgency should be high"},
                {"text": "negative", "message": "sentiment should be negative"},
                {"anyOf": ["elevator", "lift"], "message": "categories should include elevator"},
                {"text": "maintenance", "message": "categories should include maintenance"},
            ]
        }
    },
}


def facility_outputs(n: int = 256) -> list[str]:
    outputs = []
    for i in range(n):
        record = {
            "urgency": rng.choice(["high", "high", "medium"]),
            "sentiment": rng.choice(["negative", "negative", "neutral"]),
            "categories": rng.sample(["elevator", "maintenance", "security", "cleaning"], 2),
            "summary": "Tenant reports the lift in block C stuck for two days; phone line unanswered. "
            * 2,
        }
        if i % 10 == 0:
            del record["sentiment"]
        text = json.dumps(record)
        if i % 17 == 0:
            text = "Here is the triage: " + text  # not JSON
        outputs.append(text[:330])
    return outputs


def mentions_by_hand(lower: str, task: dict, reasons: list[str]) -> float:
    """The share of the task's mustMention entries met (the hand-written task_expectations)."""
    entries = task["metadata"]["expectations"]["mustMention"]
    met = 0
    for entry in entries:
        phrases = entry.get("anyOf") or [entry["text"]]
        if any(p.lower() in lower for p in phrases):
            met += 1
        else:
            reasons.append(entry["message"])
    return met / len(entries)


def facility_by_hand(output: str, task: dict) -> tuple[float, list[str]]:
    reasons = []
    lower = output.lower()
    expectations = mentions_by_hand(lower, task, reasons)
    try:
        parsed = json.loads(output)
        valid = 1.0
    except ValueError as exc:
        parsed, valid = None, 0.0
        reasons.append(f"not valid JSON ({exc})")
    missing = [
        k
        for k in ("urgency", "sentiment", "categories")
        if not isinstance(parsed, dict) or k not in parsed
    ]
    keys = 0.0 if missing else 1.0
    if missing:
        reasons.append(f"missing keys {missing}")
    return (4 * expectations + 2 * valid + keys) / 7, reasons


# --- (b) refund policy ---------------------------------------------------------------------

REFUND_SPEC = {
    "id": "refund-policy-quality",
    "name": "Refund policy quality",
    "kind": "native",
    "passThreshold": 1.0,
    "checks": [
        {"id": "policy-expectations", "type": "task_expectations", "weight": 1, "params": {}}
    ],
}
REFUND_TASK = {
    "task_id": "r1",
    "input": "My blender arrived broken. What can you do?",
    "metadata": {
        "expectations": {
            "mustMention": [
                {"anyOf": ["refund", "money back"], "message": "the answer should offer a refund"},
                {"anyOf": ["30 days", "thirty days"], "message": "state the 30-day window"},
                {"text": "receipt", "message": "ask for the receipt"},
            ],
            "mustNotMention": [
                {
                    "anyOf": ["gift card", "store credit"],
                    "message": "do not push a gift card instead of a refund",
                },
                {"text": "not our problem", "message": "never blame the customer"},
            ],
        }
    },
}
REFUND_SENTENCES = [
    "Thank you for reaching out about your order, and I am sorry the blender arrived damaged.",
    "You are entitled to a full refund under our returns policy.",
    "Returns are accepted within 30 days of delivery for any item that arrived faulty.",
    "Please keep your receipt or order confirmation handy when you contact us.",
    "If you prefer, we can also offer store credit for a future purchase.",
    "Our courier will collect the damaged item from your address at no cost to you.",
    "We will process your request as soon as the item is back in our warehouse.",
    "Let us know if there is anything else we can help you with today.",
]


def refund_outputs(n: int = 256) -> list[str]:
    outputs = []
    for _ in range(n):
        sentences = rng.sample(REFUND_SENTENCES, 7)
        outputs.append(" ".join(sentences)[:600])
    return outputs


def refund_by_hand(output: str, task: dict) -> tuple[float, list[str]]:
    lower = output.lower()
    expectations = task["metadata"]["expectations"]
    total = len(expectations["mustMention"]) + len(expectations["mustNotMention"])
    reasons = []
    for entry in expectations["mustMention"]:
        phrases = entry.get("anyOf") or [entry["text"]]
        if not any(p.lower() in lower for p in phrases):
            reasons.append(entry["message"])
    for entry in expectations["mustNotMention"]:
        phrases = entry.get("anyOf") or [entry["text"]]
        found = [p for p in phrases if p.lower() in lower]
        if found:
            reasons.append(f"{entry['message']} (found: {found})")
    return (total - len(reasons)) / total, reasons


# --- (c) 12-check mixed ----------------------------------------------------------------------

MIXED_SPEC = {
    "id": "mixed",
    "name": "Mixed checks",
    "kind": "native",
    "checks": [
        {"id": "expectations", "type": "task_expectations", "weight": 3},
        {"id": "says-elevator", "type": "contains", "params": {"value": "elevator"}},
        {
            "id": "says-Block",
            "type": "must_contain",
            "params": {"value": "Block", "caseSensitive": True},
        },
        {"id": "no-sorry", "type": "not_contains", "params": {"value": "sorry"}},
        {"id": "no-lorem", "type": "must_not_contain", "params": {"text": "lorem ipsum"}},
        {
            "id": "has-urgency",
            "type": "regex",
            "params": {"pattern": r'"urgency":\s*"(high|medium|low)"'},
        },
        {"id": "no-todo", "type": "regex", "params": {"pattern": r"^(?!.*TODO)"}},
        {"id": "not-refused", "type": "equals", "params": {"value": "I cannot help with that."}},
        {"id": "long-enough", "type": "min_length", "params": {"value": 80}},
        {"id": "short-enough", "type": "max_length", "params": {"value": 400}},
        {"id": "valid-json", "type": "json_valid", "weight": 2},
        {
            "id": "keys",
            "type": "json_keys",
            "params": {"keys": ["urgency", "sentiment", "categories"]},
        },
    ],
}
MIXED_TASK = {
    **FACILITY_TASK,
    "metadata": {
        **FACILITY_TASK["metadata"],
        "expectedOutputSchema": {"required": ["urgency", "summary"]},
    },
}
_URGENCY = re.compile(r'"urgency":\s*"(high|medium|low)"')
_NO_TODO = re.compile(r"^(?!.*TODO)")


def mixed_by_hand(output: str, task: dict) -> tuple[float, list[str]]:
    reasons = []
    lower = output.lower()
    scores = [3 * mentions_by_hand(lower, task, reasons)]

    def check(ok: bool, reason: str, weight: float = 1.0) -> None:
        scores.append(weight if ok else 0.0)
        if not ok:
            reasons.append(reason)

    check("elevator" in lower, "no elevator")
    check("Block" in output, "no Block")
    check("sorry" not in lower, "sorry")
    check("lorem ipsum" not in lower, "lorem")
    check(_URGENCY.search(output) is not None, "no urgency")
    check(_NO_TODO.search(output) is not None, "todo")
    check(lower.strip() == "i cannot help with that.", "not equal")
    check(len(output) >= 80, "too short")
    check(len(output) <= 400, "too long")
    try:
        parsed = json.loads(output)
        check(True, "", 2.0)
    except ValueError as exc:
        parsed = None
        check(False, f"invalid JSON {exc}", 2.0)
    check(
        isinstance(parsed, dict)
        and all(k in parsed for k in ("urgency", "sentiment", "categories")),
        "keys",
    )
    return sum(scores) / 15, reasons


# --- measuring ---------------------------------------------------------------------------------


def rates(
    fns: list, outputs: list[str], count: int
) -> tuple[list[float], list[tuple[float, float, float]]]:
    """Outputs/second of each fn, median over REPEATS rounds, and the per-round time
    ratio of each fn to the first: (median, min, max). The fns take turns within
    every round and each is timed in this thread's CPU time, so other jobs on a
    shared machine neither enter the time nor, mostly, the ratio."""
    per_fn: list[list[float]] = [[] for _ in fns]
    n = len(outputs)
    clock = time.thread_time
    for _ in range(REPEATS):
        for k, fn in enumerate(fns):
            start = clock()
            for i in range(count):
                fn(outputs[i % n])
            per_fn[k].append(count / (clock() - start))
    medians = [statistics.median(r) for r in per_fn]
    ratios = []
    for r in per_fn:
        per_round = [first / other for first, other in zip(per_fn[0], r)]
        ratios.append((statistics.median(per_round), min(per_round), max(per_round)))
    return medians, ratios


def load_engine(checkout: str) -> Any:
    """The scoring engine of another checkout (``--baseline /path/to/main``),
    imported under its own name beside this one's."""
    init = Path(checkout).resolve() / "verifiers_app" / "engine" / "__init__.py"
    spec = importlib.util.spec_from_file_location(
        "baseline_engine", init, submodule_search_locations=[str(init.parent)]
    )
    if spec is None or spec.loader is None:
        raise SystemExit(f"no scoring engine at {init}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_engine"] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    count = OUTPUTS_PER_REPEAT // 10 if "--quick" in sys.argv else OUTPUTS_PER_REPEAT
    baseline = None
    if "--baseline" in sys.argv:
        baseline = load_engine(sys.argv[sys.argv.index("--baseline") + 1])
    cases = [
        (
            "(a) facility extraction, 3 checks, ~300 B JSON",
            FACILITY_SPEC,
            FACILITY_TASK,
            facility_outputs(),
            facility_by_hand,
        ),
        (
            "(b) refund policy expectations, ~600 B prose",
            REFUND_SPEC,
            REFUND_TASK,
            refund_outputs(),
            refund_by_hand,
        ),
        (
            "(c) 12-check mixed, ~300 B JSON",
            MIXED_SPEC,
            MIXED_TASK,
            facility_outputs(),
            mixed_by_hand,
        ),
    ]
    print(f"median of {REPEATS} repeats × {count:,} outputs, one core, thread CPU time")
    print(
        "time ratio: engine time / hand-written time, median (min-max) of the rounds; "
        "+feedback: reading result.feedback too"
    )
    before_label = "baseline" if baseline else "before (issue)"
    print(
        f"\n{'case':<48} {'engine/s':>9} {'by hand/s':>9} {'+feedback/s':>11}"
        f"  {'time ratio':<17} {'+feedback':<17} {before_label + ' (+feedback)':<26} target"
    )
    ok = True
    for label, spec, task, outputs, by_hand in cases:
        key = label[1]
        scorer = compile_specs(spec)
        scorer.score(outputs[0], task)  # compile the task row once, as in a run
        fns = [
            lambda o: by_hand(o, task),
            lambda o: scorer.score(o, task),
            # `feedback` is built when read: this fn reads it, as GEPA's reflection does.
            lambda o: scorer.score(o, task).feedback,
        ]
        if baseline is not None:
            old = baseline.compile_specs(spec)
            old.score(outputs[0], task)
            fns += [lambda o: old.score(o, task), lambda o: old.score(o, task).feedback]
        medians, ratios = rates(fns, outputs, count)
        hand_rate, engine_rate, full_rate = medians[:3]
        ratio, full_ratio = ratios[1], ratios[2]
        met = ratio[0] <= TARGETS[key] and full_ratio[0] <= TARGETS[key]
        ok &= met
        if baseline is not None:
            before = f"{_ratio(ratios[3])} {_ratio(ratios[4])}"
        else:
            before = "{:.2f}× ({:.2f}×)".format(*BEFORE[key])
        print(
            f"{label:<48} {engine_rate:>9,.0f} {hand_rate:>9,.0f} {full_rate:>11,.0f}"
            f"  {_ratio(ratio):<17} {_ratio(full_ratio):<17} {before:<26} "
            f"{TARGETS[key]:.1f}×{'' if met else '  NOT met'}"
        )
        if key == "a":
            a_rate = engine_rate
    print()
    print(
        "target: time ratio (with and without feedback) ≤ 1.2× for (a) and (b), ≤ 1.5× for (c): "
        f"{'met' if ok else 'NOT met'}"
    )
    print(
        f"target: ≥ 50,000 outputs/s for (a): {'met' if a_rate >= 50_000 else 'NOT met'} ({a_rate:,.0f}/s)"
    )
    hostile()
    return 0


def _ratio(r: tuple[float, float, float]) -> str:
    return f"{r[0]:.2f}× ({r[1]:.2f}-{r[2]:.2f})"


def hostile() -> None:
    """Bounded time on hostile input (one scoring each, wall time)."""
    print("\nhostile input (one scoring each)")
    catastrophic = compile_specs(
        {"id": "h", "checks": [{"type": "regex", "params": {"pattern": "(a+)+$"}}]}
    )
    megabyte = "a" * 1_000_000 + "b"
    start = time.perf_counter()
    check = catastrophic.score(megabyte).verifiers[0].checks[0]
    elapsed = time.perf_counter() - start
    print(
        f"  (a+)+$ against a 1 MB output: {elapsed:.2f} s, score {check.score}, reason: {check.reason}"
    )
    many = compile_specs(
        {
            "id": "h8",
            "checks": [
                {"id": f"r{i}", "type": "regex", "params": {"pattern": "(a|aa)+$"}}
                for i in range(8)
            ],
        }
    )
    start = time.perf_counter()
    checks = many.score("a" * 40 + "b").verifiers[0].checks
    many_elapsed = time.perf_counter() - start
    not_run = sum("not run" in (c.reason or "") for c in checks)
    print(
        f"  8 exponential regex checks, one output: {many_elapsed:.2f} s "
        f"({8 - not_run} timed out, {not_run} not run: the per-output regex budget)"
    )
    big = '{"urgency": "high", "blob": "' + "x" * 10_000_000 + '"}'
    scorer = compile_specs(MIXED_SPEC)
    start = time.perf_counter()
    result = scorer.score(big, MIXED_TASK)
    print(
        f"  12-check mixed verifier on a 10 MB output: {time.perf_counter() - start:.2f} s, score {result.score:.3f}"
    )
    print(
        f"target: the catastrophic regex finishes within about a second: {'met' if elapsed < 1.5 else 'NOT met'}"
    )
    print(
        f"target: any number of them stays within about a second per output: {'met' if many_elapsed < 2.0 else 'NOT met'}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
