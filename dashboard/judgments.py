"""The two judgments of a scored output, in the words every server-rendered page
uses (docs/verifier-semantics.md "Passed and verdict"): the run's **verdict**
(the score against the run's thresholds) and each verifier's **passed / failed**
(its score against its passThreshold, and its required checks), each with the
numbers that decide it. The verifier editor says the same in
static/js/verifier-editor.js."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optimizer.models import Run
from verifiers_app.engine.aggregate import DEFAULT_THRESHOLDS

ROW_VERIFIER_ID = "row"  # the id scoring gives a task's row verifier


def threshold_text(value: float) -> str:
    """A threshold as it was typed: 0.8, 1, 0.65."""
    return f"{value:g}"


def run_thresholds(run: Run) -> dict[str, float]:
    """The verdict thresholds a run was launched with (the defaults where unset)."""
    stored = (run.config or {}).get("thresholds") or {}
    return {key: float(stored.get(key, default)) for key, default in DEFAULT_THRESHOLDS.items()}


def thresholds_text(thresholds: Mapping[str, float]) -> str:
    """`run thresholds: pass ≥ 0.8, borderline ≥ 0.6`."""
    return (
        f"run thresholds: pass ≥ {threshold_text(thresholds['pass'])}, "
        f"borderline ≥ {threshold_text(thresholds['borderline'])}"
    )


def verdict_why(score: float | None, verdict: str, thresholds: Mapping[str, float]) -> str:
    """What decided one verdict: `0.823 ≥ 0.8`, `0.6 ≤ 0.657 < 0.8`, `0.412 < 0.6`,
    or a required check forcing `fail` at a score that reaches borderline."""
    if score is None:
        return ""
    shown = f"{score:.3f}"
    pass_, borderline = threshold_text(thresholds["pass"]), threshold_text(thresholds["borderline"])
    if verdict == "pass":
        return f"{shown} ≥ {pass_}"
    if verdict == "borderline":
        return f"{borderline} ≤ {shown} < {pass_}"
    if score >= thresholds["borderline"]:
        return "a required check failed, whatever the score"
    return f"{shown} < {borderline}"


def pass_thresholds(run: Run) -> dict[str, float]:
    """Each frozen verifier's passThreshold, by id (1 where the spec sets none)."""
    return {
        str(spec.get("id", "")): float(spec.get("passThreshold", 1.0))
        for spec in run.verifier_specs or []
        if isinstance(spec, dict)
    }


def row_pass_thresholds(run: Run) -> dict[str, float]:
    """Each frozen task's row-verifier passThreshold, by task id (tasks with one)."""
    found: dict[str, float] = {}
    for row in run.tasks_snapshot or []:
        verifier = row.get("verifier") if isinstance(row, dict) else None
        if isinstance(verifier, dict):
            found[str(row.get("task_id"))] = float(verifier.get("passThreshold", 1.0))
    return found


def verifier_judgments(
    result: Mapping[str, Any] | None,
    thresholds: Mapping[str, float],
    row_threshold: float | None = None,
) -> list[dict[str, Any]]:
    """One line per verifier of a stored result: `verifier "Policy" failed (0.800 <
    passThreshold 0.9)`, or the required check that failed it. `thresholds` are the
    run's passThresholds by verifier id; `row_threshold` the task's row verifier's."""
    lines = []
    for v in (result or {}).get("verifiers") or []:
        if not isinstance(v, dict):
            continue
        vid = str(v.get("id", ""))
        passed = bool(v.get("passed"))
        threshold = row_threshold if vid == ROW_VERIFIER_ID else thresholds.get(vid)
        failed_required = next(
            (
                c
                for c in v.get("checks") or []
                if isinstance(c, dict)
                and c.get("required")
                and not c.get("skipped")
                and (c.get("score") or 0) < 1
            ),
            None,
        )
        raw = v.get("score")
        score = f"{raw:.3f}" if isinstance(raw, (int, float)) else "–"
        if failed_required is not None and not passed:
            why = f'required check "{failed_required.get("id", "")}" failed'
        elif threshold is None:
            why = f"score {score}"
        else:
            why = f"{score} {'≥' if passed else '<'} passThreshold {threshold_text(threshold)}"
        name = v.get("name") or vid
        lines.append(
            {
                "passed": passed,
                "text": f'verifier "{name}" {"passed" if passed else "failed"} ({why})',
            }
        )
    return lines
