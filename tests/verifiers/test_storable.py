"""Untrusted JSON (verifiers_app/storable.py): nesting is capped wherever JSON
from outside is read, with the field named."""

from __future__ import annotations

import json

import pytest

from verifiers_app.engine import SpecError
from verifiers_app.services import spec_from_json
from verifiers_app.storable import MAX_JSON_DEPTH, JsonTooDeep, parse_json, storage_problems


def nested(depth: int, leaf="x"):
    for _ in range(depth):
        leaf = [leaf]
    return leaf


def test_json_nested_past_pythons_recursion_limit_is_too_deep_not_a_recursion_error():
    with pytest.raises(JsonTooDeep, match=f"^body: nested more than {MAX_JSON_DEPTH} levels deep$"):
        parse_json("[" * 10_000 + "]" * 10_000, source="body")


def test_json_that_parses_but_is_deeper_than_the_cap_names_the_field():
    text = json.dumps({"config": {"options": nested(MAX_JSON_DEPTH)}})
    with pytest.raises(JsonTooDeep, match=r"^config\.options\[0\]: nested more than 100 levels deep$"):
        parse_json(text)
    assert parse_json(json.dumps({"config": nested(MAX_JSON_DEPTH - 2)}))  # at the cap is fine


def test_storing_a_value_deeper_than_the_cap_is_a_problem_naming_the_field():
    assert storage_problems({"expected": nested(150)}, "") == ["expected[0][0]: nested more than 100 levels deep"]
    assert storage_problems({"expected": nested(50)}, "") == []


def test_a_spec_file_nested_too_deeply_is_a_spec_error_naming_the_file():
    with pytest.raises(SpecError, match=r"^spec: invalid JSON \(nested more than 100 levels deep\)$"):
        spec_from_json("[" * 5000 + "]" * 5000)


def test_a_jsonl_task_line_nested_too_deeply_names_file_and_line(user):
    from optimizer.taskset_services import taskset_import

    line = json.dumps({"task_id": "a", "input": "x", "expected": nested(150)})
    with pytest.raises(SpecError, match=r"tasks\.jsonl line 2: expected\[0\]\[0\]: nested more than 100 levels deep"):
        taskset_import(owner=user, name="s", filename="tasks.jsonl",
                       content='{"task_id": "b", "input": "y"}\n' + line, fmt="", mapping=None, shared=None)
