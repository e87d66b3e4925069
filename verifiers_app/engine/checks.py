"""Native check types (docs/verifier-semantics.md "Native verifiers"): their params and their compiled form.

Each type has a pydantic params model (strict, unknown params rejected) and a
builder that turns validated params into ``run(ctx) -> (score, reason)``:
regexes are compiled, phrases lower-cased and reasons pre-written once, at
compile time. ``ctx`` is the per-output :class:`Context`, which holds the
lower-cased output and the one JSON parse shared by every check.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from . import linear_regexes, regexes
from .errors import SpecError
from .expectations import Expectations
from .json_types import JSONObject
from .quoting import clip, quote, quote_all

#: What a check returns: its score in [0, 1] and, below 1, the reason.
Outcome = tuple[float, str | None]

PASS: Outcome = (1.0, None)

#: Check-type aliases accepted in specs (docs/verifier-semantics.md "Native verifiers"); specs are normalized to the key.
TYPE_ALIASES = {
    "must_contain": "contains",
    "must_not_contain": "not_contains",
    "exact_match": "equals",
}
#: Parameter aliases (docs/verifier-semantics.md, "The rules"): alias → canonical name.
PARAM_ALIASES = {"text": "value", "keys": "requiredKeys"}


class ScoredTask(Protocol):
    """What checks and fns read of the task row being scored: task_rows.CompiledTask
    (named here by its shape, as task_rows imports this module)."""

    @property
    def expected(self) -> Any: ...
    @property
    def params(self) -> JSONObject: ...
    @property
    def target(self) -> JSONObject: ...
    @property
    def expectations(self) -> Expectations: ...
    @property
    def expectations_problems(self) -> list[str]: ...
    @property
    def schema_keys(self) -> tuple[str, ...] | None: ...
    @property
    def schema_problems(self) -> list[str]: ...


class Context:
    """One output being scored, with what several checks share."""

    __slots__ = ("json_error", "json_value", "lower", "output", "prompt", "regex_deadline", "task")

    output: str
    lower: str  # output.lower() when a check needs it (``Built.needs_lower``), else ""
    json_value: Any
    json_error: str | None  # None when the output parsed (only set when a check needs JSON)
    regex_deadline: (
        float | None
    )  # set by the first regex check: the end of this scoring's regex budget
    task: ScoredTask
    prompt: str


Run = Callable[[Context], Outcome]


@dataclass(frozen=True, slots=True)
class Built:
    run: Run
    hit: str  # what a score of 1 means, for ``Result.hits``
    needs_lower: bool = False
    needs_json: bool = False


# --- params models --------------------------------------------------------------


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class NoParams(_Params):
    pass


class SubstringParams(_Params):
    value: Annotated[str, Field(min_length=1)]
    caseSensitive: bool = False


class EqualsParams(_Params):
    value: str
    caseSensitive: bool = False


class RegexParams(_Params):
    pattern: Annotated[str, Field(min_length=1)]

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str, info: ValidationInfo) -> str:
        if not (info.context or {}).get("lenient_regex"):
            try:
                regexes.compile_pattern(pattern)
            except regexes.RegexError as exc:
                raise ValueError(f"invalid regular expression: {exc}") from None
        return pattern


class LengthParams(_Params):
    value: Annotated[int, Field(ge=0)]


class JsonKeysParams(_Params):
    requiredKeys: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]


# --- builders ---------------------------------------------------------------------


def _task_expectations(params: JSONObject) -> Built:
    def run(ctx: Context) -> Outcome:
        task = ctx.task
        if task.expectations_problems:
            raise SpecError(task.expectations_problems)
        expectations = task.expectations
        lower = ctx.lower
        reasons: list[str] | None = None
        for mention in expectations.mentions:
            for phrase in mention.lowered:
                if phrase in lower:
                    break
            else:
                if reasons is None:
                    reasons = [mention.reason]
                else:
                    reasons.append(mention.reason)
        for forbidden in expectations.forbidden:
            for phrase in forbidden.lowered:
                if phrase in lower:
                    break
            else:
                continue  # none of its phrases is in the output
            found = [p for p, low in zip(forbidden.phrases, forbidden.lowered) if low in lower]
            reason = f"{forbidden.message} (found: {quote_all(found)})"
            if reasons is None:
                reasons = [reason]
            else:
                reasons.append(reason)
        if reasons is None:  # also when the task expects nothing
            return PASS
        total = expectations.total
        return (total - len(reasons)) / total, "; ".join(reasons)

    return Built(run, "every task expectation is met", needs_lower=True)


def _substring(params: JSONObject, *, present: bool) -> Built:
    """`contains` (present=True) and `not_contains`: one substring test,
    case-insensitive unless caseSensitive, scoring 1 or 0."""
    value, sensitive = params["value"], params["caseSensitive"]
    verb = "does not contain" if present else "must not contain"
    miss = (0.0, f"output {verb} {quote(value)}" + (" (case-sensitive)" if sensitive else ""))
    found, absent = (PASS, miss) if present else (miss, PASS)
    needle = value if sensitive else value.lower()
    if sensitive:

        def run(ctx: Context) -> Outcome:
            return found if needle in ctx.output else absent
    else:

        def run(ctx: Context) -> Outcome:
            return found if needle in ctx.lower else absent

    return Built(
        run,
        f"output {'contains' if present else 'avoids'} {quote(value)}",
        needs_lower=not sensitive,
    )


def _contains(params: JSONObject) -> Built:
    return _substring(params, present=True)


def _not_contains(params: JSONObject) -> Built:
    return _substring(params, present=False)


def _regex(params: JSONObject) -> Built:
    pattern = params["pattern"]
    hit = f"output matches pattern {quote(pattern)}"
    try:
        compiled = regexes.compile_pattern(pattern)
    except regexes.RegexError as exc:
        # Only reachable from scoring (validation rejects it): the check fails, the run goes on.
        broken = (0.0, f"invalid regular expression {quote(pattern)}: {exc}")
        return Built(lambda ctx: broken, hit)
    miss = (0.0, f"output does not match pattern {quote(pattern)}")
    search, budget, clock = regexes.search, regexes.REGEX_BUDGET_SECONDS, time.perf_counter
    # RE2 when it gives the same answer: no timeout to pay for (linear_regexes.py).
    linear, max_text = linear_regexes.compile_linear(pattern), linear_regexes.MAX_TEXT

    def run(ctx: Context) -> Outcome:
        now = clock()
        if ctx.regex_deadline is None:
            ctx.regex_deadline = now + budget
        left, output = ctx.regex_deadline - now, ctx.output
        if linear is not None and left > 0 and len(output) <= max_text:
            try:
                return PASS if linear(output) else miss
            except UnicodeEncodeError:  # a lone surrogate, which UTF-8 cannot hold
                pass
        try:
            return PASS if search(compiled, output, left) else miss
        except regexes.RegexTimeout as exc:
            return 0.0, str(exc)

    return Built(run, hit)


def _equals(params: JSONObject) -> Built:
    value, sensitive = params["value"].strip(), params["caseSensitive"]
    reason = f"output does not equal {quote(value)}" + (" (case-sensitive)" if sensitive else "")

    if sensitive:

        def run(ctx: Context) -> Outcome:
            got = ctx.output.strip()
            return PASS if got == value else (0.0, f"{reason} (got: {quote(clip(got))})")
    else:
        lowered = value.lower()

        def run(ctx: Context) -> Outcome:
            if ctx.lower.strip() == lowered:
                return PASS
            return 0.0, f"{reason} (got: {quote(clip(ctx.output.strip()))})"

    return Built(run, f"output equals {quote(value)}", needs_lower=not sensitive)


def _min_length(params: JSONObject) -> Built:
    least = params["value"]

    def run(ctx: Context) -> Outcome:
        length = len(ctx.output)
        if length >= least:
            return PASS
        return 0.0, f"output is too short: {length} characters, needs at least {least}"

    return Built(run, f"output has at least {least} characters")


def _max_length(params: JSONObject) -> Built:
    most = params["value"]

    def run(ctx: Context) -> Outcome:
        length = len(ctx.output)
        if length <= most:
            return PASS
        return 0.0, f"output is too long: {length} characters, must be at most {most}"

    return Built(run, f"output has at most {most} characters")


def _json_valid(params: JSONObject) -> Built:
    def run(ctx: Context) -> Outcome:
        error = ctx.json_error
        if error is None:
            return PASS
        reason = f"output is not valid JSON ({error})"
        if ctx.output.lstrip().startswith("```"):
            reason += "; output the bare JSON, without a code fence"
        return 0.0, reason

    return Built(run, "output is valid JSON", needs_json=True)


def _missing_keys(ctx: Context, keys: tuple[str, ...]) -> Outcome:
    if ctx.json_error is not None:
        return 0.0, f"missing required keys: {quote_all(keys)} (output is not valid JSON)"
    value = ctx.json_value
    if not isinstance(value, dict):
        return (
            0.0,
            f"missing required keys: {quote_all(keys)} (output is a JSON {_json_kind(value)}, not an object)",
        )
    missing = [key for key in keys if key not in value]
    if not missing:
        return PASS
    return 0.0, f"missing required keys: {quote_all(missing)}"


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def _json_keys(params: JSONObject) -> Built:
    keys = tuple(params["requiredKeys"])

    def run(ctx: Context) -> Outcome:
        value = ctx.json_value
        if value.__class__ is dict and ctx.json_error is None:
            for key in keys:
                if key not in value:
                    break
            else:
                return PASS
        return _missing_keys(ctx, keys)

    return Built(run, f"output is a JSON object with keys {quote_all(keys)}", needs_json=True)


def _expected_output_schema(params: JSONObject) -> Built:
    def run(ctx: Context) -> Outcome:
        task = ctx.task
        if task.schema_problems:
            raise SpecError(task.schema_problems)
        keys = task.schema_keys
        if keys is None:  # the task has no schema: nothing to check
            return PASS
        return _missing_keys(ctx, keys)

    return Built(
        run, "output is a JSON object with the task schema's required keys", needs_json=True
    )


@dataclass(frozen=True, slots=True)
class CheckType:
    params: type[_Params]
    build: Callable[[JSONObject], Built]


CHECK_TYPES: dict[str, CheckType] = {
    "task_expectations": CheckType(NoParams, _task_expectations),
    "contains": CheckType(SubstringParams, _contains),
    "not_contains": CheckType(SubstringParams, _not_contains),
    "regex": CheckType(RegexParams, _regex),
    "equals": CheckType(EqualsParams, _equals),
    "min_length": CheckType(LengthParams, _min_length),
    "max_length": CheckType(LengthParams, _max_length),
    "json_valid": CheckType(NoParams, _json_valid),
    "json_keys": CheckType(JsonKeysParams, _json_keys),
    "expected_output_schema": CheckType(NoParams, _expected_output_schema),
}
