"""Can a JSON-like value be stored in a JSON column as it is?

The engine happily scores with values that PostgreSQL refuses to store: NaN and
Infinity (Python's `json` reads them, jsonb does not), NUL characters (neither
text nor jsonb can hold U+0000), and the non-JSON types YAML produces (dates,
binary). Specs and task rows are checked with `storage_problems` before they are
written, so a user gets a 400 naming the field instead of a database error (a
500) half-way through an import.
"""

from __future__ import annotations

import math
from typing import Any

MAX_PROBLEMS = 5


def without_nul(text: str) -> str:
    """`text` fit for a database query: PostgreSQL refuses any string holding
    U+0000, so a search or lookup with one would be a 500 instead of no match."""
    return text.replace("\x00", "")


def storage_problems(value: Any, path: str) -> list[str]:
    """Up to a few ``"path: message"`` problems; ``[]`` when `value` stores as JSON."""
    problems: list[str] = []
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
                problems.append(f"{where}: contains a NUL character (U+0000), which cannot be stored")
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                if not isinstance(key, str):
                    problems.append(f"{where or 'spec'}: key {key!r} must be text (quote it)")
                    continue
                child_path = f"{where}.{key}" if where else key
                stack.append((key, child_path))
                stack.append((child, child_path))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, f"{where}[{i}]") for i, child in reversed(list(enumerate(item))))
        else:
            problems.append(f"{where}: a {type(item).__name__} value is not JSON; quote it as text")
    return problems
