"""Across verifiers (docs/verifier-semantics.md "Across verifiers"): aggregators, verdicts, required overrides, result shape."""

from __future__ import annotations

import json
import math

import pytest

from verifiers_app.engine import SpecError, compile_specs, register_fn, score

register_fn("test_fixed_score", lambda output, expected, params: float(expected))


def fixed(verifier_id: str, value: float, **extra) -> dict:
    """A verifier that always scores ``value``."""
    return {
        "id": verifier_id,
        "kind": "in_process",
        "fn_name": "test_fixed_score",
        "expected": value,
        **extra,
    }


THREE = [fixed("correctness", 0.9), fixed("format", 0.8), fixed("efficiency", 0.7)]


class TestAggregators:
    def test_weighted_average_with_equal_weights_is_the_plain_mean(self):
        result = score(THREE, "x")
        assert result.score == pytest.approx(0.8)
        assert result.verdict == "pass"  # 0.7999… counts as reaching 0.8

    def test_weighted_average_uses_the_verifier_weights(self):
        specs = [
            fixed("correctness", 0.9, weight=3),
            fixed("format", 0.8),
            fixed("efficiency", 0.7),
        ]
        # The original example printed 0.86, but its own formula gives (docs/verifier-semantics.md "Across verifiers") (0.9×3 + 0.8 + 0.7) / 5 = 0.84.
        assert score(specs, "x").score == pytest.approx(0.84)

    def test_minimum_and_maximum(self):
        assert score(THREE, "x", aggregator="minimum").score == pytest.approx(0.7)
        assert score(THREE, "x", aggregator={"type": "maximum"}).score == pytest.approx(0.9)

    def test_safety_gate_scores_zero_and_fails_when_a_gate_fails(self):
        specs = [fixed("safety", 0.5), fixed("quality", 1.0)]
        result = score(specs, "x", aggregator={"type": "safety_gate", "required": ["safety"]})
        assert (result.score, result.verdict) == (0.0, "fail")

    def test_safety_gate_averages_the_rest_when_the_gates_pass(self):
        specs = [fixed("safety", 1.0), fixed("quality", 0.6), fixed("style", 0.8)]
        result = score(specs, "x", aggregator={"type": "safety_gate", "required": ["safety"]})
        assert result.score == pytest.approx(0.7)

    def test_safety_gate_also_gates_on_required_verifiers(self):
        specs = [fixed("safety", 0.9, required=True), fixed("quality", 1.0)]
        assert score(specs, "x", aggregator="safety_gate").score == 0.0

    def test_safety_gate_rejects_an_unknown_gate_id(self):
        with pytest.raises(SpecError, match=r'aggregator.required\[0\]: no verifier has id "nope"'):
            compile_specs(THREE, aggregator={"type": "safety_gate", "required": ["nope"]})

    def test_all_or_nothing_keeps_the_mean_when_every_verifier_reaches_the_threshold(self):
        assert score(
            THREE, "x", aggregator={"type": "all_or_nothing", "threshold": 0.7}
        ).score == pytest.approx(0.8)

    def test_all_or_nothing_scores_zero_when_one_verifier_is_below(self):
        assert (
            score(THREE, "x", aggregator={"type": "all_or_nothing", "threshold": 0.75}).score == 0.0
        )
        assert (
            score([fixed("a", 0.69), fixed("b", 1.0)], "x", aggregator="all_or_nothing").score
            == 0.0
        )

    def test_an_unknown_aggregator_is_a_spec_error(self):
        with pytest.raises(SpecError, match="aggregator.type: unknown aggregator"):
            compile_specs(THREE, aggregator="median")

    def test_an_aggregator_field_it_does_not_take_is_a_spec_error(self):
        with pytest.raises(SpecError, match="aggregator.threshold: unknown field for minimum"):
            compile_specs(THREE, aggregator={"type": "minimum", "threshold": 0.5})


