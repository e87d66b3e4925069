"""Promotion: should a run's best candidate replace the seed prompt? And how
sure is the lift of one candidate on another?

Judged on the holdout split only (tasks GEPA never optimised against), over the
holdout tasks both were scored on. Promote when
  1. the lift is confirmed: the paired bootstrap 95 % interval of the mean
     score difference (candidate − seed; optimizer/confidence.py) lies above 0,
     which takes at least MIN_PAIRS holdout tasks (fewer: "too few tasks to
     tell", never a promotion), and
  2. the mean lift is at least `margin` (default 0.02 on the 0–1 scale): a
     lift that is surely there but smaller than the margin is not worth a new
     prompt.
The interval replaces the old "no more regressions than improvements" rule:
that count weighed a task that dropped 0.01 like one that gained 0.5, while
the interval weighs how far each task moved and how consistently; the counts
(improved / worse / unchanged) are still shown beside it.
A run without holdout evaluations gets no report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied
from pydantic import BaseModel, ConfigDict, Field

from optimizer.confidence import TOO_FEW, Lift, lift_of_pairs, paired_lift
from optimizer.models import Candidate, Evaluation, Origin, Run, RunStatus

DEFAULT_MIN_IMPROVEMENT = 0.02
EPSILON = 1e-9
LIFT_SPLITS = ("val", "holdout")


def seed_candidate(run: Run) -> Candidate | None:
    """The run's seed prompt (its first seed-origin candidate, else its first candidate)."""
    return (
        run.candidates.filter(origin=Origin.SEED).order_by("index").first()
        or run.candidates.order_by("index").first()
    )


def best_candidate(run: Run) -> Candidate | None:
    """The run's best candidate, or while none is recorded the highest val score."""
    if run.best_candidate_id:
        return run.best_candidate
    return run.candidates.exclude(val_score=None).order_by("-val_score", "index").first()


def split_scores(candidates: list[Candidate], split: str) -> list[dict[str, float]]:
    """Each candidate's score per task key on `split` (one query for all of them)."""
    position = {c.pk: i for i, c in enumerate(candidates)}
    scores: list[dict[str, float]] = [{} for _ in candidates]
    for cand_id, key, score in (
        Evaluation.objects.filter(candidate__in=candidates, split=split)
        .order_by()
        .values_list("candidate_id", "task_key", "score")
    ):
        scores[position[cand_id]][key] = score
    return scores


def candidate_lift(a: Candidate, b: Candidate, split: str) -> Lift:
    """B against A on the `split` tasks both were scored on, with its interval."""
    scores_a, scores_b = split_scores([a, b], split)
    return paired_lift(scores_a, scores_b)


class LiftDoc(BaseModel):
    """`Lift.as_dict()` as JSON (exports, API): B − A over the tasks both were scored on."""

    model_config = ConfigDict(extra="forbid")

    tasks: int = Field(ge=0, description="Tasks both were scored on")
    mean_a: float | None
    mean_b: float | None
    difference: float | None = Field(description="Mean of b − a over those tasks")
    low: float | None = Field(description="The interval's low end; null below MIN_PAIRS tasks")
    high: float | None
    improved: int = Field(ge=0)
    worse: int = Field(ge=0)
    unchanged: int = Field(ge=0)
    level: float = Field(description="0.95: a 95 % interval")
    resamples: int
    seed: int
    enough: bool = Field(description="Enough tasks for an interval (else too few to tell)")
    confirmed: bool = Field(description="The interval lies above 0")
    method: str
    text: str = Field(description="The one line the pages show")


class SeedVsBestDoc(BaseModel):
    """The run's best candidate against its seed, per split (null: no shared task)."""

    model_config = ConfigDict(extra="forbid")

    seed_index: int
    best_index: int
    val: LiftDoc | None
    holdout: LiftDoc | None


def seed_vs_best(run: Run) -> dict[str, Any] | None:
    """Best against seed per split (val, holdout) as JSON: each split's
    `Lift.as_dict()`, or None where the two share no scored task. None when
    the run has no seed or best candidate."""
    seed, best = seed_candidate(run), best_candidate(run)
    if seed is None or best is None:
        return None
    lifts: dict[str, Any] = {"seed_index": seed.index, "best_index": best.index}
    for split in LIFT_SPLITS:
        lift = candidate_lift(seed, best, split)
        lifts[split] = lift.as_dict() if lift.tasks else None
    return lifts


