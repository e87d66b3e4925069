"""Native check types (docs/verifier-semantics.md "Native verifiers"): scores, partial credit, aliases and reasons."""

from __future__ import annotations

import json

import pytest

from verifiers_app.engine import REGEX_BUDGET_SECONDS, REGEX_TIMEOUT_SECONDS, compile_specs, score
from verifiers_app.engine import scoring as scoring_module


def run_check(check: dict, output: str, task: dict | None = None):
    """The single check result of a one-check native verifier."""
    spec = {"id": "v", "kind": "native", "checks": [{"id": "c", **check}]}
    result = score(spec, output, task)
    return result.verifiers[0].checks[0]


def expectations_task(must=(), must_not=()) -> dict:
    return {
        "task_id": "t",
        "metadata": {"expectations": {"mustMention": list(must), "mustNotMention": list(must_not)}},
    }


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
FACILITY_TASK = expectations_task(
    must=[
        {"anyOf": ['"urgency": "high"'], "message": "urgency should be high"},
        {"text": "negative", "message": "sentiment should be negative"},
        {"anyOf": ["elevator", "lift"], "message": "categories should include elevator"},
        {"text": "maintenance", "message": "categories should include maintenance"},
    ]
)


class TestWorkedExample:
    def test_a_clean_correct_answer_scores_one(self):
        output = json.dumps(
            {"urgency": "high", "sentiment": "negative", "categories": ["elevator", "maintenance"]}
        )
        result = score(FACILITY_SPEC, output, FACILITY_TASK)
        assert result.score == pytest.approx(1.0)
        assert result.verdict == "pass" and result.passed
        assert result.feedback == ""

    def test_a_partly_right_answer_lands_between_point_seven_and_point_eight(self):
        output = json.dumps(
            {
                "urgency": "medium",
                "sentiment": "negative",
                "categories": ["elevator", "maintenance"],
            }
        )
        result = score(FACILITY_SPEC, output, FACILITY_TASK)
        assert 0.7 <= result.score <= 0.9
        assert result.score == pytest.approx((4 * 0.75 + 2 + 1) / 7)
        assert 'urgency should be high (expected: "\\"urgency\\": \\"high\\"")' in result.feedback

    def test_freeform_prose_scores_near_point_one(self):
        output = "The tenant is furious that the elevator is broken again; this looks urgent to me."
        result = score(FACILITY_SPEC, output, FACILITY_TASK)
        assert result.score == pytest.approx(0.1, abs=0.05)
        assert result.verdict == "fail"
        assert "output is not valid JSON" in result.feedback


