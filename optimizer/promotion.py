"""Promotion: should a run's best candidate replace the seed prompt?

The minimum-improvement rule, judged on the holdout split only (tasks GEPA never
optimised against): promote when, over the holdout tasks both were scored on,
  1. the candidate's mean score beats the seed's by at least `margin`
     (default 0.02 on the 0–1 scale), and
  2. the candidate regresses on no more tasks than it improves.
A run without holdout evaluations gets no report.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied

from optimizer.models import Candidate, Evaluation, Run, RunStatus

DEFAULT_MIN_IMPROVEMENT = 0.02
EPSILON = 1e-9


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
        return sum(r.delta > EPSILON for r in self.rows)

    @property
    def regressed(self) -> int:
        return sum(r.delta < -EPSILON for r in self.rows)

    @property
    def beats_margin(self) -> bool:
        return self.improvement >= self.margin - EPSILON

    @property
    def few_regressions(self) -> bool:
        return self.regressed <= self.improved

    @property
    def promote(self) -> bool:
        return self.beats_margin and self.few_regressions


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
    return PromotionReport(seed, candidate, margin, rows) if rows else None


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
