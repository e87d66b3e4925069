"""The worker's side of a re-scoring: one ordered pass over the run's stored val
outputs, each scored as the run scored it, then the ranks, fronts, best and
movers, written with one ScoringCandidate per candidate in one transaction."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from optimizer.confidence import paired_lift
from optimizer.config import RunConfigError, parse_run_config
from optimizer.front import front_members
from optimizer.models import (
    Candidate,
    Evaluation,
    Run,
    RunKind,
    Scoring,
    ScoringCandidate,
    ScoringStatus,
)
from optimizer.promotion import seed_candidate
from optimizer.runs.adapter import MAX_OUTPUT_CHARS, system_prompt
from optimizer.runs.runner import STALE_AFTER
from optimizer.tasksets.models import Split
from verifiers_app.engine import Scorer, compile_specs
from verifiers_app.engine.json_types import JSONObject

log = logging.getLogger(__name__)

PROGRESS_EVERY_SECONDS = 1.0
MOVED_SHOWN = 10

# The lengths the tracker client (its `max_output_chars`, 4,000 by default) and the
# checkpoint replay (optimizer/external/replay.py OUTPUT_CHARS) cut an output to,
# ending it with an ellipsis (tests/optimizer/test_scorings.py holds them equal).
EXTERNAL_CUT_LENGTHS = frozenset({4_000, MAX_OUTPUT_CHARS})


def output_was_cut(output: str, *, external: bool) -> bool:
    """Whether a stored output is the head of a longer answer: the runner keeps
    the first MAX_OUTPUT_CHARS characters of an answer; the tracker client and
    the checkpoint replay keep the first characters and end them with "…". An
    external client set to another `max_output_chars` is not recognised."""
    if external:
        return output.endswith("…") and len(output) in EXTERNAL_CUT_LENGTHS
    return len(output) >= MAX_OUTPUT_CHARS


def _rules(run: Run) -> tuple[Any, Any, str]:
    """The run's aggregator, thresholds and val split name (an external run's are the defaults)."""
    if run.kind == RunKind.NATIVE:
        try:
            config = parse_run_config(run.config)
        except RunConfigError:
            return "weighted_average", None, Split.VAL
        return config.aggregator, config.thresholds.as_engine(), config.splits.val
    return "weighted_average", None, Split.VAL


def scoring_scorer(run: Run, specs: list[JSONObject]) -> Scorer:
    """The specs compiled with the run's aggregator and thresholds, as its runner compiles them."""
    aggregator, thresholds, _ = _rules(run)
    return compile_specs(specs, aggregator=aggregator, thresholds=thresholds)


def val_evaluations(run: Run) -> QuerySet[Evaluation]:
    """The run's stored val evaluations, read by their own run column (no join)."""
    return Evaluation.objects.filter(run=run, split=Split.VAL)


def _task_rows(run: Run, val: str) -> dict[str, JSONObject]:
    """The run's frozen val task rows by key, as its runner hands them to the scorer."""
    return {
        row["task_id"]: {k: v for k, v in row.items() if k != "split"}
        for row in run.tasks_snapshot
        if row.get("split") == val and "task_id" in row
    }


def _ranks(scores: dict[int, float | None]) -> dict[int, int]:
    """1 = highest score; ties go to the lower index (the one found first), no score last."""
    order = sorted(scores, key=lambda i: (scores[i] is None, -(scores[i] or 0.0), i))
    return {index: rank for rank, index in enumerate(order, start=1)}


def _best(scores: dict[int, float | None], eligible: set[int]) -> int | None:
    known = [i for i in eligible if scores.get(i) is not None]
    return max(known, key=lambda i: (scores[i], -i)) if known else None


def stale_scorings() -> Q:
    """Running scorings whose worker stopped: no heartbeat for STALE_AFTER (as for runs)."""
    return Q(status=ScoringStatus.RUNNING) & (
        Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=timezone.now() - STALE_AFTER)
    )


