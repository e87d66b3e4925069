"""The one exception a caller of the engine has to handle, and the one way a
pydantic validation error becomes problems a person reads (engine, API, CLI,
import files and LM configs all word them alike)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class SpecError(ValueError):
    """A verifier spec, task row, aggregator or thresholds value is invalid.

    ``problems`` lists every problem found, each ``"field.path: message"``
    (e.g. ``"checks[2].params.pattern: invalid regular expression: …"``).
    ``str(error)`` is the first problem, plus a count of the others, so it fits
    on one line of a CLI or form error.
    """

    def __init__(self, problems: str | list[str]) -> None:
        if isinstance(problems, str):
            problems = [problems]
        self.problems: list[str] = list(problems) or ["spec: invalid"]
        message = self.problems[0]
        if len(self.problems) > 1:
            others = len(self.problems) - 1
            message += f" (and {others} more problem{'s' if others > 1 else ''})"
        super().__init__(message)

    def prefixed(self, prefix: str) -> SpecError:
        """The same problems with ``prefix`` in front of each field path."""
        return SpecError([f"{prefix}{problem}" for problem in self.problems])


def join_path(prefix: str, loc: Iterable[str | int]) -> str:
    """A pydantic location as a field path: ``checks[0].params.value``."""
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path = f"{path}.{part}" if path else str(part)
    return path


def dotted_path(prefix: str, loc: Iterable[str | int]) -> str:
    """A location the JSON API's way (``candidates.1.index``), which is how the
    launch form matches a problem to its field."""
    return ".".join([prefix, *map(str, loc)] if prefix else map(str, loc))


def problem_message(error: Mapping[str, Any]) -> str:
    """A pydantic error's message in our words."""
    kind = error.get("type", "")
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "unknown field"
    if (
        kind in ("too_short", "string_too_short")
        and (error.get("ctx") or {}).get("min_length") == 1
    ):
        return "must not be empty"
    return str(error.get("msg", "is invalid")).removeprefix("Value error, ")


def validation_problems(
    errors: Iterable[Mapping[str, Any]],
    *,
    prefix: str = "",
    tags: Iterable[str] = (),
    root: str = "",
    dotted: bool = False,
) -> list[tuple[str, str]]:
    """pydantic error dicts → ``(field path, message)``, one per error. Union
    ``tags`` (a discriminated union adds its tag to the location) are left out
    of the path; ``root`` names an empty path."""
    tags = set(tags)
    path = dotted_path if dotted else join_path
    return [
        (
            path(prefix, [part for part in error.get("loc", ()) if part not in tags]) or root,
            problem_message(error),
        )
        for error in errors
    ]
