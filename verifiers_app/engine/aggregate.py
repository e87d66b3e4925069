"""Across the verifiers of one output (docs/verifier-semantics.md "Across verifiers"): aggregators and verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import SpecError
from .json_types import JSONObject
from .quoting import quote
from .verifiers import VerifierOutcome

#: Scores this close to a threshold count as reaching it ((0.9+0.8+0.7)/3 is 0.7999…).
EPSILON = 1e-9

AGGREGATORS = ("weighted_average", "minimum", "maximum", "safety_gate", "all_or_nothing")
DEFAULT_ALL_OR_NOTHING_THRESHOLD = 0.7
DEFAULT_THRESHOLDS = {"pass": 0.8, "borderline": 0.6}

PASS, BORDERLINE, FAIL = "pass", "borderline", "fail"


def _fraction(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise SpecError(f"{path}: must be a number between 0 and 1")
    return float(value)


@dataclass(frozen=True, slots=True)
class Aggregator:
    """``type`` is one of :data:`AGGREGATORS`; ``required`` names safety_gate's
    gates (verifiers with ``required: true`` are gates too)."""

    type: str = "weighted_average"
    required: tuple[str, ...] = ()
    threshold: float = DEFAULT_ALL_OR_NOTHING_THRESHOLD

    def as_dict(self) -> JSONObject:
        data: JSONObject = {"type": self.type}
        if self.type == "safety_gate":
            data["required"] = list(self.required)
        if self.type == "all_or_nothing":
            data["threshold"] = self.threshold
        return data

    def combine(self, outcomes: Sequence[VerifierOutcome]) -> tuple[float, bool]:
        """``(score, gate_failed)`` from ``[(verifier, score, passed, …), …]``."""
        kind = self.type
        if kind == "minimum":
            return min(o[1] for o in outcomes), False
        if kind == "maximum":
            return max(o[1] for o in outcomes), False
        if kind == "safety_gate":
            gates = [o for o in outcomes if o[0].required or o[0].id in self.required]
            if any(not o[2] for o in gates):
                return 0.0, True
            rest = [o for o in outcomes if not (o[0].required or o[0].id in self.required)]
            return _weighted_mean(rest or gates), False
        if kind == "all_or_nothing":
            if all(o[1] >= self.threshold - EPSILON for o in outcomes):
                return _weighted_mean(outcomes), False
            return 0.0, False
        return _weighted_mean(outcomes), False


def _weighted_mean(outcomes: Sequence[VerifierOutcome]) -> float:
    total = acc = 0.0
    for outcome in outcomes:
        weight = outcome[0].weight
        total += weight
        acc += weight * outcome[1]
    return acc / total if total else 0.0


def parse_aggregator(value: Any) -> Aggregator:
    """A name (``"minimum"``) or a dict (``{"type": "safety_gate", "required":
    ["safety"]}``, ``{"type": "all_or_nothing", "threshold": 0.7}``)."""
    if value is None:
        return Aggregator()
    if isinstance(value, Aggregator):
        return value
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, dict):
        raise SpecError("aggregator: must be a name or an object with a type")
    kind = value.get("type")
    if kind not in AGGREGATORS:
        raise SpecError(
            f"aggregator.type: unknown aggregator {quote(kind)}; use one of {', '.join(AGGREGATORS)}"
        )
    allowed = (
        {"type"}
        | ({"required"} if kind == "safety_gate" else set())
        | ({"threshold"} if kind == "all_or_nothing" else set())
    )
    for key in value:
        if key not in allowed:
            raise SpecError(f"aggregator.{key}: unknown field for {kind}")
    required = value.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) and r for r in required):
        raise SpecError("aggregator.required: must be a list of verifier ids")
    threshold = _fraction(
        value.get("threshold", DEFAULT_ALL_OR_NOTHING_THRESHOLD), "aggregator.threshold"
    )
    return Aggregator(kind, tuple(required), threshold)


@dataclass(frozen=True, slots=True)
class Thresholds:
    pass_: float = DEFAULT_THRESHOLDS["pass"]
    borderline: float = DEFAULT_THRESHOLDS["borderline"]

    def verdict(self, score: float, forced_fail: bool = False) -> str:
        if forced_fail:
            return FAIL
        if score >= self.pass_ - EPSILON:
            return PASS
        if score >= self.borderline - EPSILON:
            return BORDERLINE
        return FAIL


def parse_thresholds(value: Any) -> Thresholds:
    """``None`` or ``{"pass": 0.8, "borderline": 0.6}`` (either key may be left
    out; a ``fail`` key is accepted and ignored: docs/verifier-semantics.md "Across verifiers")."""
    if value is None:
        return Thresholds()
    if isinstance(value, Thresholds):
        return value
    if not isinstance(value, dict):
        raise SpecError('thresholds: must be an object like {"pass": 0.8, "borderline": 0.6}')
    for key in value:
        if key not in ("pass", "borderline", "fail"):
            raise SpecError(f"thresholds.{key}: unknown field (use pass and borderline)")
    pass_ = _fraction(value.get("pass", DEFAULT_THRESHOLDS["pass"]), "thresholds.pass")
    borderline = _fraction(
        value.get("borderline", DEFAULT_THRESHOLDS["borderline"]), "thresholds.borderline"
    )
    if "fail" in value:
        _fraction(value["fail"], "thresholds.fail")
    if borderline > pass_:
        raise SpecError("thresholds.borderline: must not be above thresholds.pass")
    return Thresholds(pass_, borderline)
