"""The verifier-fn registry (docs/verifier-semantics.md "Row verifiers") and task row verifiers."""

from __future__ import annotations

import json
import math

import pytest

from verifiers_app.engine import SpecError, compile_specs, fns, register_fn, score


def row_task(fn_name: str, expected, params=None, **extra) -> dict:
    return {
        "task_id": "q0",
        "verifier": {
            "kind": "in_process",
            "fn_name": fn_name,
            "expected": expected,
            "params": params or {},
            **extra,
        },
    }


def row_result(output: str, task: dict):
    return compile_specs([]).score(output, task)


class TestExactMatch:
    def test_it_strips_whitespace_on_both_sides(self):
        assert fns.exact_match("  42\n", " 42 ", {}) == 1.0

    def test_it_is_case_sensitive_unless_ignore_case(self):
        assert fns.exact_match("Yes", "yes", {}) == 0.0
        assert fns.exact_match("Yes", "yes", {"ignore_case": True}) == 1.0

    def test_a_miss_gets_a_generated_reason_quoting_expected_and_got(self):
        result = row_result("41", row_task("exact_match", "42"))
        assert result.score == 0.0
        assert result.feedback == 'row/exact_match: output does not exactly equal "42" (got: "41")'


class TestContains:
    def test_it_finds_a_substring(self):
        assert fns.contains("x <answer>4</answer>", "<answer>4</answer>", {}) == 1.0

    def test_an_empty_expected_never_matches(self):
        assert fns.contains("anything", "", {}) == 0.0

    def test_ignore_case_case_folds_both_sides(self):
        assert fns.contains("STRASSE", "straße", {"ignore_case": True}) == 1.0
        assert fns.contains("STRASSE", "straße", {}) == 0.0

    def test_it_stringifies_expected(self):
        assert fns.contains("answer: 4", 4, {}) == 1.0

    def test_a_miss_says_what_is_missing(self):
        result = row_result("5", row_task("contains", "<answer>4</answer>", {"ignore_case": True}))
        assert (
            result.feedback
            == 'row/contains: output does not contain "<answer>4</answer>" (ignoring case)'
        )


class TestRegexMatch:
    def test_it_searches_with_the_expected_pattern(self):
        assert fns.regex_match("total: 42", r"\d+", {}) == 1.0
        assert fns.regex_match("total", r"\d+", {}) == 0.0

    def test_ignore_case_uses_ignorecase(self):
        assert fns.regex_match("HELLO", "hello", {"ignore_case": True}) == 1.0
        assert fns.regex_match("HELLO", "hello", {}) == 0.0

    def test_a_pathological_pattern_times_out_and_scores_zero(self):
        result = row_result("a" * 200_000 + "b", row_task("regex_match", "(a+)+$"))
        assert result.score == 0.0
        assert "timed out" in result.feedback


class TestToolCallsMatch:
    EXPECTED = {"tool": "computer", "action": "left_click", "coordinate": [100, 200]}

    def test_it_matches_tool_action_and_a_coordinate_within_tolerance(self):
        output = json.dumps({"tool": "computer", "action": "left_click", "coordinate": [125, 175]})
        assert fns.tool_calls_match(output, self.EXPECTED, {}) == 1.0

    def test_the_default_tolerance_of_25_is_inclusive_on_both_axes(self):
        edge = json.dumps({"tool": "computer", "action": "left_click", "coordinate": [125, 225]})
        beyond = json.dumps({"tool": "computer", "action": "left_click", "coordinate": [126, 200]})
        assert fns.tool_calls_match(edge, self.EXPECTED, {}) == 1.0
        assert fns.tool_calls_match(beyond, self.EXPECTED, {}) == 0.0

    def test_coordinate_tolerance_is_configurable(self):
        output = json.dumps({"tool": "computer", "action": "left_click", "coordinate": [140, 200]})
        assert fns.tool_calls_match(output, self.EXPECTED, {"coordinate_tolerance": 40}) == 1.0
        assert fns.tool_calls_match(output, self.EXPECTED, {"coordinate_tolerance": 5}) == 0.0

    def test_it_strips_code_fences_and_extracts_the_object_from_prose(self):
        fenced = (
            '```json\n{"tool": "computer", "action": "left_click", "coordinate": [100, 200]}\n```'
        )
        prose = 'I will click: {"tool": "computer", "action": "left_click", "coordinate": [100, 200]} done.'
        assert fns.tool_calls_match(fenced, self.EXPECTED, {}) == 1.0
        assert fns.tool_calls_match(prose, json.dumps(self.EXPECTED), {}) == 1.0

    def test_a_different_tool_or_action_scores_zero_and_says_which(self):
        output = json.dumps({"tool": "computer", "action": "type", "coordinate": [100, 200]})
        result = row_result(output, row_task("tool_calls_match", self.EXPECTED))
        assert result.score == 0.0
        assert result.feedback == 'row/tool_calls_match: action "left_click" expected, got "type"'

    def test_ref_and_text_must_match_only_when_expected_has_them(self):
        expected = {"tool": "browser", "action": "type", "ref": "e12", "text": "hello"}
        assert (
            fns.tool_calls_match(
                '{"tool": "browser", "action": "type", "ref": "e12", "text": "hello"}', expected, {}
            )
            == 1.0
        )
        assert (
            fns.tool_calls_match(
                '{"tool": "browser", "action": "type", "ref": "e13", "text": "hello"}', expected, {}
            )
            == 0.0
        )
        assert (
            fns.tool_calls_match(
                '{"tool": "browser", "action": "type", "ref": "e99"}',
                {"tool": "browser", "action": "type"},
                {},
            )
            == 1.0
        )

    def test_an_output_without_a_json_object_scores_zero(self):
        result = row_result("I clicked it.", row_task("tool_calls_match", self.EXPECTED))
        assert result.score == 0.0
        assert "output is not a JSON object" in result.feedback

    def test_a_coordinate_miss_names_both_points(self):
        output = json.dumps({"tool": "computer", "action": "left_click", "coordinate": [180, 200]})
        assert fns.tool_call_mismatch(output, self.EXPECTED, {}) == (
            "coordinate [180, 200] is more than 25 px from the expected [100, 200]"
        )


