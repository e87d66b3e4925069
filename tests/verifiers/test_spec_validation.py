"""Spec and task validation: field paths, aliases, normalization, lint."""

from __future__ import annotations

import pytest

from verifiers_app.engine import (
    SpecError,
    compile_specs,
    lint_spec,
    score,
    spec_warnings,
    validate_spec,
    validate_task,
)


def native(*checks: dict, **top) -> dict:
    return {"id": "v", "name": "V", "kind": "native", "checks": list(checks), **top}


def error_of(spec: dict) -> str:
    with pytest.raises(SpecError) as caught:
        validate_spec(spec)
    return str(caught.value)


class TestValidateSpec:
    def test_it_rejects_a_regex_that_does_not_compile(self):
        spec = native(
            {"type": "contains", "params": {"value": "a"}},
            {"type": "json_valid"},
            {"id": "r", "type": "regex", "params": {"pattern": "(unclosed"}},
        )
        assert error_of(spec).startswith("checks[2].params.pattern: invalid regular expression: ")

    def test_it_names_a_missing_required_parameter(self):
        assert (
            error_of(native({"type": "contains", "params": {}}))
            == "checks[0].params.value: is required"
        )
        assert (
            error_of(native({"type": "json_keys"})) == "checks[0].params.requiredKeys: is required"
        )
        assert error_of(native({"type": "regex"})) == "checks[0].params.pattern: is required"

    def test_score_raises_for_a_missing_parameter_too(self):
        with pytest.raises(SpecError, match=r"checks\[0\].params.value: is required"):
            score(native({"type": "must_contain"}), "x")

    def test_it_rejects_an_unknown_parameter_so_typos_surface(self):
        spec = native({"type": "contains", "params": {"value": "a", "casesensitive": True}})
        assert error_of(spec) == "checks[0].params.casesensitive: unknown field"

    def test_it_rejects_a_value_and_its_alias_together(self):
        spec = native({"type": "contains", "params": {"value": "a", "text": "b"}})
        assert (
            error_of(spec)
            == 'checks[0].params.text: give either "value" or its alias "text", not both'
        )

    def test_it_reports_problems_under_the_alias_the_author_wrote(self):
        assert (
            error_of(native({"type": "json_keys", "params": {"keys": []}}))
            == "checks[0].params.keys: must not be empty"
        )

    def test_it_rejects_wrong_types_strictly(self):
        assert error_of(native({"type": "min_length", "params": {"value": "10"}})).startswith(
            "checks[0].params.value: "
        )
        assert error_of(
            native({"type": "contains", "params": {"value": "a", "caseSensitive": "yes"}})
        ).startswith("checks[0].params.caseSensitive: ")

    def test_it_rejects_a_non_positive_weight_and_a_threshold_outside_zero_one(self):
        assert error_of(native({"type": "json_valid", "weight": 0})).startswith(
            "checks[0].weight: "
        )
        assert error_of(native({"type": "json_valid"}, passThreshold=1.5)).startswith(
            "passThreshold: "
        )

    def test_it_needs_an_id_and_at_least_one_check(self):
        assert error_of({"kind": "native", "checks": [{"type": "json_valid"}]}) == "id: is required"
        assert error_of(native()) == "checks: must not be empty"

    def test_it_rejects_duplicate_check_ids(self):
        spec = native({"id": "a", "type": "json_valid"}, {"id": "a", "type": "json_valid"})
        assert error_of(spec) == 'checks[1].id: duplicate check id "a"'

    def test_it_reserves_the_row_id_for_task_row_verifiers(self):
        assert error_of(native({"type": "json_valid"}, id="row")).startswith(
            'id: "row" is reserved'
        )

    def test_a_non_object_spec_is_one_clear_problem(self):
        assert error_of(["not", "a", "spec"]) == "spec: must be a JSON object, got list"

    def test_it_normalizes_aliases_and_fills_defaults(self):
        spec = {
            "id": "v",
            "checks": [
                {"type": "must_contain", "params": {"text": "refund"}},
                {"type": "must_not_contain", "params": {"text": "gift card"}},
                {"id": "eq", "type": "exact_match", "params": {"value": "ok"}},
                {"type": "json_keys", "params": {"keys": ["a"]}},
                {"type": "must_contain", "params": {"value": "money"}},
            ],
        }
        normalized = validate_spec(spec)
        assert (
            normalized["kind"] == "native"
            and normalized["name"] == "v"
            and normalized["passThreshold"] == 1.0
        )
        assert [c["type"] for c in normalized["checks"]] == [
            "contains",
            "not_contains",
            "equals",
            "json_keys",
            "contains",
        ]
        assert [c["id"] for c in normalized["checks"]] == [
            "contains",
            "not_contains",
            "eq",
            "json_keys",
            "contains-2",
        ]
        assert normalized["checks"][0]["params"] == {"value": "refund", "caseSensitive": False}
        assert normalized["checks"][3]["params"] == {"requiredKeys": ["a"]}
        assert (
            normalized["checks"][0]["weight"] == 1.0
            and normalized["checks"][0]["required"] is False
        )

    def test_an_unknown_check_type_is_valid_and_kept_as_written(self):
        normalized = validate_spec(
            native({"id": "s", "type": "sentiment_ai", "params": {"model": "x"}})
        )
        assert normalized["checks"][0] == {
            "id": "s",
            "type": "sentiment_ai",
            "weight": 1.0,
            "required": False,
            "params": {"model": "x"},
        }

    def test_an_in_process_spec_needs_a_registered_fn(self):
        spec = {"id": "f", "kind": "in_process", "fn_name": "nope"}
        assert error_of(spec).startswith(
            'fn_name: unknown fn "nope"; registered fns: contains, exact_match'
        )

    def test_compile_specs_prefixes_paths_with_the_spec_index_when_there_are_several(self):
        with pytest.raises(SpecError) as caught:
            compile_specs([native({"type": "json_valid"}), native({"type": "regex"}, id="w")])
        assert str(caught.value) == "specs[1].checks[0].params.pattern: is required"