class _Progress:
    """Writes `done` and the heartbeat about once a second (the page and the CLI
    poll `done`; the workers' watchdog reads the heartbeat)."""

    def __init__(self, scoring_id: int) -> None:
        self.scoring_id = scoring_id
        self.at = time.monotonic()

    def __call__(self, done: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.at >= PROGRESS_EVERY_SECONDS:
            self.at = now
            Scoring.objects.filter(pk=self.scoring_id).update(
                done=done, heartbeat_at=timezone.now()
            )


def _rows_by_candidate(
    run: Run,
) -> Iterator[tuple[int, list[tuple[str, str, float]]]]:
    """(candidate pk, [(task key, output, score)]) read in one ordered
    pass over the run's val evaluations (a server-side cursor on PostgreSQL)."""
    rows = (
        val_evaluations(run)
        .order_by("candidate_id", "task_key")
        .values_list("candidate_id", "task_key", "output", "score")
        .iterator(chunk_size=4000)
    )
    current: int | None = None
    group: list[tuple[str, str, float]] = []
    for candidate_id, task_key, output, score in rows:
        if candidate_id != current:
            if current is not None:
                yield current, group
            current, group = candidate_id, []
        group.append((task_key, output, score))
    if current is not None:
        yield current, group


def scoring_execute(scoring_id: int) -> str:
    """Score every stored val output of the scoring's run and write the results
    (the worker's task). A queued scoring is taken, and so is one found running
    whose heartbeat is stale (its worker died): it starts over, the results being
    written in one transaction at the end. One done or failed, or running with a
    live worker (a message delivered twice), is left as it is."""
    takeable = Q(status=ScoringStatus.QUEUED) | stale_scorings()
    taken = Scoring.objects.filter(takeable, pk=scoring_id).update(
        status=ScoringStatus.RUNNING, done=0, heartbeat_at=timezone.now()
    )
    scoring = Scoring.objects.select_related("run").filter(pk=scoring_id).first()
    if not taken or scoring is None:
        return "skipped"
    try:
        _score_all(scoring, _Progress(scoring.pk), started=time.monotonic())
    except Exception as error:
        log.exception("scoring %s of run %s failed", scoring.pk, scoring.run_id)
        Scoring.objects.filter(pk=scoring.pk).exclude(status=ScoringStatus.DONE).update(
            status=ScoringStatus.FAILED,
            error=f"{type(error).__name__}: {error}"[:2000],
            finished_at=timezone.now(),
        )
        return "failed"
    return "done"


def _score_all(scoring: Scoring, progress: _Progress, *, started: float) -> JSONObject:
    run = scoring.run
    _, _, val = _rules(run)
    scorer = scoring_scorer(run, scoring.specs)
    tasks = _task_rows(run, val)
    external = run.kind == RunKind.EXTERNAL
    candidates = {
        pk: (index, components, val_score)
        for pk, index, components, val_score in Candidate.objects.filter(run=run).values_list(
            "pk", "index", "components", "val_score"
        )
    }
    new_tasks: dict[int, dict[str, float]] = {}
    old_tasks: dict[int, dict[str, float]] = {}
    cut: dict[int, list[str]] = {}
    kept: dict[int, int] = {}
    scored_any: set[int] = set()
    done = 0
    score = scorer.score
    for pk, rows in _rows_by_candidate(run):
        index, components, _ = candidates[pk]
        prompt = system_prompt(components) if components else ""
        new: dict[str, float] = {}
        old: dict[str, float] = {}
        cut_here: list[str] = []
        kept_here = 0
        for task_key, output, original in rows:
            old[task_key] = original
            if not output:
                # No stored answer: the task model failed (its feedback says why), or
                # an external client sent none. Not a measure of the new verifier.
                new[task_key] = original
                kept_here += 1
                continue
            new[task_key] = score(output, task=tasks.get(task_key), prompt=prompt).score
            scored_any.add(index)
            if output_was_cut(output, external=external):
                cut_here.append(task_key)
        new_tasks[index], old_tasks[index] = new, old
        cut[index], kept[index] = cut_here, kept_here
        done += len(rows)
        progress(done)
    progress(done, force=True)
    return _record(scoring, candidates, new_tasks, old_tasks, cut, kept, scored_any, started)


def _mean(values: dict[str, float]) -> float | None:
    return sum(values.values()) / len(values) if values else None


def _record(
    scoring: Scoring,
    candidates: dict[int, tuple[int, dict, float | None]],
    new_tasks: dict[int, dict[str, float]],
    old_tasks: dict[int, dict[str, float]],
    cut: dict[int, list[str]],
    kept: dict[int, int],
    scored_any: set[int],
    started: float,
) -> JSONObject:
    """Ranks, fronts, best and movers; the ScoringCandidate rows and the summary, in one transaction."""
    by_index = {index: (pk, original) for pk, (index, _, original) in candidates.items()}
    new_scores = {i: _mean(new_tasks.get(i, {})) for i in by_index}
    old_scores = {i: by_index[i][1] for i in by_index}
    new_rank, old_rank = _ranks(new_scores), _ranks(old_scores)
    front = front_members({i: s for i, s in new_tasks.items() if s})
    original_front = front_members({i: s for i, s in old_tasks.items() if s})
    best = _best(new_scores, scored_any)
    original_best = scoring.run.best_candidate.index if scoring.run.best_candidate else None
    rows = [
        ScoringCandidate(
            scoring=scoring,
            candidate_id=pk,
            index=i,
            val_score=new_scores[i],
            original_score=old_scores[i],
            task_scores=new_tasks.get(i, {}),
            rank=new_rank[i],
            original_rank=old_rank[i],
            on_front=i in front,
            cut_tasks=cut.get(i, []),
            kept=kept.get(i, 0),
        )
        for i, (pk, _) in sorted(by_index.items())
    ]
    moved = sorted(
        by_index,
        key=lambda i: (
            -abs(old_rank[i] - new_rank[i]),
            -abs((new_scores[i] or 0) - (old_scores[i] or 0)),
            i,
        ),
    )[:MOVED_SHOWN]
    keys = sorted({k for s in old_tasks.values() for k in s})
    per_task = []
    for key in keys:
        pairs = [(old_tasks[i][key], new_tasks[i][key]) for i in old_tasks if key in old_tasks[i]]
        per_task.append(
            {
                "task_key": key,
                "original": sum(p[0] for p in pairs) / len(pairs),
                "score": sum(p[1] for p in pairs) / len(pairs),
                "changed": sum(1 for a, b in pairs if a != b),
                "cut": sum(1 for i in cut if key in cut[i]),
            }
        )
    best_tasks: list[JSONObject] = []
    deltas: list[float] = []
    if best is not None:
        for key in sorted(new_tasks[best]):
            before, after = old_tasks[best][key], new_tasks[best][key]
            deltas.append(after - before)
            best_tasks.append(
                {
                    "task_key": key,
                    "original": before,
                    "score": after,
                    "delta": after - before,
                    "cut": key in cut[best],
                }
            )
    changed = sum(1 for i in new_tasks for k, v in new_tasks[i].items() if v != old_tasks[i][k])
    seed = seed_candidate(scoring.run)
    seed_index = seed.index if seed is not None else None
    summary: JSONObject = {
        "candidates": len(by_index),
        "outputs": sum(len(s) for s in new_tasks.values()),
        "rescored": sum(len(s) for s in new_tasks.values()) - sum(kept.values()),
        "kept": sum(kept.values()),
        "cut": sum(len(c) for c in cut.values()),
        "changed": changed,
        "best": _point(best, new_scores, old_scores, new_rank, old_rank),
        "original_best": _point(original_best, new_scores, old_scores, new_rank, old_rank),
        "front": front,
        "original_front": original_front,
        "best_tasks": best_tasks,
        "best_counts": {
            "improved": sum(1 for d in deltas if d > 0),
            "worse": sum(1 for d in deltas if d < 0),
            "same": sum(1 for d in deltas if d == 0),
        },
        "tasks": per_task,
        "moved": [_point(i, new_scores, old_scores, new_rank, old_rank) for i in moved],
        "best_vs_seed": _vs_seed(seed_index, best, new_tasks),
        "original_best_vs_seed": _vs_seed(seed_index, original_best, old_tasks),
        "seconds": round(time.monotonic() - started, 2),
    }
    with transaction.atomic():
        # A worker taken for dead that finished after all: the first result stands.
        status = (
            Scoring.objects.select_for_update()
            .filter(pk=scoring.pk)
            .values_list("status", flat=True)
        )
        if status.first() == ScoringStatus.DONE:
            return summary
        ScoringCandidate.objects.filter(scoring=scoring).delete()  # a worker that died half-way
        ScoringCandidate.objects.bulk_create(rows, batch_size=500)
        Scoring.objects.filter(pk=scoring.pk).update(
            status=ScoringStatus.DONE,
            done=summary["outputs"],
            summary=summary,
            finished_at=timezone.now(),
            error="",
        )
    return summary


def _vs_seed(
    seed: int | None, best: int | None, task_scores: dict[int, dict[str, float]]
) -> JSONObject | None:
    """A best against the seed on the val tasks both have, under one scoring's task
    scores, with its paired bootstrap interval (optimizer/confidence.py); None
    without a seed or a best."""
    if seed is None or best is None or seed not in task_scores or best not in task_scores:
        return None
    lift: JSONObject = paired_lift(task_scores[seed], task_scores[best]).as_dict()
    return {"seed": seed, "best": best, **lift}


def _point(
    index: int | None,
    new: dict[int, float | None],
    old: dict[int, float | None],
    new_rank: dict[int, int],
    old_rank: dict[int, int],
) -> JSONObject | None:
    if index is None or index not in new:
        return None
    return {
        "index": index,
        "score": new[index],
        "original_score": old[index],
        "rank": new_rank[index],
        "original_rank": old_rank[index],
    }
