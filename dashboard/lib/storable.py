"""Can a JSON-like value be stored in a JSON column as it is?

The engine happily scores with values that PostgreSQL refuses to store: NaN and
Infinity (Python's `json` reads them, jsonb does not), NUL characters (neither
text nor jsonb can hold U+0000), and the non-JSON types YAML produces (dates,
binary). Specs and task rows are checked with `storage_problems` before they are
written, so a user gets a 400 naming the field instead of a database error (a
500) half-way through an import.

JSON from outside (request bodies, the launch form, spec and task files, run
imports) is read with `parse_json`, which also caps nesting at
`MAX_JSON_DEPTH`: `json.loads` itself stops only at Python's recursion limit
(a RecursionError, met as a 500 in the launch form), and a value nested
hundreds deep that parses can still break whatever walks it recursively later.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_PROBLEMS = 5
#: Deepest nesting of objects and arrays accepted in untrusted JSON. Specs,
#: configs and task rows need a handful of levels; 100 leaves room for deep
#: JSON Schemas while staying far from Python's recursion limit.
MAX_JSON_DEPTH = 100


class JsonTooDeep(ValueError):
    """JSON nested deeper than :data:`MAX_JSON_DEPTH`; the message names where."""


_CONTAINERS = frozenset({dict, list, tuple})


def _deeper_than_the_cap(value: Any) -> bool:
    """Level by level over containers only: a list of a million numbers costs
    one comprehension, not a million loop turns."""
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_JSON_DEPTH:
            return True
        below = []
        for item in level:
            children = item.values() if type(item) is dict else item
            if not _CONTAINERS.isdisjoint(map(type, children)):  # a C-speed pass over scalars
                below.extend([c for c in children if type(c) in _CONTAINERS])
        level = below
    return False


def depth_problem(value: Any, path: str = "") -> str | None:
    """``"path: nested more than N levels deep"`` naming the first place where
    `value` is too deep (the path is cut after a few steps), or None."""
    if not _deeper_than_the_cap(value):
        return None
    stack = [(value, 1, path, 0)]
    while stack:  # iterative: the point is not to recurse on hostile nesting
        item, depth, where, steps = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return f"{where or 'value'}: nested more than {MAX_JSON_DEPTH} levels deep"
        children = item.items() if isinstance(item, dict) else enumerate(item)
        for key, child in children:
            if isinstance(child, (dict, list, tuple)):
                if steps >= 3:  # name the field, not a hundred [0]s
                    child_path = where
                elif isinstance(key, int):
                    child_path = f"{where}[{key}]"
                else:
                    child_path = f"{where}.{key}" if where else str(key)
                stack.append((child, depth + 1, child_path, steps + 1))
    return None


def parse_json(text: str | bytes, *, source: str = "") -> Any:
    """``json.loads`` for untrusted text, nesting capped at :data:`MAX_JSON_DEPTH`.

    Raises ``json.JSONDecodeError`` as ``json.loads`` does, and
    :class:`JsonTooDeep` (a ValueError) naming the field under `source`."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonTooDeep(
            f"{source or 'value'}: nested more than {MAX_JSON_DEPTH} levels deep"
        ) from None
    problem = depth_problem(value, source)
    if problem:
        raise JsonTooDeep(problem)
    return value


def without_nul(text: str) -> str:
    """`text` fit for a database query: PostgreSQL refuses any string holding
    U+0000, so a search or lookup with one would be a 500 instead of no match."""
    return text.replace("\x00", "")


def storage_problems(value: Any, path: str, *, dotted: bool = False) -> list[str]:
    """Up to a few ``"path: message"`` problems, in document order; ``[]`` when
    `value` stores as JSON. The one check for specs, task rows, configs and run
    imports; `dotted` writes list indices as ``a.0.b`` (the API's paths)."""
    problems: list[str] = []
    too_deep = depth_problem(value, path)
    if too_deep:
        return [too_deep]

    def index(where: str, i: int) -> str:
        return (f"{where}.{i}" if where else str(i)) if dotted else f"{where}[{i}]"

    stack = [(value, path)]
    while stack and len(problems) < MAX_PROBLEMS:  # iterative: deep nesting cannot blow the stack
        item, where = stack.pop()
        if item is None or isinstance(item, (bool, int)):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                problems.append(f"{where}: {item} is not a JSON number; use a finite number")
        elif isinstance(item, str):
            if "\x00" in item:
                problems.append(
                    f"{where}: contains a NUL character (U+0000), which cannot be stored"
                )
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                if not isinstance(key, str):
                    problems.append(f"{where or 'spec'}: key {key!r} must be text (quote it)")
                    continue
                if "\x00" in key:  # named by its object: a NUL in an error message helps nobody
                    problems.append(
                        f"{where or 'value'}: contains a NUL character (U+0000) in a key, which cannot be stored"
                    )
                    continue
                stack.append((child, f"{where}.{key}" if where else key))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, index(where, i)) for i, child in reversed(list(enumerate(item))))
        else:
            problems.append(f"{where}: a {type(item).__name__} value is not JSON; quote it as text")
    return problems
