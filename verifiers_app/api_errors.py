"""The one error body of the JSON API: `{"detail": str, "problems": [{"field", "message"}]}`.

Every 4xx the API answers (bad shape, bad spec, bad config, not found, wrong
method, too large …) has this shape, so a client reads errors one way. It lives
here, in the lowest layer with an API, so every router can name it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ninja import Schema


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


def error_body(detail: str, problems: Iterable[tuple[str, str]] = ()) -> dict:
    return {"detail": detail, "problems": [{"field": field, "message": message} for field, message in problems]}


SOURCES = ("body", "query", "path", "header", "cookie", "form", "file")


def validation_problems(errors: Iterable[dict], *, tags: Iterable[str] = ()) -> list[tuple[str, str]]:
    """pydantic/ninja error dicts → (field path, message). Where ninja read the
    value (body + the view's argument name, query, path) is not part of the
    path, nor are union `tags` (a discriminated union adds its tag to `loc`)."""
    tags = set(tags)
    problems = []
    for item in errors:
        loc = [str(part) for part in item.get("loc", ())]
        if loc and loc[0] in SOURCES:
            loc = loc[2:] if loc[0] == "body" else loc[1:]
        loc = [part for part in loc if part not in tags]
        problems.append((".".join(loc) or "body", str(item.get("msg", "invalid")).removeprefix("Value error, ")))
    return problems
