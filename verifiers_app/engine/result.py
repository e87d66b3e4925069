"""What scoring returns. Built cheaply on the hot path; the per-check objects,
hits, misses and feedback are materialized on first access."""

from __future__ import annotations

from typing import Any

from .checks import Outcome
from .verifiers import CompiledCheck, VerifierOutcome


class CheckResult:
    __slots__ = ("id", "reason", "required", "score", "skipped", "type", "weight")

    def __init__(
        self,
        id: str,
        type: str,
        weight: float,
        required: bool,
        score: float,
        skipped: bool,
        reason: str | None,
    ) -> None:
        self.id, self.type, self.weight, self.required = id, type, weight, required
        self.score, self.skipped, self.reason = score, skipped, reason

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "weight": self.weight,
            "required": self.required,
            "score": self.score,
            "skipped": self.skipped,
            "reason": self.reason,
        }

    def __repr__(self) -> str:
        return f"CheckResult(id={self.id!r}, score={self.score!r}, skipped={self.skipped}, reason={self.reason!r})"


class VerifierResult:
    __slots__ = ("checks", "id", "kind", "name", "passed", "required", "score", "weight")

    def __init__(
        self,
        id: str,
        name: str,
        kind: str,
        score: float,
        weight: float,
        required: bool,
        passed: bool,
        checks: list[CheckResult],
    ) -> None:
        self.id, self.name, self.kind, self.score = id, name, kind, score
        self.weight, self.required, self.passed, self.checks = weight, required, passed, checks

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "score": self.score,
            "weight": self.weight,
            "passed": self.passed,
            "checks": [c.as_dict() for c in self.checks],
        }

    def __repr__(self) -> str:
        return f"VerifierResult(id={self.id!r}, score={self.score!r}, passed={self.passed})"


class Result:
    """``score`` (continuous, what GEPA optimizes), ``verdict`` (pass /
    borderline / fail), ``passed`` (every verifier passed), ``verifiers``,
    ``hits``, ``misses`` and ``feedback``; ``as_dict()`` is the JSON shape."""

    __slots__ = (
        "_feedback",
        "_lines",
        "_outcomes",
        "_short",
        "_verifiers",
        "passed",
        "score",
        "verdict",
    )

    def __init__(
        self,
        score: float,
        verdict: str,
        passed: bool,
        outcomes: list[VerifierOutcome],
        short: list[tuple[CompiledCheck, Outcome | None]],
    ) -> None:
        self.score = score
        self.verdict = verdict
        self.passed = passed
        self._outcomes = outcomes
        self._short = short  # (check, outcome or None when skipped) of each feedback line
        self._verifiers: list[VerifierResult] | None = None
        self._lines: tuple[list[str], list[str], list[str]] | None = None
        self._feedback: str | None = None

    @property
    def verifiers(self) -> list[VerifierResult]:
        if self._verifiers is None:
            self._verifiers = [
                VerifierResult(
                    v.id,
                    v.name,
                    v.kind,
                    score,
                    v.weight,
                    v.required,
                    passed,
                    [
                        CheckResult(c.id, c.type, c.weight, c.required, 0.0, True, c.skip_reason)
                        if raw is None
                        else CheckResult(c.id, c.type, c.weight, c.required, raw[0], False, raw[1])
                        for c, raw in zip(v.checks, raws)
                    ],
                )
                for v, score, passed, raws in self._outcomes
            ]
        return self._verifiers

    def _collect(self) -> tuple[list[str], list[str], list[str]]:
        if self._lines is None:
            hits: list[str] = []
            misses: list[str] = []
            feedback: list[str] = []
            for v, _, _, raws in self._outcomes:
                for c, raw in zip(v.checks, raws):
                    if raw is None:
                        feedback.append(f"{c.label}{c.skip_reason}")
                    elif raw[0] >= 1.0:
                        hits.append(f"{c.label}{c.hit}")
                    else:
                        line = f"{c.label}{raw[1]}"
                        misses.append(line)
                        feedback.append(line)
            self._lines = (hits, misses, feedback)
        return self._lines

    @property
    def hits(self) -> list[str]:
        return self._collect()[0]

    @property
    def misses(self) -> list[str]:
        return self._collect()[1]

    @property
    def feedback(self) -> str:
        """One line per check that scored below 1 or was skipped, in order. Built
        on first read, without the hits (what GEPA's reflection reads per output)."""
        if self._feedback is None:
            lines = []
            for c, raw in self._short:
                lines.append(f"{c.label}{c.skip_reason}" if raw is None else f"{c.label}{raw[1]}")
            self._feedback = "\n".join(lines)
        return self._feedback

    def as_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "verdict": self.verdict,
            "passed": self.passed,
            "verifiers": [v.as_dict() for v in self.verifiers],
            "hits": list(self.hits),
            "misses": list(self.misses),
            "feedback": self.feedback,
        }

    def __repr__(self) -> str:
        return f"Result(score={self.score!r}, verdict={self.verdict!r}, passed={self.passed})"
