"""Read paths of the run pages: the run page's JSON snapshot, its header card
and family, the candidate page and the launch form's choices (the run read
model itself, list rows included, is optimizer.selectors.run_summary).

The snapshot is everything the run page draws, built from the database alone
(Run, Candidate, Evaluation rows and the tail of the event log), so a finished
run renders exactly like a live one; the websocket then only appends events
after `last_seq`. It stays small at scale (300 candidates × 100 val tasks is
well under 2 MB): per-task scores travel as one matrix of rounded numbers,
verdicts as one letter per task, prompts as short previews, and the streams
as bounded tails.
"""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Count, Max

from optimizer import event_types as ev
from optimizer.budget import format_cost, run_pricing
from optimizer.config import DEMO_MODEL_LABEL, lm_is_simulator
from optimizer.models import Candidate, Evaluation, ModelEndpoint, Run, RunEvent, Split, TaskSet
from optimizer.selectors import run_summary
from verifiers_app.models import Verifier

HOVER_PREVIEW_CHARS = 200
STREAM_TEXT_CHARS = 600
PROPOSALS_TAIL = 60
TRIAL_ITEMS_TAIL = 120
REASONS_SHOWN = 5
ERRORS_TAIL = 50
VERDICT_LETTERS = {"pass": "p", "borderline": "b", "fail": "f"}