class TestRegistry:
    def test_get_names_the_registered_fns_on_a_miss(self):
        with pytest.raises(LookupError) as caught:
            fns.get("nope")
        assert str(caught.value) == (
            'unknown fn "nope"; registered fns: ' + ", ".join(fns.registered())
        )
        assert "exact_match" in str(caught.value)

    def test_register_fn_works_as_a_decorator_and_the_fn_is_usable_from_a_row(self):
        @register_fn("test_startswith")
        def startswith(model_output, expected, params):
            return 1.0 if model_output.startswith(str(expected)) else 0.0

        assert fns.get("test_startswith") is startswith
        assert row_result("Answer: 4", row_task("test_startswith", "Answer:")).score == 1.0
        result = row_result("4", row_task("test_startswith", "Answer:"))
        assert (
            result.feedback
            == 'row/test_startswith: fn "test_startswith" scored 0.00 against expected "Answer:"'
        )

    def test_register_also_takes_name_and_fn(self):
        fns.register("test_always_half", lambda o, e, p: 0.5)
        assert row_result("x", row_task("test_always_half", None)).score == 0.5

    def test_a_fn_may_return_its_own_reason(self):
        register_fn("test_with_reason", lambda o, e, p: (0.25, 'say "please"'))
        result = row_result("x", row_task("test_with_reason", None))
        assert result.score == 0.25
        assert result.feedback == 'row/test_with_reason: say "please"'

    def test_fn_scores_are_clamped_and_nan_counts_as_zero(self):
        register_fn("test_nan", lambda o, e, p: math.nan)
        register_fn("test_big", lambda o, e, p: 7)
        assert row_result("x", row_task("test_nan", None)).score == 0.0
        assert row_result("x", row_task("test_big", None)).score == 1.0

    def test_a_fn_that_raises_scores_zero_with_the_exception(self):
        def broken(o, e, p):
            raise KeyError("answer")

        register_fn("test_broken", broken)
        result = row_result("x", row_task("test_broken", None))
        assert result.score == 0.0
        assert result.feedback == "row/test_broken: check raised KeyError: 'answer'"


class TestRowVerifiers:
    def test_the_row_verifier_is_one_more_verifier_with_id_row(self):
        spec = {"id": "has-answer", "checks": [{"type": "contains", "params": {"value": "answer"}}]}
        result = score(spec, "<answer>4</answer>", row_task("contains", "<answer>5</answer>"))
        assert [v.id for v in result.verifiers] == ["has-answer", "row"]
        assert result.verifiers[1].name == "row: contains"
        assert result.score == pytest.approx(0.5)

    def test_the_row_verifier_carries_its_own_weight(self):
        spec = {"id": "has-answer", "checks": [{"type": "contains", "params": {"value": "answer"}}]}
        result = score(
            spec, "<answer>4</answer>", row_task("contains", "<answer>5</answer>", weight=3)
        )
        assert result.score == pytest.approx(0.25)

    def test_the_row_verifier_falls_back_to_the_tasks_expected_and_params(self):
        task = {
            "task_id": "q",
            "expected": "YES",
            "params": {"ignore_case": True},
            "verifier": {"kind": "in_process", "fn_name": "exact_match"},
        }
        assert row_result("yes", task).score == 1.0

    def test_an_unknown_fn_name_is_a_spec_error_naming_the_field_and_the_registered_fns(self):
        with pytest.raises(SpecError) as caught:
            row_result("x", row_task("nope", "y"))
        assert str(caught.value).startswith('verifier.fn_name: unknown fn "nope"; registered fns: ')
        assert "tool_calls_match" in str(caught.value)

    def test_a_spec_level_in_process_verifier_reads_the_tasks_expected(self):
        spec = {
            "id": "exact",
            "kind": "in_process",
            "fn_name": "exact_match",
            "params": {"ignore_case": True},
        }
        assert score(spec, "Paris", {"expected": "paris"}).score == 1.0
        assert score(spec, "Lyon", {"expected": "paris"}).score == 0.0
