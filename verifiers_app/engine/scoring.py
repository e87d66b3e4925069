"""Scoring: compile specs once, score many outputs."""

from __future__ import annotations

import math
from json import loads
from typing import Any

from .aggregate import EPSILON, Aggregator, Thresholds, parse_aggregator, parse_thresholds
from .checks import Context, Outcome
from .errors import SpecError
from .json_types import JSONObject
from .quoting import quote
from .result import Result
from .specs import ROW_VERIFIER_ID, parse_spec
from .task_rows import NO_TASK, CompiledTask, compile_task
from .verifiers import CompiledCheck, CompiledVerifier, VerifierOutcome, build_verifier

#: Compiled task rows kept per scorer (keyed by the task dict's identity).
TASK_CACHE_SIZE = 4096

_SINGLE_FAST = frozenset({"weighted_average", "minimum", "maximum"})


def _clamp(value: Any) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    if math.isnan(value) or value < 0.0:
        return 0.0
    return 1.0 if value > 1.0 else value


class Scorer:
    """Specs validated and compiled once; :meth:`score` is the hot path.

    Task rows are compiled on first sight and remembered by identity, so
    re-scoring the same task dicts (as GEPA does) costs no validation; do not
    mutate a task dict in place after scoring with it.
    """

    def __init__(
        self, verifiers: list[CompiledVerifier], aggregator: Aggregator, thresholds: Thresholds
    ) -> None:
        self._verifiers = tuple(verifiers)
        self._aggregator = aggregator
        self._thresholds = thresholds
        self._needs_lower = any(v.needs_lower for v in verifiers)
        self._needs_json = any(v.needs_json for v in verifiers)
        self._single_fast = aggregator.type in _SINGLE_FAST
        self._tasks: dict[int, tuple[Any, CompiledTask]] = {}

    @property
    def verifier_ids(self) -> list[str]:
        """Ids of the spec-level verifiers, in order (a task's row verifier,
        when present, is scored after them with id ``"row"``)."""
        return [v.id for v in self._verifiers]

    @property
    def aggregator(self) -> Aggregator:
        return self._aggregator

    @property
    def thresholds(self) -> Thresholds:
        return self._thresholds

    def _compiled_task(self, task: Any) -> CompiledTask:
        compiled = compile_task(task)
        if len(self._tasks) >= TASK_CACHE_SIZE:
            self._tasks.clear()
        self._tasks[id(task)] = (task, compiled)  # holding task keeps its id() unique
        return compiled

    def score(self, output: str, task: JSONObject | None = None, prompt: str = "") -> Result:
        """Score one output; raises :class:`SpecError` only for an unusable task."""
        if output.__class__ is not str:
            output = "" if output is None else str(output)
        if task is None:
            compiled_task = NO_TASK
        else:
            cached = self._tasks.get(id(task))
            compiled_task = (
                cached[1] if cached is not None and cached[0] is task else self._compiled_task(task)
            )
        verifiers = self._verifiers
        if compiled_task.row is not None:
            verifiers = (*verifiers, compiled_task.row)
        if not verifiers:
            raise SpecError(
                "specs: nothing to score with (give a verifier spec or a task with a row verifier)"
            )

        ctx = Context()
        ctx.output, ctx.task, ctx.prompt = output, compiled_task, prompt
        ctx.lower = output.lower() if self._needs_lower else ""
        ctx.json_value = ctx.json_error = ctx.regex_deadline = None
        if self._needs_json:
            try:
                ctx.json_value = loads(output)
            except (ValueError, RecursionError) as exc:
                ctx.json_error = str(exc) or type(exc).__name__

        outcomes: list[VerifierOutcome] = []
        all_passed, forced_fail = True, False
        # The checks that give a feedback line (scored below 1, or skipped), in order.
        short: list[tuple[CompiledCheck, Outcome | None]] = []
        for verifier in verifiers:
            raws: list[Outcome | None] = []
            acc = 0.0
            required_failed = False
            for check in verifier.checks:
                run = check.run
                if run is None:
                    raws.append(None)
                    short.append((check, None))
                    continue
                try:
                    raw = run(ctx)
                    value = raw[0]
                    if not 0.0 <= value <= 1.0:  # also catches NaN
                        value = _clamp(value)
                        reason = raw[1] or f"check scored {raw[0]!r}, outside [0, 1]"
                        raw = (value, None if value >= 1.0 else reason)
                except Exception as exc:  # one broken check never crashes a run
                    value, raw = 0.0, (0.0, f"check raised {type(exc).__name__}: {exc}")
                raws.append(raw)
                acc += check.weight * value
                if value < 1.0:
                    short.append((check, raw))
                    if check.required:
                        required_failed = True
            total = verifier.total_weight
            verifier_score = acc / total if total else 1.0
            passed = not required_failed and verifier_score >= verifier.pass_threshold - EPSILON
            if not passed:
                all_passed = False
            if required_failed or (verifier.required and verifier_score <= 0.0):
                forced_fail = True
            outcomes.append((verifier, verifier_score, passed, raws))

        if len(outcomes) == 1 and self._single_fast:
            final, gate_failed = outcomes[0][1], False
        else:
            final, gate_failed = self._aggregator.combine(outcomes)
        verdict = self._thresholds.verdict(final, forced_fail or gate_failed)
        return Result(final, verdict, all_passed, outcomes, short)


def compile_specs(
    specs: Any, aggregator: Any = "weighted_average", thresholds: Any = None
) -> Scorer:
    """Validate and compile ``specs`` (a spec dict or a list of them) once.

    Raises :class:`SpecError` naming the field path; with several specs each
    path starts with ``specs[i].``. A regex that does not compile is not
    refused here (that is :func:`validate_spec`'s job at authoring time): its
    check scores 0 with the compile error as reason.
    """
    if isinstance(specs, dict):
        specs = [specs]
    if not isinstance(specs, (list, tuple)):
        raise SpecError("specs: must be a spec object or a list of them")
    problems: list[str] = []
    normalized: list[tuple[int, JSONObject]] = []
    for index, raw in enumerate(specs):
        spec, spec_problems = parse_spec(raw, lenient_regex=True)
        prefix = f"specs[{index}]." if len(specs) > 1 else ""
        problems += [f"{prefix}{problem}" for problem in spec_problems]
        if spec is not None:
            normalized.append((index, spec))
    seen: set[str] = set()
    for (
        index,
        spec,
    ) in normalized:  # index: the spec's place in `specs`, even when an earlier one was invalid
        if spec["id"] in seen:
            problems.append(f"specs[{index}].id: duplicate verifier id {quote(spec['id'])}")
        seen.add(spec["id"])
    if problems:
        raise SpecError(problems)
    parsed_aggregator = parse_aggregator(aggregator)
    for index, gate in enumerate(parsed_aggregator.required):
        if gate not in seen and gate != ROW_VERIFIER_ID:
            raise SpecError(f"aggregator.required[{index}]: no verifier has id {quote(gate)}")
    return Scorer(
        [build_verifier(spec) for _, spec in normalized],
        parsed_aggregator,
        parse_thresholds(thresholds),
    )


def score(
    specs: Any,
    output: str,
    task: JSONObject | None = None,
    *,
    aggregator: Any = "weighted_average",
    thresholds: Any = None,
    prompt: str = "",
) -> Result:
    """Score one output against ``specs`` (and the task's expectations and row
    verifier). Compiles the specs on every call; use :func:`compile_specs` in loops."""
    return compile_specs(specs, aggregator=aggregator, thresholds=thresholds).score(
        output, task, prompt
    )
