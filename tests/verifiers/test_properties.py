"""Properties that hold for any output string (hypothesis)."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verifiers_app.engine import compile_specs

MIXED = {
    "id": "mixed",
    "checks": [
        {"id": "te", "type": "task_expectations", "weight": 3},
        {"id": "c", "type": "contains", "params": {"value": "refund"}},
        {"id": "cs", "type": "contains", "params": {"value": "Refund", "caseSensitive": True}},
        {"id": "nc", "type": "not_contains", "params": {"value": "gift card"}},
        {"id": "re", "type": "regex", "params": {"pattern": r"\d+ days"}},
        {"id": "eq", "type": "equals", "params": {"value": "ok"}},
        {"id": "min", "type": "min_length", "params": {"value": 5}},
        {"id": "max", "type": "max_length", "params": {"value": 40}},
        {"id": "jv", "type": "json_valid", "weight": 2},
        {"id": "jk", "type": "json_keys", "params": {"keys": ["a", "b"]}},
        {"id": "schema", "type": "expected_output_schema"},
    ],
}
WITH_UNKNOWN = {
    "id": "u",
    "checks": [
        {"id": "x", "type": "mystery"},
        {"id": "c", "type": "contains", "params": {"value": "a"}},
    ],
}
TASK = {
    "task_id": "t",
    "metadata": {
        "expectations": {
            "mustMention": [{"anyOf": ["refund", "money back"], "message": "offer a refund"}],
            "mustNotMention": [{"text": "store credit", "message": "no store credit"}],
        },
        "expectedOutputSchema": {"required": ["a"]},
    },
    "verifier": {
        "kind": "in_process",
        "fn_name": "tool_calls_match",
        "expected": {"tool": "t", "action": "a", "coordinate": [1, 2]},
    },
}
SCORERS = [
    compile_specs(MIXED),
    compile_specs([MIXED, WITH_UNKNOWN], aggregator="minimum"),
    compile_specs(WITH_UNKNOWN, aggregator={"type": "all_or_nothing", "threshold": 0.5}),
]

# Outputs that look like what models write, plus anything at all.
phrases = st.sampled_from(
    [
        "refund",
        "Refund",
        "gift card",
        "30 days",
        "ok",
        '{"a": 1, "b": 2}',
        '{"a": ',
        "```json",
        "\n",
        "[1, 2]",
        '{"tool": "t", "action": "a", "coordinate": [3, 4]}',
        "null",
        "NaN",
    ]
)
outputs = st.one_of(st.text(), st.lists(st.one_of(phrases, st.text(max_size=5))).map("".join))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(output=outputs, scorer_index=st.integers(0, len(SCORERS) - 1), with_task=st.booleans())
def test_any_output_scores_in_the_unit_interval_without_raising(output, scorer_index, with_task):
    result = SCORERS[scorer_index].score(output, TASK if with_task else None)
    assert 0.0 <= result.score <= 1.0 and not math.isnan(result.score)
    assert result.verdict in {"pass", "borderline", "fail"}
    for verifier in result.verifiers:
        assert 0.0 <= verifier.score <= 1.0
        for check in verifier.checks:
            assert 0.0 <= check.score <= 1.0


@settings(max_examples=300, deadline=None)
@given(output=outputs, scorer_index=st.integers(0, len(SCORERS) - 1), with_task=st.booleans())
def test_feedback_is_non_empty_exactly_when_a_check_scored_below_one_or_was_skipped(
    output, scorer_index, with_task
):
    result = SCORERS[scorer_index].score(output, TASK if with_task else None)
    checks = [c for v in result.verifiers for c in v.checks]
    imperfect = any(c.skipped or c.score < 1.0 for c in checks)
    assert bool(result.feedback) == imperfect
    for check in checks:
        if check.skipped or check.score < 1.0:
            assert check.reason  # every sub-perfect check says why


@settings(max_examples=200, deadline=None)
@given(output=outputs)
def test_as_dict_is_always_json_serializable(output):
    import json

    data = SCORERS[1].score(output, TASK).as_dict()
    assert json.loads(json.dumps(data))["score"] == data["score"]


@settings(max_examples=300, deadline=None)
@given(phrase=st.text())
def test_a_quoted_phrase_is_its_json_string_literal(phrase):
    """Reasons quote phrases as JSON string literals (quoting.py), built without json.dumps."""
    import json

    from verifiers_app.engine.quoting import quote

    assert quote(phrase) == json.dumps(phrase, ensure_ascii=False)


@settings(max_examples=300, deadline=None)
@given(output=outputs, scorer_index=st.integers(0, len(SCORERS) - 1), with_task=st.booleans())
def test_feedback_read_first_is_the_feedback_of_the_details(output, scorer_index, with_task):
    """The feedback text is built on its own when read first (as GEPA reads it);
    it is the skipped and sub-perfect checks' lines of the full result, in order."""
    scorer = SCORERS[scorer_index]
    task = TASK if with_task else None
    first = scorer.score(output, task).feedback
    details = scorer.score(output, task)
    lines = [
        f"{v.id}/{c.id}: {c.reason}"
        for v in details.verifiers
        for c in v.checks
        if c.skipped or c.score < 1.0
    ]
    assert first == "\n".join(lines) == details.as_dict()["feedback"]
