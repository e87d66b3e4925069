"""Scoring results stay byte-for-byte the same: score, verdict, passed, per-check
details, hits, misses and the feedback text GEPA reflects on.

``feedback_golden.json`` holds, for every case below, a sha256 of the case's
inputs (spec, task, output; its first 16 digits) and of its result's
``as_dict()``. The cases cover
the three verifiers of ``bench/scoring.py`` on many generated outputs and every
other check kind, aggregator, threshold, row verifier, verifier class, broken
check and the regex timeout.

Regenerate the fixture only when a change of results is intended:
``python tests/verifiers/test_feedback_golden.py --write``.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.scoring import (
    FACILITY_SPEC,
    FACILITY_TASK,
    MIXED_SPEC,
    MIXED_TASK,
    REFUND_SENTENCES,
    REFUND_SPEC,
    REFUND_TASK,
)
from verifiers_app.engine import compile_specs, register_fn

FIXTURE = Path(__file__).with_name("feedback_golden.json")

register_fn("test_golden_fraction", lambda output, expected, params: len(output) % 5 / 4)
register_fn("test_golden_reason", lambda output, expected, params: (0.5, f"half: {output[:12]}"))
register_fn("test_golden_nan", lambda output, expected, params: math.nan)
register_fn("test_golden_big", lambda output, expected, params: 3)


def _golden_raises(output: str, expected: Any, params: dict) -> float:
    raise ValueError(f"cannot score {output[:8]!r}")


register_fn("test_golden_raises", _golden_raises)

Case = tuple[
    str, Any, dict | None, str, Any, Any
]  # name, specs, task, output, aggregator, thresholds


def _json_record(rng: random.Random) -> str:
    record: dict[str, Any] = {
        "urgency": rng.choice(["high", "high", "medium", "low", "HIGH"]),
        "sentiment": rng.choice(["negative", "negative", "neutral", "positive"]),
        "categories": rng.sample(["elevator", "maintenance", "security", "cleaning", "lift"], 2),
        "summary": rng.choice(
            [
                "Tenant reports the lift in Block C stuck for two days; phone line unanswered.",
                "Sorry, the elevator is broken. TODO: call maintenance.",
                "lorem ipsum dolor sit amet",
                "Nothing to add.",
            ]
        )
        * rng.randint(1, 4),
    }
    for key in ("urgency", "sentiment", "categories", "summary"):
        if rng.random() < 0.12:
            del record[key]
    text = json.dumps(record, indent=rng.choice([None, None, 2]))
    shape = rng.random()
    if shape < 0.08:
        text = "Here is the triage: " + text
    elif shape < 0.14:
        text = "```json\n" + text + "\n```"
    elif shape < 0.18:
        text = text[: rng.randint(0, len(text))]  # truncated, often invalid JSON
    elif shape < 0.21:
        text = json.dumps([record])
    elif shape < 0.23:
        text = rng.choice(['"just a string"', "null", "42", "true", "I cannot help with that."])
    elif shape < 0.25:
        text = "  i cannot HELP with that.  "
    return text


def _prose(rng: random.Random) -> str:
    extra = [
        "That is not our problem, I am afraid.",
        "We can send a gift card right away.",
        "You will get your money back within thirty days.",
        "Keep the RECEIPT.",
        "",
    ]
    sentences = rng.sample(REFUND_SENTENCES, rng.randint(0, 7)) + rng.sample(
        extra, rng.randint(0, 2)
    )
    rng.shuffle(sentences)
    return " ".join(sentences)[: rng.choice([600, 600, 120, 40])]


def _bench_cases() -> Iterator[Case]:
    rng = random.Random(31)
    for i in range(350):
        yield f"facility-{i}", FACILITY_SPEC, FACILITY_TASK, _json_record(rng), None, None
    for i in range(350):
        yield f"refund-{i}", REFUND_SPEC, REFUND_TASK, _prose(rng), None, None
    for i in range(350):
        yield f"mixed-{i}", MIXED_SPEC, MIXED_TASK, _json_record(rng), None, None


OTHER_SPECS: dict[str, Any] = {
    "substrings": {
        "id": "substrings",
        "passThreshold": 0.5,
        "checks": [
            {"id": "c1", "type": "contains", "params": {"value": "Refund"}},
            {"id": "c2", "type": "contains", "params": {"value": "Refund", "caseSensitive": True}},
            {"id": "n1", "type": "not_contains", "params": {"value": "Sorry"}},
            {
                "id": "n2",
                "type": "not_contains",
                "weight": 2,
                "params": {"value": "sorry", "caseSensitive": True},
            },
            {"id": "e1", "type": "equals", "params": {"value": " OK "}},
            {"id": "e2", "type": "exact_match", "params": {"value": "OK", "caseSensitive": True}},
            {"id": "min", "type": "min_length", "params": {"value": 10}},
            {"id": "max", "type": "max_length", "weight": 0.5, "params": {"value": 60}},
        ],
    },
    "regexes": {
        "id": "regexes",
        "checks": [
            {"id": "digits", "type": "regex", "params": {"pattern": r"\d{3}-\d{4}"}},
            {"id": "anchored", "type": "regex", "params": {"pattern": r"^OK\b"}},
            {"id": "broken", "type": "regex", "params": {"pattern": "(unclosed"}},
            {"id": "later", "type": "mystery_check", "params": {"x": 1}},
        ],
    },
    "json": {
        "id": "json",
        "required": True,
        "checks": [
            {"id": "valid", "type": "json_valid", "required": True},
            {"id": "keys", "type": "json_keys", "params": {"requiredKeys": ["a", "b"]}},
            {"id": "schema", "type": "expected_output_schema"},
        ],
    },
    "expectations": {
        "id": "expectations",
        "weight": 2,
        "checks": [{"id": "expect", "type": "task_expectations"}],
    },
    "format": {"id": "format", "kind": "format_only", "params": {"has_think_reward": 0.25}},
    "fn": {"id": "fn", "kind": "in_process", "fn_name": "contains", "expected": "ok"},
}
OTHER_TASKS: list[dict | None] = [
    None,
    {"task_id": "t0"},
    {
        "task_id": "t1",
        "metadata": {
            "expectations": {
                "mustMention": ["refund", {"anyOf": ["OK", "okay"]}, {"text": "555"}],
                "mustNotMention": [{"anyOf": ["sorry", "Gift Card"], "message": "no apologies"}],
            },
            "expectedOutputSchema": {"required": ["a", "c"]},
        },
    },
    {
        "task_id": "t2",
        "metadata": {"expectations": {"mustMention": [{"nope": 1}]}, "expectedOutputSchema": 3},
    },
    {
        "task_id": "t3",
        "verifier": {"kind": "in_process", "fn_name": "exact_match", "expected": "OK"},
    },
    {
        "task_id": "t4",
        "expected": "ok",
        "verifier": {"kind": "in_process", "fn_name": "contains", "params": {"ignore_case": True}},
    },
    {
        "task_id": "t5",
        "verifier": {"kind": "in_process", "fn_name": "regex_match", "expected": r"\d+"},
    },
    {
        "task_id": "t6",
        "verifier": {
            "kind": "in_process",
            "fn_name": "tool_calls_match",
            "expected": {"tool": "click", "coordinate": [10, 20]},
        },
    },
    {"task_id": "t7", "verifier": {"kind": "in_process", "fn_name": "test_golden_fraction"}},
    {"task_id": "t8", "verifier": {"kind": "in_process", "fn_name": "test_golden_reason"}},
    {"task_id": "t9", "verifier": {"kind": "in_process", "fn_name": "test_golden_nan"}},
    {"task_id": "t10", "verifier": {"kind": "in_process", "fn_name": "test_golden_big"}},
    {"task_id": "t11", "verifier": {"kind": "in_process", "fn_name": "test_golden_raises"}},
]
OTHER_SPEC_SETS: list[tuple[list[str], Any, Any]] = [
    (["substrings"], None, None),
    (["regexes"], None, None),
    (["json", "expectations"], None, None),
    (["substrings", "regexes", "format"], "minimum", None),
    (["substrings", "json"], "maximum", {"pass": 0.9, "borderline": 0.3}),
    (["substrings", "json", "fn"], {"type": "safety_gate", "required": ["fn"]}, None),
    (["expectations", "format"], {"type": "all_or_nothing", "threshold": 0.5}, None),
    ([], None, None),
]
OTHER_OUTPUTS = [
    "",
    "OK",
    "ok",
    "  ok  ",
    "OK, a Refund is on its way; call 555-1234.",
    "Sorry, no refund. sorry again.",
    '{"a": 1, "b": 2}',
    '{"a": 1, "c": [1, 2]}',
    '```json\n{"a": 1}\n```',
    "[1, 2, 3]",
    '"text"',
    "<think>why</think><answer>OK</answer>",
    "<answer>42</answer>",
    '{"tool": "click", "coordinate": [12, 18]}',
    '{"tool": "click", "coordinate": [100, 18]}',
    'I will click: {"tool": "type", "text": "hi"}',
    "x" * 200,
    "Gift card? okay, refund of 555 dollars.",
    '\ufeff{"a": 1, "b": 2}',
    'Réponse: « OK » — "quoted" \\ back\tslash',
]


def _other_cases() -> Iterator[Case]:
    for s, (names, aggregator, thresholds) in enumerate(OTHER_SPEC_SETS):
        specs = [OTHER_SPECS[name] for name in names]
        for t, task in enumerate(OTHER_TASKS):
            if not specs and (task is None or "verifier" not in task):
                continue  # nothing to score with
            for o, output in enumerate(OTHER_OUTPUTS):
                yield f"other-{s}-{t}-{o}", specs, task, output, aggregator, thresholds


def _timeout_cases() -> Iterator[Case]:
    """One catastrophic pattern, last: it times out at the per-search limit.
    (The regex module's timeout counts CPU time and the per-output budget wall
    time, so a second catastrophic pattern on a loaded machine would get less
    than the per-search limit: its text would depend on the load.)"""
    spec = {
        "id": "hostile",
        "checks": [
            {"id": "ok", "type": "contains", "params": {"value": "aaa"}},
            {"id": "fine", "type": "regex", "params": {"pattern": "a{3}b$"}},
            {"id": "slow", "type": "regex", "params": {"pattern": "(a|aa)+$"}},
        ],
    }
    yield "timeout-0", spec, None, "a" * 40 + "b", None, None
    yield "timeout-1", spec, None, "a" * 40 + "c", None, None


def cases() -> Iterator[Case]:
    yield from _bench_cases()
    yield from _other_cases()
    yield from _timeout_cases()


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def score_all() -> dict[str, tuple[str, Any]]:
    """``{case name: (sha256 of its inputs, its Result)}``; one scorer per spec
    set, reused across outputs as in a run."""
    scorers: dict[str, Any] = {}
    scored: dict[str, tuple[str, Any]] = {}
    for name, specs, task, output, aggregator, thresholds in cases():
        key = _digest([specs, aggregator, thresholds])
        scorer = scorers.get(key)
        if scorer is None:
            scorer = scorers[key] = compile_specs(specs, aggregator, thresholds)
        inputs = _digest([specs, task, output, aggregator, thresholds])
        scored[name] = (inputs, scorer.score(output, task))
    return scored


def fingerprints(scored: dict[str, tuple[str, Any]]) -> dict[str, list[str]]:
    """``{case name: [its inputs' sha256 (first 16 digits), its result's sha256]}``."""
    return {
        name: [inputs[:16], _digest(result.as_dict())] for name, (inputs, result) in scored.items()
    }


@pytest.fixture(scope="module")
def golden() -> dict[str, list[str]]:
    return json.loads(FIXTURE.read_text())


@pytest.fixture(scope="module")
def scored() -> dict[str, tuple[str, Any]]:
    return score_all()


def test_the_cases_are_the_ones_the_fixture_was_made_from(golden, scored):
    """When this fails the cases (or the bench's specs) changed, not scoring:
    regenerate the fixture on code whose results are known to be right."""
    assert len(golden) >= 1000
    assert sorted(scored) == sorted(golden)
    changed = [name for name in golden if golden[name][0] != scored[name][0][:16]]
    assert changed == []


def test_every_result_and_its_feedback_text_is_unchanged(golden, scored):
    current = fingerprints(scored)
    changed = [name for name in golden if golden[name] != current.get(name)]
    assert changed == [], f"{len(changed)} results differ, e.g. {changed[:10]}"


def test_feedback_read_before_the_details_is_the_same_text():
    """Reading ``feedback`` first (what GEPA does) gives what ``as_dict()`` holds."""
    for name, (_inputs, result) in score_all().items():
        feedback = result.feedback
        assert result.as_dict()["feedback"] == feedback, name


def test_the_cases_cover_passes_misses_and_every_verdict(scored):
    """The fixture is only worth something if its cases vary."""
    results = [result for _inputs, result in scored.values()]
    assert {r.verdict for r in results} == {"pass", "borderline", "fail"}
    with_feedback = sum(1 for r in results if r.as_dict()["feedback"])
    assert with_feedback >= 300 and len(results) - with_feedback >= 50
    assert any("timed out" in r.as_dict()["feedback"] for r in results)


if __name__ == "__main__":
    if "--write" not in sys.argv:
        raise SystemExit("usage: python tests/verifiers/test_feedback_golden.py --write")
    lines = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in fingerprints(score_all()).items()]
    FIXTURE.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    print(f"wrote {FIXTURE}")