class TestTaskExpectations:
    def test_it_gives_partial_credit_per_missed_entry(self):
        task = expectations_task(
            must=[{"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": "zzz"}]
        )
        assert run_check({"type": "task_expectations"}, "a b c", task).score == pytest.approx(0.75)

    def test_it_matches_any_phrase_of_anyof_case_insensitively(self):
        task = expectations_task(
            must=[{"anyOf": ["refund", "money back"], "message": "offer a refund"}]
        )
        assert (
            run_check({"type": "task_expectations"}, "You get your MONEY BACK.", task).score == 1.0
        )

    def test_it_quotes_the_expected_phrases_after_the_message(self):
        task = expectations_task(
            must=[
                {"anyOf": ["refund", "money back"], "message": "the answer should offer a refund"}
            ]
        )
        check = run_check({"type": "task_expectations"}, "Sorry.", task)
        assert check.score == 0.0
        assert (
            check.reason
            == 'the answer should offer a refund (expected one of: "refund", "money back")'
        )

    def test_it_quotes_the_forbidden_phrases_that_were_found(self):
        task = expectations_task(
            must=[{"text": "refund"}],
            must_not=[
                {"anyOf": ["gift card", "store credit"], "message": "do not push a gift card"}
            ],
        )
        check = run_check(
            {"type": "task_expectations"}, "A refund or a Gift Card, your choice.", task
        )
        assert check.score == pytest.approx(0.5)
        assert check.reason == 'do not push a gift card (found: "gift card")'

    def test_it_scores_one_when_the_task_has_no_expectations(self):
        assert run_check({"type": "task_expectations"}, "anything", None).score == 1.0
        assert (
            run_check({"type": "task_expectations"}, "anything", expectations_task()).score == 1.0
        )

    def test_it_uses_a_default_message_when_an_entry_has_none(self):
        task = expectations_task(must=[{"text": "refund"}])
        assert run_check({"type": "task_expectations"}, "no", task).reason == (
            'output is missing an expected phrase (expected: "refund")'
        )

    def test_a_plain_string_entry_means_that_phrase_and_its_reason_names_it(self):
        task = expectations_task(must=["refund"], must_not=["gift card"])
        assert run_check({"type": "task_expectations"}, "Here is your REFUND.", task).score == 1.0
        check = run_check({"type": "task_expectations"}, "Have a gift card.", task)
        assert check.score == 0.0
        assert check.reason == (
            'output is missing an expected phrase (expected: "refund"); '
            'output contains a phrase it must not (found: "gift card")'
        )

    def test_an_entry_of_the_wrong_shape_shows_the_accepted_shapes(self):
        check = run_check({"type": "task_expectations"}, "text", expectations_task(must=[42]))
        assert (
            'mustMention[0]: must be a phrase or an object with anyOf or text, e.g. "refund"'
            in check.reason
        )

    def test_it_scores_zero_with_the_problem_when_the_task_has_an_empty_anyof(self):
        task = expectations_task(must=[{"anyOf": []}])
        check = run_check({"type": "task_expectations"}, "text", task)
        assert check.score == 0.0
        assert "metadata.expectations.mustMention[0].anyOf: must not be empty" in check.reason


class TestSubstringChecks:
    def test_contains_is_case_insensitive_by_default(self):
        assert (
            run_check({"type": "contains", "params": {"value": "Refund"}}, "a REFUND").score == 1.0
        )

    def test_contains_honours_case_sensitive(self):
        check = run_check(
            {"type": "contains", "params": {"value": "Refund", "caseSensitive": True}}, "a refund"
        )
        assert check.score == 0.0
        assert check.reason == 'output does not contain "Refund" (case-sensitive)'

    def test_contains_says_what_is_missing(self):
        assert (
            run_check({"type": "contains", "params": {"value": "refund"}}, "no").reason
            == 'output does not contain "refund"'
        )

    def test_must_contain_is_an_alias_of_contains_and_text_of_value(self):
        check = run_check({"type": "must_contain", "params": {"text": "refund"}}, "refund")
        assert (check.type, check.score) == ("contains", 1.0)

    def test_not_contains_fails_when_the_phrase_is_present_in_any_case(self):
        check = run_check({"type": "not_contains", "params": {"value": "gift card"}}, "A GIFT CARD")
        assert check.score == 0.0
        assert check.reason == 'output must not contain "gift card"'

    def test_must_not_contain_is_an_alias_of_not_contains(self):
        check = run_check({"type": "must_not_contain", "params": {"value": "x"}}, "abc")
        assert (check.type, check.score) == ("not_contains", 1.0)

    def test_not_contains_honours_case_sensitive(self):
        assert (
            run_check(
                {"type": "not_contains", "params": {"value": "X", "caseSensitive": True}}, "x"
            ).score
            == 1.0
        )


class TestEquals:
    def test_it_compares_the_trimmed_output_case_insensitively(self):
        assert run_check({"type": "equals", "params": {"value": "Yes"}}, "  yes \n").score == 1.0

    def test_exact_match_is_an_alias_of_equals(self):
        check = run_check({"type": "exact_match", "params": {"value": "yes"}}, "no")
        assert check.type == "equals" and check.score == 0.0
        assert check.reason == 'output does not equal "yes" (got: "no")'

    def test_it_honours_case_sensitive(self):
        assert (
            run_check(
                {"type": "equals", "params": {"value": "Yes", "caseSensitive": True}}, "yes"
            ).score
            == 0.0
        )