class TestLintSpec:
    def test_it_reports_every_problem_with_its_field_path(self):
        spec = {
            "id": "v",
            "passTreshold": 1,
            "checks": [
                {"type": "regex", "params": {"pattern": "("}},
                {"type": "contains", "params": {}},
                {"type": "json_keys", "params": {"keys": []}},
                {"type": "contains", "weight": -1, "params": {"value": "a", "caseSenstive": True}},
            ],
        }
        problems = lint_spec(spec)
        assert [p.split(":")[0] for p in problems] == [
            "passTreshold",
            "checks[0].params.pattern",
            "checks[1].params.value",
            "checks[2].params.keys",
            "checks[3].weight",
            "checks[3].params.caseSenstive",
        ]

    def test_it_returns_nothing_for_a_valid_spec(self):
        assert lint_spec(native({"type": "json_valid"})) == []

    def test_an_unknown_check_type_is_a_warning_suggesting_the_close_type_not_a_problem(self):
        spec = native(
            {"type": "json_valdi"},
            {"type": "must_contain", "params": {"value": "a"}},
            {"type": "sentiment_ai"},
        )
        assert lint_spec(spec) == []
        assert spec_warnings(spec) == [
            'checks[0].type: unknown check type "json_valdi" (did you mean "json_valid"? scoring skips this check)',
            'checks[2].type: unknown check type "sentiment_ai" (known types: task_expectations, contains, '
            "not_contains, regex, equals, min_length, max_length, json_valid, json_keys, expected_output_schema; "
            "scoring skips this check)",
        ]

    def test_it_has_no_warnings_for_known_types_other_kinds_or_non_specs(self):
        assert (
            spec_warnings(
                native({"type": "json_valid"}, {"type": "exact_match", "params": {"value": "a"}})
            )
            == []
        )
        assert spec_warnings({"id": "f", "kind": "format_only"}) == []
        assert spec_warnings(["not", "a", "spec"]) == []
        assert spec_warnings({"id": "v", "checks": [{"type": ["x"]}, "junk"]}) == []

    def test_a_check_type_that_is_not_text_is_a_problem_not_a_crash(self):
        assert lint_spec({"id": "v", "checks": [{"type": ["json_valid"]}]}) == [
            "checks[0].type: Input should be a valid string"
        ]

    def test_the_spec_error_message_counts_the_other_problems(self):
        spec = native({"type": "contains"}, {"type": "regex"})
        assert error_of(spec) == "checks[0].params.value: is required (and 1 more problem)"


