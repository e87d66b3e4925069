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

Numbers come from the Evaluations the recorder stored, read and paired as the
promotion report reads them (optimizer/promotion.py `candidate_lift`);
nothing here writes.
"""

from __future__ import annotations

from typing import Any

from optimizer.confidence import MIN_PAIRS, Lift
from optimizer.models import Run, RunEvent, RunStatus
from optimizer.promotion import best_candidate, candidate_lift, seed_candidate
from optimizer.runs import event_types as ev
from optimizer.tasksets.files import HOLDOUT_MIN_ROWS

NOT_CONFIRMED = "val lift not confirmed on held-out"


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
    # when the run ended); before that, the run's best so far.
    scored = (
        RunEvent.objects.filter(run=run, type=ev.HOLDOUT_SCORED)
        .order_by("-seq")
        .values_list("payload", flat=True)
        .first()
    )
    seed = seed_candidate(run)
    best = (
        run.candidates.filter(index=scored["best_index"]).first() if scored else best_candidate(run)
    )
    val = candidate_lift(seed, best, "val") if seed and best else None
    holdout = candidate_lift(seed, best, "holdout") if seed and best else None
    best_is_seed = seed is not None and best is not None and seed.pk == best.pk
    report: dict[str, Any] = {
        "split": split,
        "enabled": enabled,
        "planned_tasks": planned,
        # The seed and the best on every held-out task; once only when the best is the seed.
        "planned_evaluations": planned * (1 if best_is_seed else 2),
        "evaluations": (holdout.tasks if holdout else 0) * (1 if best_is_seed else 2),
        "seed_index": seed.index if seed else 0,
        "best_index": best.index if best else None,
        "val": _side(val) if val is not None and val.tasks else None,
        "holdout": None,
        "state": "",
        "verdict": None,
        "message": "",
    }
    if scored and holdout is not None and holdout.tasks:
        report["holdout"] = _side(holdout)
        report["state"] = "scored"
        report["verdict"], report["message"] = _verdict(val, holdout, best_is_seed)
    elif not enabled:
        report["state"] = "off"
        report["message"] = "held-out evaluation is off for this run: its val lift is unchecked"
    elif not split:
        report["state"] = "none"
        report["message"] = (
            "this run has no held-out split: its val lift is unchecked (a task set imported "
            f"with {HOLDOUT_MIN_ROWS} or more rows without splits gets one by the default rule)"
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


def _verdict(val: Lift | None, holdout: Lift, best_is_seed: bool) -> tuple[str, str]:
    if best_is_seed or val is None or val.difference is None or val.difference <= 0:
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
