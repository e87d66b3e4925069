"""What the simulated reflection can never learn on a run, and the val score
that leaves (optimizer/lm/simulator/limits.py), from real specs and tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimizer.lm.simulator.limits import simulator_limits
from verifiers_app.engine import compile_specs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def tasks(*inputs: str, expectations: dict | None = None) -> list[dict]:
    return [
        {"task_id": f"t{i}", "input": text, "metadata": {"expectations": expectations or {}}}
        for i, text in enumerate(inputs)
    ]


def test_a_regex_among_five_equal_checks_caps_a_run_at_0_80():
    scorer = compile_specs(
        {
            "id": "five",
            "checks": [
                {"id": "refund", "type": "contains", "params": {"value": "refund"}},
                {"id": "order", "type": "contains", "params": {"value": "order number"}},
                {"id": "no-gift", "type": "not_contains", "params": {"value": "gift card"}},
                {"id": "short", "type": "max_length", "params": {"value": 600}},
                {"id": "ref", "type": "regex", "params": {"pattern": r"REF-\d{4}"}},
            ],
        }
    )
    limits = simulator_limits(scorer, tasks("Refund me.", "Broken."), tasks("Late.", "Lost."))
    assert limits is not None and limits.ceiling == pytest.approx(0.8)
    assert limits.cannot_learn == [
        "patterns (five/ref: its feedback quotes a regex, not words to write)"
    ]


def test_phrases_only_val_tasks_ask_for_are_named_and_counted():
    """The refund tickets example: docs/models.md says 0.61 is the best any reply
    built from the train feedback can score."""
    spec = json.loads((EXAMPLES / "verifiers" / "refund-policy-quality.json").read_text())
    rows = [json.loads(line) for line in (EXAMPLES / "tasks" / "refund-tickets.jsonl").open()]
    limits = simulator_limits(
        compile_specs(spec),
        [r for r in rows if r["split"] == "train"],
        [r for r in rows if r["split"] == "val"],
    )
    assert limits is not None and round(limits.ceiling, 2) == 0.61
    assert limits.cannot_learn == [
        'phrases only val tasks ask for ("30 days", "14 days", "license", "final sale" and 5 more)'
    ]


def test_what_the_seed_prompt_already_says_counts_as_known():
    scorer = compile_specs(
        {"id": "v", "checks": [{"id": "c", "type": "contains", "params": {"value": "ticket"}}]}
    )
    val = tasks("Where is my parcel?", expectations={"mustMention": ["tracking"]})
    alone = simulator_limits(scorer, tasks("Hi."), val)
    seeded = simulator_limits(scorer, tasks("Hi."), val, {"p": 'Always mention "tracking".'})
    assert alone is not None and alone.ceiling == pytest.approx(1.0)  # expectations unread
    assert seeded is not None and seeded.ceiling == pytest.approx(1.0)
    checked = compile_specs({"id": "v", "checks": [{"id": "e", "type": "task_expectations"}]})
    assert simulator_limits(checked, tasks("Hi."), val).ceiling == pytest.approx(0.0)
    assert simulator_limits(
        checked, tasks("Hi."), val, {"p": 'Always mention "tracking".'}
    ).ceiling == pytest.approx(1.0)


def test_exact_answers_and_json_keys():
    """An exact answer cannot be learnt (the simulator writes prose around what
    it is told); JSON and its keys can."""
    scorer = compile_specs(
        [
            {
                "id": "json",
                "checks": [{"id": "keys", "type": "json_keys", "params": {"requiredKeys": ["a"]}}],
            },
            {"id": "gold", "checks": [{"id": "eq", "type": "equals", "params": {"value": "42"}}]},
        ]
    )
    limits = simulator_limits(scorer, tasks("Q1"), tasks("Q2"))
    assert limits is not None and limits.ceiling == pytest.approx(0.5)
    assert limits.cannot_learn == ["exact answers (gold/eq)"]


def test_no_val_tasks_no_limits():
    scorer = compile_specs(
        {"id": "v", "checks": [{"id": "c", "type": "min_length", "params": {"value": 5}}]}
    )
    assert simulator_limits(scorer, tasks("Hi."), []) is None
