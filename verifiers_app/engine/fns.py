"""The verifier-fn registry (docs/verifier-semantics.md "Row verifiers"): per-row scoring functions.

A task row names a fn (``verifier: {kind: in_process, fn_name, expected,
params}``); the fn is called as ``fn(model_output, expected, params)`` and
returns a float in [0, 1] — or ``(score, reason)`` when it wants to say why.
A sub-perfect float gets a generated reason: built-in fns explain precisely
(``explain=`` on :func:`register_fn`), other fns get a generic one.

    from verifiers_app.engine.fns import register_fn

    @register_fn("startswith")
    def startswith(model_output, expected, params):
        ...
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, overload

import regex

from . import regexes
from .json_types import JSONObject
from .quoting import clip, quote

VerifierFn = Callable[[str, Any, JSONObject], "float | tuple[float, str]"]
Explainer = Callable[[str, Any, JSONObject], str]

DEFAULT_COORDINATE_TOLERANCE = 25


class UnknownFnError(LookupError):
    """:func:`get` was asked for a name nobody registered."""

    def __str__(self) -> str:  # LookupError would repr() the message
        return str(self.args[0]) if self.args else "unknown fn"


@dataclass(frozen=True, slots=True)
class _Entry:
    fn: VerifierFn
    explain: Explainer | None


_REGISTRY: dict[str, _Entry] = {}


@overload
def register_fn(
    name: str,
    fn: None = None,
    *,
    explain: Explainer | None = None,
) -> Callable[[VerifierFn], VerifierFn]: ...


@overload
def register_fn(name: str, fn: VerifierFn, *, explain: Explainer | None = None) -> VerifierFn: ...


def register_fn(
    name: str,
    fn: VerifierFn | None = None,
    *,
    explain: Explainer | None = None,
) -> Callable[[VerifierFn], VerifierFn] | VerifierFn:
    """Register ``fn`` under ``name``; usable directly or as ``@register_fn(name)``.

    ``explain(model_output, expected, params) -> str`` (optional) writes the
    reason when the fn scores below 1. Registering a name again replaces it.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("a verifier fn needs a non-empty name")

    def decorate(func: VerifierFn) -> VerifierFn:
        if not callable(func):
            raise TypeError(f"verifier fn {name!r} is not callable")
        _REGISTRY[name] = _Entry(func, explain)
        return func

    return decorate if fn is None else decorate(fn)


#: The seed's other spelling: ``register(name, fn)``.
register = register_fn


def registered() -> list[str]:
    """Names of every registered fn, sorted."""
    return sorted(_REGISTRY)


def unknown_fn_message(name: object) -> str:
    return f"unknown fn {quote(name)}; registered fns: {', '.join(registered())}"


def get(name: str) -> VerifierFn:
    """The fn registered as ``name``; :class:`UnknownFnError` lists the others."""
    try:
        return _REGISTRY[name].fn
    except (KeyError, TypeError):
        raise UnknownFnError(unknown_fn_message(name)) from None


def call(name: str, output: str, expected: Any, params: JSONObject) -> tuple[float, str | None]:
    """Score ``output`` with the fn registered as ``name``: ``(score, reason)``.

    The score is clamped to [0, 1] (NaN → 0); the reason is None at 1.0 and
    concrete below it. Exceptions from the fn propagate (the engine turns them
    into a 0 with the exception as reason).
    """
    entry = _REGISTRY.get(name)
    if entry is None:
        raise UnknownFnError(unknown_fn_message(name))
    returned = entry.fn(output, expected, params)
    reason: str | None = None
    if isinstance(returned, tuple):
        returned, reason = returned
    score = _as_score(returned, name)
    if score >= 1.0:
        return 1.0, None
    if not reason:
        explain = entry.explain
        reason = (
            explain(output, expected, params)
            if explain is not None
            else f"fn {quote(name)} scored {score:.2f} against expected {quote(clip(_text(expected)))}"
        )
    return score, str(reason)


def _as_score(value: Any, name: str) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if not isinstance(value, (int, float)):
        raise TypeError(f"fn {quote(name)} returned {type(value).__name__}, not a number")
    value = float(value)
    if math.isnan(value) or value <= 0.0:
        return 0.0
    return 1.0 if value >= 1.0 else value


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


# --- built-ins ---------------------------------------------------------------


def exact_match(model_output: str, expected: Any, params: JSONObject) -> float:
    """1.0 when both sides, whitespace-stripped (and lower-cased with
    ``ignore_case``), are equal strings."""
    a, b = (model_output or "").strip(), str(expected if expected is not None else "").strip()
    if params.get("ignore_case"):
        a, b = a.lower(), b.lower()
    return 1.0 if a == b else 0.0