class TestRegex:
    def test_it_searches_anywhere_in_the_output(self):
        assert (
            run_check({"type": "regex", "params": {"pattern": r"\d{3}"}}, "call 555 now").score
            == 1.0
        )

    def test_it_is_case_sensitive(self):
        check = run_check({"type": "regex", "params": {"pattern": "Hello"}}, "hello")
        assert check.score == 0.0
        assert check.reason == 'output does not match pattern "Hello"'

    def test_it_times_out_on_catastrophic_backtracking_against_a_megabyte(self):
        # How long it takes is measured by bench/scoring.py, not asserted here.
        output = "a" * 1_000_000 + "b"
        check = run_check({"type": "regex", "params": {"pattern": "(a+)+$"}}, output)
        assert check.score == 0.0
        assert check.reason == (
            f'pattern "(a+)+$" timed out after {REGEX_TIMEOUT_SECONDS} s '
            "on a 1,000,001-character output"
        )
        assert REGEX_TIMEOUT_SECONDS < 1.0

    def test_many_catastrophic_patterns_share_one_time_budget_per_output(self):
        # (a|aa)+$ backtracks exponentially even on 41 characters. How long this takes
        # is measured by bench/scoring.py; here: which checks ran.
        spec = {
            "id": "v",
            "checks": [
                {"id": f"r{i}", "type": "regex", "params": {"pattern": "(a|aa)+$"}}
                for i in range(8)
            ],
        }
        checks = score(spec, "a" * 40 + "b").verifiers[0].checks
        assert [c.score for c in checks] == [0.0] * 8
        assert (
            checks[0].reason
            == f'pattern "(a|aa)+$" timed out after {REGEX_TIMEOUT_SECONDS} s on a 41-character output'
        )
        assert checks[-1].reason == (
            f'pattern "(a|aa)+$" not run: earlier patterns used up the {REGEX_BUDGET_SECONDS} s '
            "regex budget for one output"
        )
        assert REGEX_BUDGET_SECONDS < 8 * REGEX_TIMEOUT_SECONDS

    def test_the_regex_budget_starts_again_for_every_output(self):
        scorer = compile_specs(
            {
                "id": "v",
                "checks": [
                    {"type": "regex", "params": {"pattern": "(a|aa)+$"}},
                    {"type": "regex", "params": {"pattern": "^b"}},
                ],
            }
        )
        for _ in range(6):  # 6 × 0.25 s of timeouts: more than one budget, spread over outputs
            checks = scorer.score("a" * 40 + "b").verifiers[0].checks
            assert "timed out" in checks[0].reason
        assert scorer.score("b").score == 0.5

    def test_an_uncompilable_regex_scores_zero_with_the_error_at_scoring_time(self):
        check = run_check({"type": "regex", "params": {"pattern": "("}}, "(")
        assert check.score == 0.0
        assert check.reason.startswith('invalid regular expression "("')


class TestLengths:
    def test_min_length_says_the_actual_and_required_length(self):
        check = run_check({"type": "min_length", "params": {"value": 10}}, "short")
        assert check.score == 0.0
        assert check.reason == "output is too short: 5 characters, needs at least 10"

    def test_min_length_is_inclusive(self):
        assert run_check({"type": "min_length", "params": {"value": 5}}, "12345").score == 1.0

    def test_max_length_says_the_actual_and_allowed_length(self):
        check = run_check({"type": "max_length", "params": {"value": 3}}, "four")
        assert check.reason == "output is too long: 4 characters, must be at most 3"

    def test_max_length_is_inclusive(self):
        assert run_check({"type": "max_length", "params": {"value": 4}}, "four").score == 1.0


