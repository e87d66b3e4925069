"""Compile limits of user regexes (verifiers_app/engine/regexes.py): a pattern
that would expand to gigabytes or recurse past Python's stack is refused as a
spec error before the `regex` package sees it."""

from __future__ import annotations

import pytest

from verifiers_app.engine import SpecError, lint_spec, regexes, score


def regex_spec(pattern: str) -> dict:
    return {"id": "v", "checks": [{"id": "code", "type": "regex", "params": {"pattern": pattern}}]}


def only_problem(pattern: str) -> str:
    problems = lint_spec(regex_spec(pattern))
    assert len(problems) == 1, problems
    return problems[0]


def test_a_counted_repeat_above_the_cap_is_a_spec_error_naming_the_check_and_param():
    # Before the cap this line made the `regex` package allocate ~20 GB.
    assert only_problem("a{1000000000}") == (
        "checks[0].params.pattern: invalid regular expression: counted repeat {1000000000} "
        "is above the limit of 1,000 repetitions at position 1"
    )


@pytest.mark.parametrize("repeat", ["{1001}", "{2,5000}", "{,5000}", "{5000,}"])
def test_either_bound_of_a_counted_repeat_above_the_cap_is_refused(repeat):
    assert f"counted repeat {repeat} is above the limit" in only_problem("x" + repeat)


def test_groups_nested_a_thousand_deep_are_a_spec_error_not_a_recursion_error():
    problem = only_problem("(" * 1000 + "a" + ")" * 1000)
    assert problem == (
        f"checks[0].params.pattern: invalid regular expression: groups nested more than "
        f"{regexes.MAX_GROUP_DEPTH} deep at position {regexes.MAX_GROUP_DEPTH}"
    )


def test_nested_repeats_whose_product_is_too_large_are_refused():
    # Each count is allowed; together they expand to a million items (7.6 s, 290 MB to compile).
    assert "counted repeats expand the pattern to more than 50,000 items" in only_problem(
        "(a{1000}){1000}"
    )
    assert "expand the pattern" in only_problem(r"\d{1000}" * 60)


def test_a_pattern_longer_than_the_cap_is_refused():
    assert only_problem("a" * 10_001).endswith(
        "pattern is 10,001 characters long; the limit is 10,000"
    )


@pytest.mark.parametrize(
    "pattern",
    [
        r"\d{3}-\d{4}",
        "a{1000}",
        "(?:[a-z]{10}){100}",
        "a{b}",
        "[{]{3}",
        r"\\{5}",
        r"\p{L}{2,5}",
        "(" * regexes.MAX_GROUP_DEPTH + "a" + ")" * regexes.MAX_GROUP_DEPTH,
        r"\{99999\}",
        "[a{99999}]",
    ],
)
def test_ordinary_patterns_and_braces_that_are_not_repeats_still_compile(pattern):
    assert lint_spec(regex_spec(pattern)) == []


def test_at_scoring_time_a_too_costly_pattern_scores_zero_with_the_reason():
    check = score(regex_spec("a{1000000000}"), "aaa").verifiers[0].checks[0]
    assert check.score == 0.0
    assert "counted repeat {1000000000} is above the limit of 1,000 repetitions" in check.reason


def test_a_row_verifier_regex_match_with_a_huge_repeat_scores_zero_without_compiling_it():
    task = {
        "task_id": "t",
        "verifier": {"kind": "in_process", "fn_name": "regex_match", "expected": "a{1000000000}"},
    }
    result = score([], "aaa", task)
    row = result.verifiers[0].checks[0]
    assert row.score == 0.0 and "above the limit" in row.reason


def test_creating_a_verifier_refuses_it_with_the_field(db, user):
    from verifiers_app.services import verifier_create

    with pytest.raises(
        SpecError, match=r"checks\[0\]\.params\.pattern: invalid regular expression: counted repeat"
    ):
        verifier_create(owner=user, spec=regex_spec("(x{1000000000})"))


def test_a_task_row_whose_regex_match_pattern_is_too_costly_is_refused_at_import(user):
    from optimizer.tasksets.services import taskset_import

    rows = (
        '{"task_id": "a", "input": "x", "expected": "a{1000000000}", "verifier": {"kind": "in_process", "fn_name": "regex_match"}}\n'
        '{"task_id": "b", "input": "x", "verifier": {"kind": "in_process", "fn_name": "regex_match", "expected": "(x{2000})"}}'
    )
    with pytest.raises(SpecError) as error:
        taskset_import(
            owner=user,
            name="s",
            filename="t.jsonl",
            content=rows,
            fmt="",
            mapping=None,
            shared=None,
        )
    assert error.value.problems == [
        "t.jsonl line 1: expected: invalid regular expression: counted repeat {1000000000} is above the limit "
        "of 1,000 repetitions at position 1",
        "t.jsonl line 2: verifier.expected: invalid regular expression: counted repeat {2000} is above the limit "
        "of 1,000 repetitions at position 2",
    ]
