"""What the run page needs of a candidate's val evaluation, stored on the
Candidate when the evaluation is recorded: recorded once, never re-aggregated
on a page load (docs/architecture.md "Money, limits and truth").

`Candidate.val_task_scores` is {task key: score} over the val split, and
`Candidate.val_summary` the small aggregates the run page's charts read for
every candidate: the means of the answered tasks (a task with no tokens either
way was not answered: left out, as in the recorder's candidate.new) and the
verdict counts. The recorder fills both; `fill_val_summaries` computes them
from Evaluation rows for candidates recorded before the fields existed (the
data migration) or by a writer that does not fill them (an import).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from statistics import fmean

VERDICTS = ("pass", "borderline", "fail")


def val_summary(
    rows: Iterable[tuple[str, float, str, int, int, float]],
) -> tuple[dict[str, float], dict]:
    """(task scores, summary) of val evaluation rows
    `(task_key, score, verdict, tokens_in, tokens_out, latency_ms)`."""
    scores: dict[str, float] = {}
    verdicts = dict.fromkeys(VERDICTS, 0)
    answered = []
    for task_key, score, verdict, tokens_in, tokens_out, latency_ms in rows:
        scores[task_key] = min(1.0, max(0.0, float(score)))
        if verdict in verdicts:
            verdicts[verdict] += 1
        if tokens_in or tokens_out:
            answered.append((tokens_in, tokens_out, latency_ms))
    return scores, {
        "prompt_tokens": round(fmean(a[0] for a in answered)) if answered else 0,
        "mean_output_tokens": round(fmean(a[1] for a in answered), 1) if answered else 0.0,
        "mean_latency_ms": round(fmean(a[2] for a in answered), 1) if answered else 0.0,
        "verdicts": verdicts,
    }


VAL_ROW_FIELDS = (
    "candidate_id",
    "task_key",
    "score",
    "verdict",
    "tokens_in",
    "tokens_out",
    "latency_ms",
)


def fill_val_summaries(
    candidate_ids: Iterable[int], *, candidate_model=None, evaluation_model=None
) -> dict[int, dict]:
    """Compute and store both fields for these candidates from their val
    Evaluation rows; returns each one's summary by primary key. The models
    default to the current ones (a migration passes its historical models)."""
    if candidate_model is None or evaluation_model is None:
        from optimizer.models import Candidate, Evaluation

        candidate_model, evaluation_model = Candidate, Evaluation
    ids = list(candidate_ids)
    written: dict[int, dict] = {}
    for start in range(0, len(ids), 200):  # bounded memory on a big run
        chunk = ids[start : start + 200]
        rows = defaultdict(list)
        evaluations = (
            evaluation_model.objects.filter(candidate_id__in=chunk, split="val")
            .order_by()
            .values_list(*VAL_ROW_FIELDS)
        )
        for candidate_id, *row in evaluations.iterator(chunk_size=5000):
            rows[candidate_id].append(row)
        updates = []
        for candidate_id in chunk:
            scores, summary = val_summary(rows.get(candidate_id, []))
            updates.append(
                candidate_model(pk=candidate_id, val_task_scores=scores, val_summary=summary)
            )
            written[candidate_id] = summary
        candidate_model.objects.bulk_update(
            updates, ["val_task_scores", "val_summary"], batch_size=200
        )
    return written