class TestValidateTask:
    TASK = {
        "task_id": "q0",
        "input": "2 + 2?",
        "expected": "4",
        "params": {},
        "metadata": {
            "expectations": {"mustMention": [{"anyOf": ["4"], "message": "answer 4"}]},
            "expectedOutputSchema": {"required": ["answer"]},
        },
        "verifier": {
            "kind": "in_process",
            "fn_name": "contains",
            "expected": "<answer>4</answer>",
            "params": {"ignore_case": True},
        },
    }

    def test_it_accepts_a_full_row_and_normalizes_its_verifier(self):
        normalized = validate_task(self.TASK)
        assert normalized["verifier"]["fn_name"] == "contains"
        assert normalized["verifier"]["weight"] == 1.0
        assert normalized["task_id"] == "q0"

    def test_it_rejects_an_empty_anyof(self):
        task = {"task_id": "q", "metadata": {"expectations": {"mustMention": [{"anyOf": []}]}}}
        with pytest.raises(
            SpecError, match=r"metadata.expectations.mustMention\[0\].anyOf: must not be empty"
        ):
            validate_task(task)

    def test_it_rejects_an_unknown_fn_name_listing_the_registered_fns(self):
        task = {**self.TASK, "verifier": {"kind": "in_process", "fn_name": "nope"}}
        with pytest.raises(SpecError) as caught:
            validate_task(task)
        assert str(caught.value).startswith('verifier.fn_name: unknown fn "nope"; registered fns: ')

    def test_it_lists_every_problem(self):
        task = {
            "metadata": {
                "expectations": {
                    "mustMention": [{"message": "x"}],
                    "mustNotMention": [{"text": ""}],
                },
                "expectedOutputSchema": {"required": "answer"},
            },
            "verifier": {"kind": "remote", "fn_name": "contains"},
        }
        with pytest.raises(SpecError) as caught:
            validate_task(task)
        assert [p.split(":")[0] for p in caught.value.problems] == [
            "task_id",
            "metadata.expectations.mustMention[0]",
            "metadata.expectations.mustNotMention[0].text",
            "metadata.expectedOutputSchema.required",
            "verifier.kind",
        ]

    def test_task_id_can_be_optional(self):
        assert validate_task({"input": "x"}, require_task_id=False) == {"input": "x"}


def test_the_api_and_the_engine_word_a_pydantic_error_alike_and_differ_only_in_path_style():
    from dashboard.lib.api_errors import validation_problems as api_problems
    from verifiers_app.engine.errors import validation_problems

    errors = [
        {"type": "missing", "loc": ("checks", 0, "id"), "msg": "Field required"},
        {"type": "extra_forbidden", "loc": ("budgt",), "msg": "Extra inputs are not permitted"},
    ]
    assert validation_problems(errors) == [
        ("checks[0].id", "is required"),
        ("budgt", "unknown field"),
    ]
    ninja_errors = [dict(e, loc=("body", "body", *e["loc"])) for e in errors]
    assert api_problems(ninja_errors) == [
        ("checks.0.id", "is required"),
        ("budgt", "unknown field"),
    ]
