"""The one error body of the JSON API: `{"detail": str, "problems": [{"field", "message"}]}`.

Every 4xx the API answers (bad shape, bad spec, bad config, not found, wrong
method, too large …) has this shape, so a client reads errors one way. It lives
here, in the lowest layer with an API, so every router can name it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ninja import Schema

from verifiers_app.engine.errors import (
    validation_problems as engine_validation_problems,
)
from verifiers_app.engine.json_types import JSONObject


class Problem(Schema):
    field: str
    message: str


class ErrorOut(Schema):
    detail: str
    problems: list[Problem] = []


def split_problem(problem: str) -> tuple[str, str]:
    """`"field.path: message"` (SpecError's wording) → (field, message)."""
    field, sep, message = problem.partition(": ")
    return (field, message) if sep else ("", problem)


def error_body(detail: str, problems: Iterable[tuple[str, str]] = ()) -> JSONObject:
    return {
        "detail": detail,
        "problems": [{"field": field, "message": message} for field, message in problems],
    }


SOURCES = ("body", "query", "path", "header", "cookie", "form", "file")


def validation_problems(
    errors: Iterable[Mapping[str, Any]], *, tags: Iterable[str] = ()
) -> list[tuple[str, str]]:
    """ninja/pydantic error dicts → (field path, message), worded by the engine's
    one formatter. Where ninja read the value (body + the view's argument name,
    query, path) is not part of the path."""
    located: list[JSONObject] = []
    for item in errors:
        loc = list(item.get("loc", ()))
        if loc and loc[0] in SOURCES:
            loc = loc[2:] if loc[0] == "body" else loc[1:]
        located.append({**item, "loc": loc})
    return engine_validation_problems(located, tags=tags, root="body", dotted=True)
