"""A re-scoring as the API, the pages and the run export show it."""

from __future__ import annotations

from optimizer.models import Candidate, Run, Scoring, ScoringStatus
from verifiers_app.engine.json_types import JSONObject

MAX_SCORINGS_PER_RUN = 50
MAX_SPECS = 20
# GET /api/runs/{id}/scorings/{sid} pages its candidates: at most this many rows,
# and this many with their per-task scores (?tasks=true; 300 tasks make a row ~6 KB).
API_CANDIDATES = 1000
API_CANDIDATES_WITH_TASKS = 200


def scoring_out(
    scoring: Scoring,
    *,
    candidates: bool = False,
    limit: int | None = None,
    offset: int = 0,
    tasks: bool = True,
) -> JSONObject:
    """A scoring as the API, the page's poll and the export show it; with
    `candidates`, the candidates' rows in ranking order: `limit` of them from
    `offset` (all by default), their per-task scores only with `tasks`, and
    `candidates_total`, `limit` and `offset` beside them when paged."""
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
        rows = scoring.candidates.order_by("rank", "index")
        if not tasks:
            rows = rows.defer("task_scores")
        if limit is not None:
            out.update(candidates_total=scoring.candidates.count(), limit=limit, offset=offset)
            rows = rows[offset : offset + limit]
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
                **({"task_scores": c.task_scores} if tasks else {}),
            }
            for c in rows
        ]
    return out


def finished_scoring(run: Run, wanted: str | None) -> tuple[Scoring | None, str]:
    """The scoring a page is asked to show its scores under (`?scoring=<id>`):
    (scoring, "") for a finished scoring of this run, (None, a sentence) for an
    id that names none, (None, "") when none was asked for."""
    if not wanted:
        return None, ""
    scoring = (
        run.scorings.filter(pk=int(wanted)).first()
        if wanted.isdigit() and len(wanted) < 12
        else None
    )
    if scoring is None or scoring.status != ScoringStatus.DONE:
        what = "is not finished" if scoring else "is not a scoring of this run"
        return None, f"scoring {wanted[:20]} {what}: showing the original scores"
    return scoring, ""


def scoring_val_scores(
    scoring: Scoring, candidates: list[Candidate]
) -> dict[int, dict[str, float]]:
    """The candidates' val scores per task under `scoring`, by candidate index;
    a candidate it did not score (one born after it) is absent."""
    return dict(
        scoring.candidates.filter(index__in=[c.index for c in candidates]).values_list(
            "index", "task_scores"
        )
    )


def scoring_run_page(run: Run, wanted: str | None) -> tuple[Scoring | None, JSONObject | None, str]:
    """The scoring the run page shows its candidate table and best under
    (`?scoring=<id>`): (scoring, its table, "") for a finished scoring of this run,
    (None, None, a sentence) for an id that names none, (None, None, "") when none
    was asked for. The table is {"id", "name", "best", "front", "rows": {index: [score, rank,
    on_front]}}, every candidate, without task scores."""
    scoring, problem = finished_scoring(run, wanted)
    if scoring is None:
        return None, None, problem
    rows = {
        str(index): [score, rank, on_front]
        for index, score, rank, on_front in scoring.candidates.values_list(
            "index", "val_score", "rank", "on_front"
        )
    }
    best = (scoring.summary or {}).get("best")
    table: JSONObject = {
        "id": scoring.pk,
        "name": scoring.name,
        "best": best["index"] if best else None,
        "front": (scoring.summary or {}).get("front", []),
        "rows": rows,
    }
    return scoring, table, ""


def scorings_export(run: Run) -> list[JSONObject]:
    """The run's finished re-scorings as the run export writes them (every candidate's row)."""
    return [
        scoring_out(s, candidates=True)
        for s in run.scorings.filter(status=ScoringStatus.DONE).select_related("created_by")
    ]
