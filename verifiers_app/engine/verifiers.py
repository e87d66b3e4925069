"""Compiled verifiers: what a normalized spec becomes for the hot loop.

Every verifier — native, fn-registry (spec level or a task's row) or class —
is a list of :class:`CompiledCheck`; fn and class verifiers have exactly one
check, so scoring, results and feedback treat all kinds alike.
"""

from __future__ import annotations

from typing import Any

from . import classes, fns
from .checks import CHECK_TYPES, PASS, Context, Outcome, Run
from .errors import SpecError
from .json_types import JSONObject
from .quoting import quote
from .specs import ROW_VERIFIER_ID


class CompiledCheck:
    __slots__ = ("hit", "id", "label", "required", "run", "skip_reason", "type", "weight")

    def __init__(
        self,
        id: str,
        type: str,
        weight: float,
        required: bool,
        run: Run | None,
        hit: str,
        skip_reason: str | None = None,
    ) -> None:
        self.id, self.type, self.weight, self.required = id, type, float(weight), required
        self.run = run  # None: skipped
        self.hit = hit
        self.skip_reason = skip_reason
        self.label = (
            ""  # "verifier-id/check-id: ", what its feedback lines start with; set by its verifier
        )


class CompiledVerifier:
    __slots__ = (
        "checks",
        "id",
        "kind",
        "name",
        "needs_json",
        "needs_lower",
        "pass_threshold",
        "required",
        "total_weight",
        "weight",
    )

    def __init__(
        self,
        spec: JSONObject,
        checks: list[CompiledCheck],
        needs_lower: bool = False,
        needs_json: bool = False,
    ) -> None:
        self.id = spec["id"]
        self.name = spec.get("name") or spec["id"]
        self.kind = spec["kind"]
        self.weight = float(spec.get("weight", 1.0))
        self.required = bool(spec.get("required", False))
        self.pass_threshold = float(spec.get("passThreshold", 1.0))
        self.checks = tuple(checks)
        self.needs_lower = needs_lower
        self.needs_json = needs_json
        # What every scoring divides by: the weights of the checks that run, summed in order.
        self.total_weight = 0.0
        for check in self.checks:
            check.label = f"{self.id}/{check.id}: "
            if check.run is not None:
                self.total_weight += check.weight


#: One verifier scored: ``(verifier, score, passed, [None (skipped) | (score, reason) per check])``.
VerifierOutcome = tuple[CompiledVerifier, float, bool, list[Outcome | None]]


def build_verifier(spec: JSONObject) -> CompiledVerifier:
    """Compile a normalized spec (from :func:`.specs.parse_spec`)."""
    kind = spec["kind"]
    if kind == "native":
        return _build_native(spec)
    if kind == "in_process":
        run = _fn_run(
            spec["fn_name"], spec.get("params", {}), spec.get("expected"), "expected" in spec
        )
        check = CompiledCheck(
            spec["fn_name"], "in_process", 1.0, False, run, f"fn {quote(spec['fn_name'])} matched"
        )
        return CompiledVerifier(spec, [check])
    return _build_class(spec)


def _build_native(spec: JSONObject) -> CompiledVerifier:
    checks: list[CompiledCheck] = []
    needs_lower = needs_json = False
    for check in spec["checks"]:
        check_type = CHECK_TYPES.get(check["type"])
        if check_type is None:
            checks.append(
                CompiledCheck(
                    check["id"],
                    check["type"],
                    check["weight"],
                    check["required"],
                    None,
                    "",
                    f"unknown check type {quote(check['type'])} (skipped)",
                )
            )
            continue
        built = check_type.build(check["params"])
        needs_lower |= built.needs_lower
        needs_json |= built.needs_json
        checks.append(
            CompiledCheck(
                check["id"],
                check["type"],
                check["weight"],
                check["required"],
                built.run,
                built.hit,
            )
        )
    return CompiledVerifier(spec, checks, needs_lower, needs_json)


def _fn_run(fn_name: str, params: JSONObject, expected: Any, has_expected: bool) -> Run:
    call = fns.call

    def run(ctx: Context) -> Outcome:
        task = ctx.task
        merged = {**task.params, **params} if task.params else params
        return call(fn_name, ctx.output, expected if has_expected else task.expected, merged)

    return run


def build_row_verifier(
    row: JSONObject, task_expected: Any, task_params: JSONObject
) -> CompiledVerifier:
    """Compile a task's normalized row verifier; its id is always ``"row"``.

    ``expected`` is the row verifier's own when given, else the task's;
    ``params`` are the task's overlaid with the row verifier's.
    """
    fn_name = row["fn_name"]
    expected = row.get("expected", task_expected)
    params = {**task_params, **row.get("params", {})}
    call = fns.call

    def run(ctx: Context) -> Outcome:
        return call(fn_name, ctx.output, expected, params)

    spec = {**row, "id": ROW_VERIFIER_ID, "name": f"row: {fn_name}"}
    return CompiledVerifier(
        spec,
        [CompiledCheck(fn_name, "in_process", 1.0, False, run, f"fn {quote(fn_name)} matched")],
    )


def _build_class(spec: JSONObject) -> CompiledVerifier:
    kind = spec["kind"]
    cls = classes.get_verifier_class(kind)
    if cls is None:  # parse_spec refused the spec already; kept for a caller that skipped it
        raise SpecError(f"kind: unknown kind {quote(kind)}")
    instance = cls(**spec["params"])
    explain = classes.explain

    def run(ctx: Context) -> Outcome:
        result = instance.verify(prompt=ctx.prompt, completion=ctx.output, target=ctx.task.target)
        if isinstance(result, (int, float)):
            result = classes.VerificationResult(reward=float(result))
        reward = fns._as_score(result.reward, kind)
        if reward >= 1.0:
            return PASS
        return reward, explain(instance, kind, result, reward)

    return CompiledVerifier(
        spec,
        [CompiledCheck(kind, kind, 1.0, False, run, f"verifier {quote(kind)} gave full reward")],
    )
