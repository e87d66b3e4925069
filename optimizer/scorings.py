"""Re-scoring a run: a new, named scoring of its stored val outputs with other
verifier specs, with no model call (docs/guide.md "Re-scoring a run").

Nothing measured is overwritten: the run's Evaluation and Candidate rows (the
"original" scoring) are only read. A Scoring row is made when asked for
(`scoring_create`), a worker fills it (`scoring_execute`, one pass over the
outputs, progress written about once a second) and writes one
ScoringCandidate per candidate plus the summary the page shows, in one
transaction at the end.

Each output is scored exactly as the run scored it: one compiled scorer (the
specs, with the run's aggregator and thresholds), the run's frozen task rows
(their expectations and row verifiers), the candidate's system prompt. With the
run's own specs a re-scoring gives back every stored score.

An output stored cut for size is scored as stored and flagged (`cut_tasks`); an
evaluation with no stored output (the task model failed, or an external
client sent none) cannot be scored again: it keeps its original score and is
counted (`kept`).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterator
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from dashboard.lib.storable import storage_problems
from optimizer.config import RunConfigError, parse_run_config
from optimizer.front import front_members
from optimizer.models import (
    Candidate,
    Evaluation,
    Run,
    RunKind,
    RunStatus,
    Scoring,
    ScoringCandidate,
    ScoringStatus,
)
from optimizer.runs.adapter import MAX_OUTPUT_CHARS, system_prompt
from optimizer.tasksets.models import Split
from verifiers_app.engine import Scorer, SpecError, compile_specs
from verifiers_app.engine.json_types import JSONObject
from verifiers_app.models import Verifier, VerifierVersion
from verifiers_app.services import MAX_SPEC_BYTES, spec_validate

log = logging.getLogger(__name__)

MAX_SCORINGS_PER_RUN = 50
MAX_SPECS = 20
PROGRESS_EVERY_SECONDS = 1.0
MOVED_SHOWN = 10


@functools.cache
def _external_cut_lengths() -> frozenset[int]:
    """The lengths the tracker client (`max_output_chars`, 4,000 by default) and the
    checkpoint replay cut an output to, ending it with an ellipsis. Read when first
    needed: optimizer.external imports the run export, which imports this module."""
    from optimizer.external.replay import OUTPUT_CHARS

    return frozenset({OUTPUT_CHARS, MAX_OUTPUT_CHARS})


class ScoringRefused(ValueError):
    """The run cannot be re-scored now (still running, no outputs, too many scorings)."""


def output_was_cut(output: str, *, external: bool) -> bool:
    """Whether a stored output is the head of a longer answer: the runner keeps
    the first MAX_OUTPUT_CHARS characters of an answer; the tracker client and
    the checkpoint replay keep the first characters and end them with "…". An
    external client set to another `max_output_chars` is not recognised."""
    if external:
        return output.endswith("…") and len(output) in _external_cut_lengths()
    return len(output) >= MAX_OUTPUT_CHARS


def _prefixed(error: SpecError, prefix: str) -> SpecError:
    return SpecError([f"{prefix}{problem}" for problem in error.problems])


def scoring_specs(spec: Any) -> list[JSONObject]:
    """An edited spec (a spec object, or a list of them) checked as the verifier
    editor checks one; SpecError naming `spec.<field>` (`spec[i].<field>`)."""
    specs = spec if isinstance(spec, list) else [spec]
    if not specs:
        raise SpecError("spec: give a verifier spec (or a list of them)")
    if len(specs) > MAX_SPECS:
        raise SpecError(f"spec: at most {MAX_SPECS} verifier specs")
    if len(repr(specs)) > MAX_SPEC_BYTES * 2:
        raise SpecError(f"spec: larger than {MAX_SPEC_BYTES // 1024} KB")
    problems: list[str] = []
    for i, one in enumerate(specs):
        prefix = f"spec[{i}]." if isinstance(spec, list) else "spec."
        try:
            spec_validate(one)
        except SpecError as error:
            problems += _prefixed(error, prefix).problems
    if problems:
        raise SpecError(problems)
    return list(specs)


def scoring_verifier_spec(
    *, user: Any, verifier_id: str, version: int | None = None
) -> tuple[JSONObject, JSONObject]:
    """(spec, source) of a saved verifier the user can see, at `version` (default:
    its current one); SpecError naming `verifier_id` or `version`."""
    verifier = Verifier.objects.visible_to(user).lookup(user, verifier_id)
    if verifier is None:
        raise SpecError(f'verifier_id: no verifier with id "{verifier_id}" that you can use')
    if version is None or version == verifier.version:
        return verifier.spec, {"id": verifier.slug, "version": verifier.version}
    stored = VerifierVersion.objects.filter(verifier=verifier, number=version).first()
    if stored is None:
        raise SpecError(
            f'version: verifier "{verifier.slug}" has versions 1 to {verifier.version}, not {version}'
        )
    return stored.spec, {"id": verifier.slug, "version": version}


def scoring_source(
    *, user: Any, verifier_id: str | None = None, version: int | None = None, spec: Any = None
) -> tuple[list[JSONObject], list[JSONObject]]:
    """(specs, source) for a scoring from exactly one of: a saved verifier (at
    `version`) or an edited spec (a spec object or a list of them). SpecError
    naming the field."""
    if (verifier_id is None) == (spec is None):
        raise SpecError("verifier_id: give either a verifier_id or a spec (not both)")
    if spec is not None:
        if version is not None:
            raise SpecError("version: only with a verifier_id")
        specs = scoring_specs(spec)
        return specs, [{"edited": True} for _ in specs]
    one, source = scoring_verifier_spec(user=user, verifier_id=str(verifier_id), version=version)
    return [one], [source]


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


def _default_name(run: Run, source: list[JSONObject]) -> str:
    if any(s.get("edited") for s in source):
        base = "edited spec"
    else:
        base = " + ".join(f"{s['id']} v{s['version']}" for s in source)
    taken = set(run.scorings.values_list("name", flat=True))
    name, n = base[:190], 2
    while name in taken:
        name, n = f"{base[:185]} ({n})", n + 1
    return name


def scoring_create(
    *,
    run: Run,
    user: Any,
    specs: list[JSONObject],
    source: list[JSONObject],
    name: str = "",
) -> Scoring:
    """Ask for a re-scoring of `run`'s stored val outputs with `specs` (already
    checked: scoring_specs / scoring_verifier_spec). Refused (ScoringRefused) while
    the run runs, when it stored no output, or past MAX_SCORINGS_PER_RUN; a spec
    that cannot score with the run's aggregator is a SpecError. Queued for a
    worker once the transaction commits."""
    if run.status not in (*RunStatus.finished(), RunStatus.PAUSED):
        raise ScoringRefused(
            f"run {run.pk} is {run.status}: re-score it once it has finished or is paused"
        )
    scoring_scorer(run, specs)  # the aggregator's gates must name verifiers of these specs
    problems = storage_problems(specs, "spec")
    if problems:
        raise SpecError(problems)
    name = name.strip()[:200]
    if not run.scorings.count() < MAX_SCORINGS_PER_RUN:
        raise ScoringRefused(
            f"run {run.pk} has {MAX_SCORINGS_PER_RUN} scorings already; delete the run's copy or export it"
        )
    outputs = _val_evaluations(run)
    total = outputs.count()
    if not outputs.exclude(output="").exists():
        raise ScoringRefused(f"run {run.pk} stored no val outputs: there is nothing to re-score")
    try:
        with transaction.atomic():
            scoring = Scoring.objects.create(
                run=run,
                name=name or _default_name(run, source),
                specs=specs,
                source=source,
                created_by=user if getattr(user, "pk", None) else None,
                total=total,
            )
    except IntegrityError:
        raise SpecError(f'name: run {run.pk} already has a scoring named "{name}"') from None
    from optimizer.celery_tasks import enqueue_scoring

    transaction.on_commit(lambda: enqueue_scoring(scoring.pk))
    return scoring


def _val_evaluations(run: Run) -> QuerySet[Evaluation]:
    return Evaluation.objects.filter(candidate__run=run, split=Split.VAL)


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


class _Progress:
    """Writes `done` about once a second (the page and the CLI poll it)."""

    def __init__(self, scoring_id: int) -> None:
        self.scoring_id = scoring_id
        self.at = time.monotonic()

    def __call__(self, done: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.at >= PROGRESS_EVERY_SECONDS:
            self.at = now
            Scoring.objects.filter(pk=self.scoring_id).update(done=done)


def _rows_by_candidate(
    run: Run,
) -> Iterator[tuple[int, list[tuple[str, str, float]]]]:
    """(candidate pk, [(task key, output, score)]) read in one ordered
    pass over the run's val evaluations (a server-side cursor on PostgreSQL)."""
    rows = (
        _val_evaluations(run)
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
    (the worker's task). A scoring already done or failed is left as it is;
    one found running (its worker died) starts over."""
    scoring = Scoring.objects.select_related("run").filter(pk=scoring_id).first()
    if scoring is None or scoring.status in (ScoringStatus.DONE, ScoringStatus.FAILED):
        return "skipped"
    Scoring.objects.filter(pk=scoring.pk).update(status=ScoringStatus.RUNNING, done=0)
    try:
        _score_all(scoring, _Progress(scoring.pk), started=time.monotonic())
    except Exception as error:
        log.exception("scoring %s of run %s failed", scoring.pk, scoring.run_id)
        Scoring.objects.filter(pk=scoring.pk).update(
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
        "seconds": round(time.monotonic() - started, 2),
    }
    with transaction.atomic():
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


def scoring_for_run(run: Run, scoring_id: int) -> Scoring:
    """One scoring of the run, or Scoring.DoesNotExist."""
    return run.scorings.get(pk=scoring_id)


def scoring_out(scoring: Scoring, *, candidates: bool = False) -> JSONObject:
    """A scoring as the API, the page's poll and the export show it; with
    `candidates`, every candidate's row in ranking order (task scores included)."""
    out: JSONObject = {
        "id": scoring.pk,
        "name": scoring.name,
        "status": scoring.status,
        "done": scoring.done,
        "total": scoring.total,
        "error": scoring.error,
        "specs": scoring.specs,
        "source": scoring.source,
        "created_by": scoring.created_by.username if scoring.created_by else "",
        "created_at": scoring.created_at.isoformat(),
        "finished_at": scoring.finished_at.isoformat() if scoring.finished_at else None,
        "summary": scoring.summary,
    }
    if candidates:
        out["candidates"] = [
            {
                "index": c.index,
                "score": c.val_score,
                "original_score": c.original_score,
                "rank": c.rank,
                "original_rank": c.original_rank,
                "on_front": c.on_front,
                "cut_tasks": c.cut_tasks,
                "kept": c.kept,
                "task_scores": c.task_scores,
            }
            for c in scoring.candidates.order_by("rank", "index")
        ]
    return out


def scorings_export(run: Run) -> list[JSONObject]:
    """The run's finished re-scorings as the run export writes them (every candidate's row)."""
    return [
        scoring_out(s, candidates=True)
        for s in run.scorings.filter(status=ScoringStatus.DONE).select_related("created_by")
    ]