def _clip(text: str, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _val_task_keys(run: Run, seen: set[str]) -> list[str]:
    """Val task keys in the task set's order, then any evaluated key not in the snapshot."""
    val_split = ((run.config or {}).get("splits") or {}).get("val", Split.VAL)
    keys = [row["task_id"] for row in run.tasks_snapshot or [] if row.get("split") == val_split]
    known = set(keys)
    return keys + sorted(seen - known)


def _stream_tails(run: Run) -> dict:
    """The last proposals, trial items and errors, oldest first, texts clipped."""
    # Only events up to the summary's last_seq: the page's socket asks for the rest.
    events = RunEvent.objects.filter(run=run, seq__lte=run.last_seq)
    proposals = list(
        events.filter(type=ev.PROPOSAL).order_by("-seq").values_list("seq", "payload")[:PROPOSALS_TAIL]
    )
    errors = list(events.filter(type=ev.ERROR).order_by("-seq").values_list("seq", "payload")[:ERRORS_TAIL])
    trials: list[dict] = []
    for seq, payload in events.filter(type=ev.TRIALS).order_by("-seq").values_list("seq", "payload").iterator():
        for item in reversed(payload.get("items", [])):
            trials.append(dict(_clip_trial_item(item), candidate=payload.get("candidate"), split=payload.get("split"), seq=seq))
        if len(trials) >= TRIAL_ITEMS_TAIL:
            break
    # Every rejected proposal is a faint mark on the score chart, not only those in
    # the tail: a reload must draw what the live page drew. Only the numbers are read.
    rejected = events.filter(type=ev.PROPOSAL, payload__accepted=False).order_by("seq").values_list(
        "payload__metric_calls", "payload__parent", "payload__before", "payload__after", "payload__minibatch"
    )
    return {
        "rejected": [
            {"metric_calls": calls, "parent": parent, "before": before, "after": after, "minibatch_size": len(minibatch or [])}
            for calls, parent, before, after, minibatch in rejected
        ],
        "proposals": [dict(_clip_proposal(p), seq=s) for s, p in reversed(proposals)],
        "trials": list(reversed(trials[:TRIAL_ITEMS_TAIL])),
        "errors": [dict(p, seq=s) for s, p in reversed(errors)],
    }


def _clip_proposal(payload: dict) -> dict:
    return dict(
        payload,
        texts={name: _clip(text, STREAM_TEXT_CHARS) for name, text in (payload.get("texts") or {}).items()},
        reasoning=_clip(payload.get("reasoning", ""), STREAM_TEXT_CHARS),
    )


def _clip_trial_item(item: dict) -> dict:
    return dict(item, output=_clip(item.get("output", ""), STREAM_TEXT_CHARS), reasons=list(item.get("reasons") or [])[:REASONS_SHOWN])


def run_snapshot(run: Run) -> dict:
    """Everything the run page draws, from the database alone.

    Shape: `run` (run_summary), `verifiers` (ids), `tasks` (val task keys: the
    heatmap's columns), `candidates` (one dict per candidate, by index, with
    lineage, scores and size/latency metrics), `scores` (candidates × tasks
    matrix, null where not evaluated), `verdicts` (one string per candidate, a
    letter p/b/f/- per task), `front` (`members`, `leaders` task → indices),
    `rejected` (every rejected proposal's metric calls, parent and minibatch
    score sums: the score chart's faint marks), the stream tails `proposals`,
    `trials`, `errors`, and `limits` (how the
    page clips stream text, so live events look like replayed ones). Two
    queries for the rows plus four for the streams, whatever the run's size.
    """
    candidates = list(
        Candidate.objects.filter(run=run)
        .order_by("index")
        .values_list(
            "pk", "index", "parents", "origin", "iteration", "metric_calls", "val_score", "objective_scores", "on_front", "components",
            "cost",
        )
    )
    pk_to_index = {row[0]: row[1] for row in candidates}
    evaluations = Evaluation.objects.filter(candidate__run=run, split=Split.VAL).values_list(
        "candidate_id", "task_key", "score", "verdict", "tokens_in", "tokens_out", "latency_ms"
    )
    by_candidate: dict[int, dict[str, tuple]] = defaultdict(dict)
    for candidate_id, task_key, *values in evaluations.iterator(chunk_size=5000):
        by_candidate[pk_to_index[candidate_id]][task_key] = values

    seen = {key for per_task in by_candidate.values() for key in per_task}
    tasks = _val_task_keys(run, seen)
    verifier_ids = [spec.get("id", "") for spec in run.verifier_specs or []]

    rows, matrix, verdicts = [], [], []
    for _, index, parents, origin, iteration, metric_calls, val_score, objective, on_front, components, cost in candidates:
        per_task = by_candidate.get(index, {})
        matrix.append([round(per_task[k][0], 3) if k in per_task else None for k in tasks])
        verdicts.append("".join(VERDICT_LETTERS.get(per_task[k][1], "-") if k in per_task else "-" for k in tasks))
        # As the recorder's candidate.new: means over the tasks the model answered.
        answered = [v for v in per_task.values() if v[2] or v[3]]
        n = len(answered) or 1
        preview = "\n\n".join(f"[{name}]\n{text}" for name, text in (components or {}).items())
        rows.append(
            {
                "index": index,
                "parents": parents or [],
                "origin": origin,
                "iteration": iteration,
                "metric_calls": metric_calls,
                "val_score": val_score,
                "objective_scores": objective or {},
                "on_front": on_front,
                "prompt_tokens": round(sum(v[2] for v in answered) / n),
                "mean_output_tokens": round(sum(v[3] for v in answered) / n, 1),
                "mean_latency_ms": round(sum(v[4] for v in answered) / n, 1),
                "preview": _clip(preview, HOVER_PREVIEW_CHARS),
                "cost": cost,
            }
        )

    leaders = {}
    for column, key in enumerate(tasks):
        column_scores = [(row[column], rows[i]["index"]) for i, row in enumerate(matrix) if row[column] is not None]
        if column_scores:
            top = max(score for score, _ in column_scores)
            leaders[key] = [index for score, index in column_scores if score == top]
    return {
        "run": run_summary(run),
        "verifiers": verifier_ids,
        "tasks": tasks,
        "candidates": rows,
        "scores": matrix,
        "verdicts": verdicts,
        "front": {"members": [r["index"] for r in rows if r["on_front"]], "leaders": leaders},
        "limits": {
            "text": STREAM_TEXT_CHARS, "reasons": REASONS_SHOWN, "preview": HOVER_PREVIEW_CHARS,
            # how many items each stream keeps, live as after a reload
            "proposals": PROPOSALS_TAIL, "trials": TRIAL_ITEMS_TAIL, "errors": ERRORS_TAIL,
        },
        **_stream_tails(run),
    }


def candidate_detail(run: Run, index: int) -> dict | None:
    """One candidate: components, parents and children, its place on the front
    (the tasks it leads) and every val evaluation with its check breakdown."""
    candidate = Candidate.objects.filter(run=run, index=index).first()
    if candidate is None:
        return None
    evaluations = list(candidate.evaluations.order_by("split", "task_key"))
    children = list(
        Candidate.objects.filter(run=run, index__gt=index).order_by("index").values_list("index", "parents")
    )
    best_per_task = _best_scores(run, {e.task_key for e in evaluations if e.split == Split.VAL})
    leads = [e.task_key for e in evaluations if e.split == Split.VAL and e.score >= best_per_task.get(e.task_key, 2)]
    return {
        "candidate": candidate,
        "evaluations": evaluations,
        "children": [i for i, parents in children if index in (parents or [])],
        "leads": leads,
        "val_count": sum(1 for e in evaluations if e.split == Split.VAL),
        "cost_label": format_cost(candidate.cost, run_pricing(run.config)),
        "usage_roles": [(role, u) for role, u in (candidate.usage or {}).items() if role != "total" and u.get("calls")],
    }


def _best_scores(run: Run, task_keys: set[str]) -> dict[str, float]:
    return dict(
        Evaluation.objects.filter(candidate__run=run, split=Split.VAL, task_key__in=task_keys)
        .values("task_key")
        .annotate(top=Max("score"))
        .values_list("task_key", "top")
    )


def launch_form_choices(*, user) -> dict:
    """What the launch form offers: usable task sets (with sizes), verifiers and endpoints."""
    return {
        "task_sets": TaskSet.objects.visible_to(user).select_related("owner").annotate(task_count=Count("tasks")),
        "verifiers": Verifier.objects.visible_to(user).only("slug", "name"),
        "endpoints": ModelEndpoint.objects.all(),
    }


def _lm_label(lm: dict | str) -> dict:
    if lm_is_simulator(lm):
        return {"label": DEMO_MODEL_LABEL, "is_simulator": True}
    if isinstance(lm, str):  # a model name never resolved (an imported run's config)
        return {"label": lm, "is_simulator": False}
    return {"label": (lm or {}).get("model") or (lm or {}).get("endpoint") or "–", "is_simulator": False}


def run_explainer(run: Run) -> dict:
    """What the run page's header card says the run is: the seed prompt, the best
    prompt so far (index and full text), the verifiers with their weights, the
    aggregator and verdict thresholds, and the task and reflection models."""
    config = run.config or {}
    seed = Candidate.objects.filter(run=run, index=0).values_list("components", flat=True).first()
    best = run.best_candidate if run.best_candidate_id else None
    thresholds = config.get("thresholds") or {}
    aggregator = config.get("aggregator", "weighted_average")
    return {
        "seed_components": seed if seed is not None else (config.get("seed_components") or {}),
        "best": {"index": best.index, "components": best.components, "val_score": best.val_score} if best else None,
        "verifiers": [
            {"id": spec.get("id", ""), "name": spec.get("name") or spec.get("id", ""), "weight": spec.get("weight", 1),
             "required": bool(spec.get("required"))}
            for spec in run.verifier_specs or []
        ],
        "aggregator": aggregator if isinstance(aggregator, str) else aggregator.get("type", "custom"),
        "thresholds": {"pass": thresholds.get("pass", 0.8), "borderline": thresholds.get("borderline", 0.6)},
        "task_lm": _lm_label(config.get("task_lm") or {}),
        "reflection_lm": _lm_label(config.get("reflection_lm") or {}),
    }


def run_family(run: Run, *, user) -> dict:
    """The run it was forked from (and from which candidate) and the runs forked
    from it, as far as the user may see them."""
    visible = Run.objects.visible_to(user)
    parent = visible.filter(pk=run.forked_from_id).first() if run.forked_from_id else None
    return {
        "parent": parent,
        "parent_candidate": run.forked_from_candidate,
        "forks": list(visible.filter(forked_from=run).order_by("created_at").values("pk", "name", "forked_from_candidate")),
    }
