"""The one exception a caller of the engine has to handle."""

from __future__ import annotations


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

    def prefixed(self, prefix: str) -> "SpecError":
        """The same problems with ``prefix`` in front of each field path."""
        return SpecError([f"{prefix}{problem}" for problem in self.problems])