class TestVerdicts:
    @pytest.mark.parametrize(
        ("value", "verdict"),
        [(0.8, "pass"), (0.79, "borderline"), (0.6, "borderline"), (0.59, "fail")],
    )
    def test_default_thresholds(self, value, verdict):
        assert score(fixed("v", value), "x").verdict == verdict

    def test_thresholds_are_configurable(self):
        thresholds = {"pass": 0.9, "borderline": 0.7}
        assert score(fixed("v", 0.85), "x", thresholds=thresholds).verdict == "borderline"
        assert score(fixed("v", 0.65), "x", thresholds=thresholds).verdict == "fail"

    def test_invalid_thresholds_are_a_spec_error(self):
        with pytest.raises(
            SpecError, match="thresholds.borderline: must not be above thresholds.pass"
        ):
            compile_specs(THREE, thresholds={"pass": 0.5, "borderline": 0.7})
        with pytest.raises(SpecError, match="thresholds.pass: must be a number between 0 and 1"):
            compile_specs(THREE, thresholds={"pass": 2})

    def test_a_failed_required_check_forces_fail_whatever_the_score(self):
        spec = {
            "id": "v",
            "checks": [
                {"id": "json", "type": "json_valid", "required": True},
                *(
                    {"id": f"c{i}", "type": "contains", "params": {"value": "a"}, "weight": 5}
                    for i in range(3)
                ),
            ],
        }
        result = score(spec, "a")
        assert result.score > 0.9
        assert result.verdict == "fail" and not result.passed

    def test_a_required_verifier_scoring_zero_forces_fail(self):
        result = score([fixed("safety", 0.0, required=True), fixed("q", 1.0, weight=9)], "x")
        assert result.score == pytest.approx(0.9)
        assert result.verdict == "fail"

    def test_passed_needs_every_verifier_to_reach_its_pass_threshold(self):
        assert score([fixed("a", 0.9, passThreshold=0.8), fixed("b", 1.0)], "x").passed
        assert not score([fixed("a", 0.7, passThreshold=0.8), fixed("b", 1.0)], "x").passed

    def test_scores_are_clamped_to_the_unit_interval_and_nan_is_zero(self):
        assert score(fixed("v", 3.0), "x").score == 1.0
        assert score(fixed("v", -1.0), "x").score == 0.0
        assert score(fixed("v", math.nan), "x").score == 0.0


class TestResultShape:
    def test_as_dict_has_the_architecture_shape_and_is_json(self):
        spec = {
            "id": "v",
            "name": "V",
            "checks": [
                {"id": "has-refund", "type": "contains", "params": {"value": "refund"}},
                {"id": "json", "type": "json_valid", "weight": 2},
            ],
        }
        data = json.loads(json.dumps(score(spec, "a refund").as_dict()))
        assert set(data) == {
            "score",
            "verdict",
            "passed",
            "verifiers",
            "hits",
            "misses",
            "feedback",
        }
        assert set(data["verifiers"][0]) == {"id", "name", "score", "weight", "passed", "checks"}
        assert set(data["verifiers"][0]["checks"][0]) == {
            "id",
            "type",
            "weight",
            "required",
            "score",
            "skipped",
            "reason",
        }
        assert data["hits"] == ['v/has-refund: output contains "refund"']
        assert data["misses"] == [f"v/json: {data['verifiers'][0]['checks'][1]['reason']}"]
        assert data["feedback"] == data["misses"][0]
        assert data["score"] == pytest.approx(1 / 3)

    def test_feedback_lists_every_sub_perfect_reason_in_check_order(self):
        specs = [
            {
                "id": "a",
                "checks": [
                    {"id": "one", "type": "contains", "params": {"value": "x"}},
                    {"id": "two", "type": "min_length", "params": {"value": 50}},
                ],
            },
            {"id": "b", "checks": [{"id": "three", "type": "json_valid"}]},
        ]
        lines = score(specs, "y").feedback.splitlines()
        assert [line.split(":")[0] for line in lines] == ["a/one", "a/two", "b/three"]

    def test_verifier_ids_are_the_spec_ids_in_order(self):
        assert compile_specs(THREE).verifier_ids == ["correctness", "format", "efficiency"]

    def test_duplicate_verifier_ids_are_a_spec_error(self):
        with pytest.raises(SpecError, match=r'specs\[1\].id: duplicate verifier id "a"'):
            compile_specs([fixed("a", 1.0), fixed("a", 0.5)])

    def test_a_duplicate_id_names_its_own_place_when_an_earlier_spec_is_invalid(self):
        with pytest.raises(SpecError) as caught:
            compile_specs([{"id": "broken"}, fixed("a", 1.0), fixed("a", 0.5)])
        assert caught.value.problems == [
            "specs[0].checks: is required",
            'specs[2].id: duplicate verifier id "a"',
        ]
