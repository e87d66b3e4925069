"""Task rows: strict validation for imports, lenient compilation for scoring.

A task row is ``{task_id, input, expected, params, metadata: {expectations:
{mustMention, mustNotMention}, expectedOutputSchema}, verifier: {kind:
in_process, fn_name, expected?, params}}``; other keys (``split``,
``instruction`` …) are left alone.

At scoring time a task that cannot be used at all (not an object, a bad row
verifier) raises :class:`SpecError`; a problem inside ``metadata`` only fails
the check that reads it (score 0, the problem as its reason).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import regexes
from .errors import SpecError
from .expectations import NO_EXPECTATIONS, Expectations, parse_expectations
from .json_types import JSONObject
from .specs import parse_row_verifier
from .verifiers import CompiledVerifier, build_row_verifier


class CompiledTask:
    __slots__ = (
        "expectations",
        "expectations_problems",
        "expected",
        "params",
        "raw",
        "row",
        "schema_keys",
        "schema_problems",
        "target",
    )

    def __init__(
        self,
        raw: JSONObject | None = None,
        expected: Any = None,
        params: JSONObject | None = None,
        target: JSONObject | None = None,
        expectations: Expectations = NO_EXPECTATIONS,
        expectations_problems: Iterable[str] = (),
        schema_keys: tuple[str, ...] | None = None,
        schema_problems: Iterable[str] = (),
        row: CompiledVerifier | None = None,
    ) -> None:
        self.raw = raw
        self.expected = expected
        self.params = params or {}
        self.target = target if target is not None else {}
        self.expectations = expectations
        self.expectations_problems = list(expectations_problems)
        self.schema_keys = schema_keys
        self.schema_problems = list(schema_problems)
        self.row = row


NO_TASK = CompiledTask()


def _schema_keys(schema: Any, path: str) -> tuple[tuple[str, ...] | None, list[str]]:
    if schema is None:
        return None, []
    if not isinstance(schema, dict):
        return None, [f"{path}: must be a JSON Schema object"]
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(k, str) and k for k in required):
        return None, [f"{path}.required: must be a list of key names"]
    return tuple(required), []


def _metadata(task: JSONObject) -> tuple[JSONObject, list[str]]:
    metadata = task.get("metadata")
    if metadata is None:
        return {}, []
    if not isinstance(metadata, dict):
        return {}, ["metadata: must be an object"]
    return metadata, []


def compile_task(task: Any) -> CompiledTask:
    """What scoring needs from a task row (see the module docstring)."""
    if task is None:
        return NO_TASK
    if not isinstance(task, dict):
        raise SpecError(f"task: must be an object, got {type(task).__name__}")
    metadata, problems = _metadata(task)
    params = task.get("params") or {}
    if not isinstance(params, dict):
        problems.append("params: must be an object")
    if problems:
        raise SpecError(problems)
    row = None
    if task.get("verifier") is not None:
        normalized, row_problems = parse_row_verifier(task["verifier"])
        if row_problems or normalized is None:
            raise SpecError(row_problems)
        row = build_row_verifier(normalized, task.get("expected"), params)
    expectations, expectation_problems = parse_expectations(
        metadata.get("expectations"), "metadata.expectations"
    )
    schema_keys, schema_problems = _schema_keys(
        metadata.get("expectedOutputSchema"), "metadata.expectedOutputSchema"
    )
    target = {
        "task_id": task.get("task_id"),
        "input": task.get("input"),
        "expected": task.get("expected"),
        "params": params,
        "metadata": metadata,
    }
    return CompiledTask(
        task,
        task.get("expected"),
        params,
        target,
        expectations,
        expectation_problems,
        schema_keys,
        schema_problems,
        row,
    )


def _costly_pattern(pattern: Any, field: str) -> list[str]:
    """A regex_match pattern too costly to compile is refused with the task (a
    pattern that merely does not compile still scores 0 when scored, as before)."""
    try:
        regexes.check_pattern_cost(str(pattern if pattern is not None else ""))
    except regexes.RegexTooCostly as exc:
        return [f"{field}: invalid regular expression: {exc}"]
    return []


def validate_task(task: Any, *, require_task_id: bool = True) -> JSONObject:
    """The task with its row verifier normalized; :class:`SpecError` listing
    every problem (``metadata.expectations.mustMention[0].anyOf: must not be
    empty``, ``verifier.fn_name: unknown fn …; registered fns: …``) otherwise."""
    if not isinstance(task, dict):
        raise SpecError(f"task: must be an object, got {type(task).__name__}")
    problems: list[str] = []
    task_id = task.get("task_id")
    if task_id is None:
        if require_task_id:
            problems.append("task_id: is required")
    elif isinstance(task_id, bool) or not isinstance(task_id, (str, int)) or task_id == "":
        problems.append("task_id: must be a non-empty string")
    metadata, metadata_problems = _metadata(task)
    problems += metadata_problems
    if "params" in task and task["params"] is not None and not isinstance(task["params"], dict):
        problems.append("params: must be an object")
    problems += parse_expectations(metadata.get("expectations"), "metadata.expectations")[1]
    problems += _schema_keys(metadata.get("expectedOutputSchema"), "metadata.expectedOutputSchema")[
        1
    ]
    normalized = dict(task)
    if task.get("verifier") is not None:
        row, row_problems = parse_row_verifier(task["verifier"])
        problems += row_problems
        normalized["verifier"] = row
        if row is not None and row["fn_name"] == "regex_match":
            problems += _costly_pattern(
                row.get("expected", task.get("expected")),
                "verifier.expected" if "expected" in row else "expected",
            )
    if problems:
        raise SpecError(problems)
    return normalized
