"""Val vs held-out: does the run's val lift hold on tasks the search never saw?

GEPA picks its best candidate by its val score, so the best's lift over the
seed on val is measured on the very tasks it was chosen on: it flatters. The
held-out split (scored for the seed and the best when a run ends, by
optimizer/runs/runner.py `_score_holdout`) is the honest check. This read
model puts both side by side: the seed's and the best's means and task counts
on each split, the paired lift on each with its bootstrap interval
(optimizer/confidence.py), and a verdict:

- "confirmed": the held-out interval lies above 0;
- "not_confirmed": the best beats the seed on val, but on held-out the
  interval reaches 0 or below, or there are too few tasks to tell;
- "no_lift": the best is the seed, or does no better on val: nothing to confirm.

Numbers come from what the recorder stored (the candidates' val task scores,
the held-out Evaluations); nothing here writes.
"""

from __future__ import annotations

from typing import Any

from optimizer.confidence import MIN_PAIRS, Lift, paired_lift
from optimizer.models import Candidate, Evaluation, Run, RunEvent, RunStatus
from optimizer.runs import event_types as ev

NOT_CONFIRMED = "val lift not confirmed on held-out"


def _val_scores(candidate: Candidate) -> dict[str, float]:
    if candidate.val_task_scores is not None:
        return {key: float(score) for key, score in candidate.val_task_scores.items()}
    rows = Evaluation.objects.filter(candidate=candidate, split="val").values_list(
        "task_key", "score"
    )
    return dict(rows)


def _side(lift: Lift) -> dict[str, Any]:
    return {
        "tasks": lift.tasks,
        "seed_mean": lift.mean_a,
        "best_mean": lift.mean_b,
        "lift": lift.as_dict(),
    }


def run_val_vs_holdout(run: Run) -> dict[str, Any]:
    """The seed and the best on val and on the held-out split, with the lift on
    each and whether held-out confirms the val lift (see the module docstring)."""
    config = run.config or {}
    split = (config.get("splits") or {}).get("holdout")
    enabled = bool(config.get("evaluate_holdout", True))
    planned = sum(1 for row in run.tasks_snapshot or [] if split and row.get("split") == split)
    # The best the run scored on held-out is the one holdout.scored names (the best
    # when the run ended); before that, the run's best so far. The seed is #0.
    scored = (
        RunEvent.objects.filter(run=run, type=ev.HOLDOUT_SCORED)
        .order_by("-seq")
        .values_list("payload", flat=True)
        .first()
    )
    best_index = (
        scored["best_index"]
        if scored
        else (run.best_candidate.index if run.best_candidate else None)
    )
    held: dict[int, dict[str, float]] = {}
    for index, task_key, score in Evaluation.objects.filter(
        candidate__run=run, candidate__index__in={0, best_index or 0}, split="holdout"
    ).values_list("candidate__index", "task_key", "score"):
        held.setdefault(index, {})[task_key] = score
    report: dict[str, Any] = {
        "split": split,
        "enabled": enabled,
        "planned_tasks": planned,
        # The seed and the best on every held-out task; once only when the best is the seed.
        "planned_evaluations": planned * (1 if best_index == 0 else 2),
        "evaluations": sum(len(scores) for scores in held.values()),
        "seed_index": 0,
        "best_index": best_index,
        "val": None,
        "holdout": None,
        "state": "",
        "verdict": None,
        "message": "",
    }
    candidates = {
        c.index: c for c in Candidate.objects.filter(run=run, index__in={0, best_index or 0})
    }
    seed, best = candidates.get(0), candidates.get(best_index or 0)
    val = paired_lift(_val_scores(seed), _val_scores(best)) if seed and best else None
    report["val"] = _side(val) if val is not None and val.tasks else None
    if scored and 0 in held and (best_index or 0) in held:
        holdout = paired_lift(held[0], held[best_index or 0])
        report["holdout"] = _side(holdout)
        report["state"] = "scored"
        report["verdict"], report["message"] = _verdict(val, holdout, best_index or 0)
    elif not enabled:
        report["state"] = "off"
        report["message"] = "held-out evaluation is off for this run: its val lift is unchecked"
    elif not split:
        report["state"] = "none"
        report["message"] = (
            "this run has no held-out split: its val lift is unchecked (a task set imported "
            "with 10 or more rows without splits gets one by the default rule)"
        )
    elif run.status in RunStatus.finished():
        report["state"] = "not_scored"
        report["message"] = (
            f"the run ended ({run.stop_reason or run.status}) without its held-out scores: "
            "its val lift is unchecked"
        )
    else:
        report["state"] = "pending"
        report["message"] = (
            f"the seed and the best are scored on {planned} held-out tasks when the run ends"
        )
    return report


def _verdict(val: Lift | None, holdout: Lift, best_index: int) -> tuple[str, str]:
    if best_index == 0 or val is None or val.difference is None or val.difference <= 0:
        return "no_lift", "the best is no better than the seed on val: no lift to confirm"
    if holdout.confirmed:
        return "confirmed", "held-out confirms the val lift: its 95 % interval lies above 0"
    if not holdout.enough:
        why = f"too few held-out tasks to tell ({holdout.tasks}; at least {MIN_PAIRS} are needed)"
    elif holdout.difference is not None and holdout.difference <= 0:
        why = "the best does no better than the seed on the held-out tasks"
    else:
        why = "the held-out interval reaches 0: the lift may be noise"
    return "not_confirmed", f"{NOT_CONFIRMED}: {why}"