class TestJson:
    def test_json_valid_accepts_strict_json(self):
        assert run_check({"type": "json_valid"}, ' {"a": 1} ').score == 1.0

    def test_json_valid_rejects_a_fenced_block_and_says_why(self):
        check = run_check({"type": "json_valid"}, '```json\n{"a": 1}\n```')
        assert check.score == 0.0
        assert check.reason.startswith("output is not valid JSON (")
        assert "without a code fence" in check.reason

    def test_json_keys_names_every_missing_key(self):
        check = run_check(
            {"type": "json_keys", "params": {"requiredKeys": ["urgency", "sentiment", "x"]}},
            '{"x": 1}',
        )
        assert check.score == 0.0
        assert check.reason == 'missing required keys: "urgency", "sentiment"'

    def test_json_keys_accepts_the_keys_alias(self):
        assert run_check({"type": "json_keys", "params": {"keys": ["a"]}}, '{"a": 1}').score == 1.0

    def test_json_keys_fails_on_a_json_array(self):
        check = run_check({"type": "json_keys", "params": {"keys": ["a"]}}, '[{"a": 1}]')
        assert check.score == 0.0
        assert check.reason == 'missing required keys: "a" (output is a JSON array, not an object)'

    def test_expected_output_schema_reads_the_tasks_required_keys(self):
        task = {
            "metadata": {"expectedOutputSchema": {"type": "object", "required": ["answer", "why"]}}
        }
        check = run_check({"type": "expected_output_schema"}, '{"answer": 1}', task)
        assert check.score == 0.0
        assert check.reason == 'missing required keys: "why"'
        assert (
            run_check({"type": "expected_output_schema"}, '{"answer": 1, "why": 2}', task).score
            == 1.0
        )

    def test_expected_output_schema_passes_when_the_task_has_no_schema(self):
        assert run_check({"type": "expected_output_schema"}, "prose", {"metadata": {}}).score == 1.0

    def test_the_output_is_parsed_as_json_at_most_once_per_scoring(self, monkeypatch):
        calls = []
        real = scoring_module.loads
        monkeypatch.setattr(scoring_module, "loads", lambda text: calls.append(text) or real(text))
        spec = {
            "id": "v",
            "checks": [
                {"type": "json_valid"},
                {"type": "json_keys", "params": {"keys": ["a"]}},
                {"type": "json_keys", "params": {"keys": ["b"]}},
            ],
        }
        task = {"metadata": {"expectedOutputSchema": {"required": ["a"]}}}
        spec["checks"].append({"type": "expected_output_schema"})
        compile_specs(spec).score('{"a": 1}', task)
        assert len(calls) == 1


class TestRobustness:
    def test_an_unknown_check_type_is_skipped_and_noted(self):
        spec = {
            "id": "v",
            "checks": [
                {"id": "k", "type": "sentiment_ai"},
                {"id": "c", "type": "contains", "params": {"value": "x"}},
            ],
        }
        result = score(spec, "x")
        skipped = result.verifiers[0].checks[0]
        assert skipped.skipped and skipped.reason == 'unknown check type "sentiment_ai" (skipped)'
        assert result.score == 1.0
        assert 'v/k: unknown check type "sentiment_ai" (skipped)' in result.feedback

    def test_a_check_that_raises_scores_zero_with_the_exception_in_its_reason(self, monkeypatch):
        scorer = compile_specs(
            {"id": "v", "checks": [{"id": "c", "type": "contains", "params": {"value": "x"}}]}
        )

        def explode(ctx):
            raise RuntimeError("boom")

        scorer._verifiers[0].checks[0].run = explode
        result = scorer.score("x")
        assert result.score == 0.0
        assert result.verifiers[0].checks[0].reason == "check raised RuntimeError: boom"

    def test_a_ten_megabyte_output_scores_without_error(self):
        output = '{"urgency": "high", "blob": "' + "x" * 10_000_000 + '"}'
        spec = {
            "id": "v",
            "checks": [
                {"type": "task_expectations"},
                {"type": "contains", "params": {"value": "urgency"}},
                {"type": "regex", "params": {"pattern": r"\d+"}},
                {"type": "json_valid"},
                {"type": "json_keys", "params": {"keys": ["urgency"]}},
                {"type": "max_length", "params": {"value": 100}},
            ],
        }
        result = score(spec, output, FACILITY_TASK)
        assert 0.0 <= result.score <= 1.0
        assert "output is too long: 10000031 characters" in result.feedback