def _explain_exact_match(model_output: str, expected: Any, params: JSONObject) -> str:
    case = " (ignoring case)" if params.get("ignore_case") else ""
    got = clip((model_output or "").strip())
    return f"output does not exactly equal {quote(str(expected if expected is not None else '').strip())}{case} (got: {quote(got)})"


def contains(model_output: str, expected: Any, params: JSONObject) -> float:
    """1.0 when ``str(expected)`` is a non-empty substring of the output
    (case-folded with ``ignore_case``)."""
    needle, haystack = str(expected if expected is not None else ""), model_output or ""
    if not needle:
        return 0.0
    if params.get("ignore_case"):
        needle, haystack = needle.casefold(), haystack.casefold()
    return 1.0 if needle in haystack else 0.0


def _explain_contains(model_output: str, expected: Any, params: JSONObject) -> str:
    needle = str(expected if expected is not None else "")
    if not needle:
        return "expected is empty, so there is nothing the output could contain"
    case = " (ignoring case)" if params.get("ignore_case") else ""
    return f"output does not contain {quote(needle)}{case}"


def _expected_pattern(expected: Any, params: JSONObject) -> regex.Pattern[str]:
    flags = regexes.IGNORECASE if params.get("ignore_case") else 0
    return regexes.cached_pattern(str(expected if expected is not None else ""), flags)


def regex_match(model_output: str, expected: Any, params: JSONObject) -> float:
    """1.0 when the regex ``expected`` is found anywhere (``re.search``;
    IGNORECASE with ``ignore_case``); bounded by the regex timeout."""
    return 1.0 if regexes.search(_expected_pattern(expected, params), model_output or "") else 0.0


def _explain_regex_match(model_output: str, expected: Any, params: JSONObject) -> str:
    case = " (ignoring case)" if params.get("ignore_case") else ""
    return f"output does not match pattern {quote(str(expected))}{case}"


def _strip_fence(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        newline = text.find("\n")
        text = text[newline + 1 :] if newline != -1 else text[3:]
        if text.rstrip().endswith("```"):
            text = text.rstrip()[:-3]
    return text.strip()


def parse_json_object(value: Any) -> JSONObject | None:
    """A dict from a dict, or from text: code fences stripped, then the whole
    text, then its outermost ``{…}``. None when there is no JSON object."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        return None
    text = _strip_fence(value)
    candidates = [text]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start and (start, end) != (0, len(text) - 1):
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            parsed = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(parsed, dict):
            return parsed
    return None


def _point(value: Any) -> tuple[float, float] | None:
    if isinstance(value, dict):
        value = (value.get("x"), value.get("y"))
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        return float(value[0]), float(value[1])
    return None


def tool_call_mismatch(model_output: str, expected: Any, params: JSONObject) -> str | None:
    """Why the output's tool call differs from ``expected``; None when it matches."""
    want = parse_json_object(expected)
    if want is None:
        return "expected is not a JSON object describing a tool call"
    got = parse_json_object(model_output or "")
    if got is None:
        return "output is not a JSON object (no {…} tool call found)"
    for key in ("tool", "action"):
        if got.get(key) != want.get(key):
            return f"{key} {quote(_text(want.get(key)))} expected, got {quote(_text(got.get(key)))}"
    for key in ("ref", "text"):
        if key in want and got.get(key) != want[key]:
            return f"{key} {quote(_text(want[key]))} expected, got {quote(_text(got.get(key)))}"
    if "coordinate" in want:
        tolerance = params.get("coordinate_tolerance", DEFAULT_COORDINATE_TOLERANCE)
        target, actual = _point(want["coordinate"]), _point(got.get("coordinate"))
        if target is None:
            return "expected coordinate is not an [x, y] pair"
        if actual is None:
            return f"coordinate [{target[0]:g}, {target[1]:g}] expected, got none"
        if abs(actual[0] - target[0]) > tolerance or abs(actual[1] - target[1]) > tolerance:
            return (
                f"coordinate [{actual[0]:g}, {actual[1]:g}] is more than {tolerance} px "
                f"from the expected [{target[0]:g}, {target[1]:g}]"
            )
    return None


def tool_calls_match(model_output: str, expected: Any, params: JSONObject) -> float:
    """1.0 when tool and action match, every ref/text in expected matches, and
    the coordinate is within ``coordinate_tolerance`` (default 25, inclusive)
    on both axes."""
    return 1.0 if tool_call_mismatch(model_output, expected, params) is None else 0.0


def _explain_tool_calls(model_output: str, expected: Any, params: JSONObject) -> str:
    return tool_call_mismatch(model_output, expected, params) or "tool call does not match"


register_fn("exact_match", exact_match, explain=_explain_exact_match)
register_fn("contains", contains, explain=_explain_contains)
register_fn("regex_match", regex_match, explain=_explain_regex_match)
register_fn("tool_calls_match", tool_calls_match, explain=_explain_tool_calls)
