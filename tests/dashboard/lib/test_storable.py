"""Untrusted JSON (dashboard/lib/storable.py): nesting is capped wherever JSON
from outside is read, with the field named."""

from __future__ import annotations

import json

import pytest

from dashboard.lib.storable import (
    MAX_JSON_DEPTH,
    JsonTooDeep,
    parse_json,
    storage_problems,
)
from verifiers_app.engine import SpecError
from verifiers_app.services import spec_from_json


def nested(depth: int, leaf="x"):
    for _ in range(depth):
        leaf = [leaf]
    return leaf


def test_json_nested_past_pythons_recursion_limit_is_too_deep_not_a_recursion_error():
    with pytest.raises(JsonTooDeep, match=f"^body: nested more than {MAX_JSON_DEPTH} levels deep$"):
        parse_json("[" * 10_000 + "]" * 10_000, source="body")


def test_json_that_parses_but_is_deeper_than_the_cap_names_the_field():
    text = json.dumps({"config": {"options": nested(MAX_JSON_DEPTH)}})
    with pytest.raises(
        JsonTooDeep, match=r"^config\.options\[0\]: nested more than 100 levels deep$"
    ):
        parse_json(text)
    assert parse_json(json.dumps({"config": nested(MAX_JSON_DEPTH - 2)}))  # at the cap is fine


def test_storing_a_value_deeper_than_the_cap_is_a_problem_naming_the_field():
    assert storage_problems({"expected": nested(150)}, "") == [
        "expected[0][0]: nested more than 100 levels deep"
    ]
    assert storage_problems({"expected": nested(50)}, "") == []


def test_a_spec_file_nested_too_deeply_is_a_spec_error_naming_the_file():
    with pytest.raises(
        SpecError, match=r"^spec: invalid JSON \(nested more than 100 levels deep\)$"
    ):
        spec_from_json("[" * 5000 + "]" * 5000)


def test_a_jsonl_task_line_nested_too_deeply_names_file_and_line(user):
    from optimizer.tasksets.services import taskset_import

    line = json.dumps({"task_id": "a", "input": "x", "expected": nested(150)})
    with pytest.raises(
        SpecError,
        match=r"tasks\.jsonl line 2: expected\[0\]\[0\]: nested more than 100 levels deep",
    ):
        taskset_import(
            owner=user,
            name="s",
            filename="tasks.jsonl",
            content='{"task_id": "b", "input": "y"}\n' + line,
            fmt="",
            mapping=None,
            shared=None,
        )


def test_a_nul_in_a_key_is_named_by_its_object_and_the_message_holds_no_nul():
    problems = storage_problems({"result": {"k\x00": 1}}, "")
    assert problems == [
        "result: contains a NUL character (U+0000) in a key, which cannot be stored"
    ]


def test_the_api_path_style_numbers_list_items_with_dots():
    assert storage_problems(
        {"candidates": [{"score": 1.0}, {"score": float("nan")}]}, "", dotted=True
    ) == ["candidates.1.score: nan is not a JSON number; use a finite number"]