@dataclass
class HoldoutRow:
    task_key: str
    seed_score: float
    seed_verdict: str
    score: float
    verdict: str

    @property
    def delta(self) -> float:
        return self.score - self.seed_score


@dataclass
class PromotionReport:
    seed: Candidate
    candidate: Candidate
    margin: float
    rows: list[HoldoutRow]
    lift: Lift

    @property
    def seed_mean(self) -> float:
        return sum(r.seed_score for r in self.rows) / len(self.rows)

    @property
    def mean(self) -> float:
        return sum(r.score for r in self.rows) / len(self.rows)

    @property
    def improvement(self) -> float:
        return self.mean - self.seed_mean

    @property
    def improved(self) -> int:
        return self.lift.improved

    @property
    def regressed(self) -> int:
        return self.lift.worse

    @property
    def unchanged(self) -> int:
        return self.lift.unchanged

    @property
    def enough(self) -> bool:
        """Enough holdout tasks for an interval (MIN_PAIRS)."""
        return self.lift.enough

    @property
    def confirmed(self) -> bool:
        """The holdout interval lies above 0."""
        return self.lift.confirmed

    @property
    def beats_margin(self) -> bool:
        return self.improvement >= self.margin - EPSILON

    @property
    def promote(self) -> bool:
        return self.confirmed and self.beats_margin

    @property
    def reason(self) -> str:
        """Why the report says promote or not, in one sentence."""
        if not self.enough:
            return f"Do not promote: {TOO_FEW} on the holdout split."
        interval = f"[{self.lift.low:+.3f}, {self.lift.high:+.3f}]"
        if not self.confirmed:
            return (
                f"Do not promote: the lift is not confirmed; its 95 % interval {interval} "
                "does not lie above 0."
            )
        if not self.beats_margin:
            return (
                f"Do not promote: the lift is confirmed ({interval}) but its mean "
                f"{self.improvement:+.3f} is below the margin {self.margin:g}."
            )
        return (
            f"Promote: the lift is confirmed (95 % interval {interval} lies above 0) "
            f"and its mean {self.improvement:+.3f} meets the margin {self.margin:g}."
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed_index": self.seed.index,
            "candidate_index": self.candidate.index,
            "split": "holdout",
            "margin": self.margin,
            "promote": self.promote,
            "reason": self.reason,
            "lift": self.lift.as_dict(),
            "tasks": [
                {
                    "task_key": r.task_key,
                    "seed_score": r.seed_score,
                    "seed_verdict": r.seed_verdict,
                    "score": r.score,
                    "verdict": r.verdict,
                }
                for r in self.rows
            ],
        }


def promotion_report(
    *, seed: Candidate, candidate: Candidate, margin: float = DEFAULT_MIN_IMPROVEMENT
) -> PromotionReport | None:
    """Seed vs candidate on every holdout task both were scored on, or None."""
    scores: dict[str, dict[int, tuple[float, str]]] = {}
    evals = Evaluation.objects.filter(candidate__in=[seed, candidate], split="holdout").order_by()
    for cand_id, key, score, verdict in evals.values_list(
        "candidate_id", "task_key", "score", "verdict"
    ):
        scores.setdefault(key, {})[cand_id] = (score, verdict)
    rows = [
        HoldoutRow(key, *pair[seed.pk], *pair[candidate.pk])
        for key, pair in sorted(scores.items())
        if seed.pk in pair and candidate.pk in pair
    ]
    if not rows:
        return None
    lift = lift_of_pairs((r.seed_score, r.score) for r in rows)
    return PromotionReport(seed, candidate, margin, rows, lift)


def run_promote(*, run: Run, candidate: Candidate, user) -> Run:
    """Mark `candidate` as the run's chosen prompt. Only the run's owner (or an
    admin) may, and only once the run has finished."""
    if not run.controllable_by(user):
        raise PermissionDenied("Only the run's owner can promote a candidate.")
    if candidate.run_id != run.pk:
        raise ValueError(f"candidate: {candidate.index} is not a candidate of run {run.pk}.")
    if run.status not in RunStatus.finished():
        raise ValueError("run: wait until the run has finished before promoting a candidate.")
    run.chosen_candidate = candidate
    run.save(update_fields=["chosen_candidate"])
    return run
