"""Read paths of the run pages: the run page's JSON snapshot, its header card
and family, the candidate page and the launch form's choices (the run read
model itself, list rows included, is optimizer.runs.summary.run_summary).

The snapshot is everything the run page draws, built from the database alone
(Run, Candidate, Evaluation rows and the tail of the event log), so a finished
run renders exactly like a live one; the websocket then only appends events
after `last_seq`. It stays small at scale (300 candidates × 100 val tasks is
well under 2 MB): per-task scores travel as one matrix of rounded numbers,
verdicts as one letter per task, prompts as short previews, and the streams
as bounded tails.
"""

from __future__ import annotations

import gc
import json
from contextlib import contextmanager
from typing import overload

from django.db.models import Count, F, FloatField, Func, IntegerField, TextField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from dashboard import judgments
from optimizer.config import DEMO_MODEL_LABEL, lm_is_simulator
from optimizer.models import (
    EXTERNAL_OBSERVE_ONLY,
    Candidate,
    Evaluation,
    ModelEndpoint,
    Origin,
    RejectedProposal,
    Run,
    RunEvent,
    RunStatus,
)
from optimizer.reviewer_notes import notes_refusal, run_notes
from optimizer.runs import event_types as ev
from optimizer.runs.budget import format_cost, run_pricing
from optimizer.runs.injections import run_valset_size
from optimizer.runs.summary import run_summary
from optimizer.tasksets.models import Split, TaskSet
from optimizer.val_summary import fill_val_summaries
from verifiers_app.models import Verifier

HOVER_PREVIEW_CHARS = 200
STREAM_TEXT_CHARS = 600
PROPOSALS_TAIL = 60
TRIAL_ITEMS_TAIL = 120
TRIALS_FIRST_PAGE = 4
REASONS_SHOWN = 5
ERRORS_TAIL = 50
VERDICT_ORDER = ("pass", "borderline", "fail")
# The heatmap of a run of up to HEATMAP_ROWS candidates shows them all; a bigger
# one the front, the seed, the best and the top HEATMAP_TOP (the rest on demand,
# SCORES_PAGE rows at a time).
HEATMAP_ROWS = 120
HEATMAP_TOP = 50
SCORES_PAGE = 500
# The candidates table of a bigger run starts with its first TABLE_ROWS rows ("Show more" adds as many).
TABLE_ROWS = 500
SUMMARY_PATHS = (
    ("prompt_tokens", IntegerField),
    ("mean_output_tokens", FloatField),
    ("mean_latency_ms", FloatField),
    ("verdicts__pass", IntegerField),
    ("verdicts__borderline", IntegerField),
    ("verdicts__fail", IntegerField),
)
CANDIDATE_COLUMNS = (
    "index",
    "parents",
    "origin",
    "iteration",
    "metric_calls",
    "val_score",
    "objective_scores",
    "on_front",
    "prompt_tokens",
    "mean_output_tokens",
    "mean_latency_ms",
    "verdict_counts",
    "preview",
    "cost",
    "author",
)


@contextmanager
def collector_paused():
    """Python's cyclic garbage collector off while a big read model is built and
    encoded: a 10,000-candidate snapshot allocates some 100,000 small lists,
    dicts and tuples (none in a reference cycle: reference counting frees them
    all), and the collector ran some 150 times per build, its full passes over
    the whole process taking ~65 ms of ~240 (bench/scale.py, docs/benchmarks.md).
    Turned back on only by whoever turned it off (another thread's build may
    overlap; then it collects sooner)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


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
    # Users' edited candidates (candidate.injected) share the proposals stream: one query.
    streamed = list(
        events.filter(type__in=(ev.PROPOSAL, ev.CANDIDATE_INJECTED))
        .order_by("-seq")
        .values_list("seq", "type", "payload")[: 2 * PROPOSALS_TAIL]
    )
    proposals = [(s, p) for s, t, p in streamed if t == ev.PROPOSAL][:PROPOSALS_TAIL]
    injected = [(s, p) for s, t, p in streamed if t == ev.CANDIDATE_INJECTED][:PROPOSALS_TAIL]
    errors = list(
        events.filter(type=ev.ERROR).order_by("-seq").values_list("seq", "payload")[:ERRORS_TAIL]
    )
    trials: list[dict] = []
    # Pages of the newest trials events, each page older and larger than the last
    # (TRIALS_FIRST_PAGE, then 4x, up to TRIAL_ITEMS_TAIL): an event usually holds
    # an item or more (up to optimizer.runs.recorder.MAX_TRIAL_ITEMS when a fast
    # run's minibatches were written together), so the tail is read from a few
    # events, never the whole log.
    older = events.filter(type=ev.TRIALS).order_by("-seq")
    size = TRIALS_FIRST_PAGE
    while True:
        page = list(older.values_list("seq", "payload")[:size])
        for seq, payload in page:
            for item in reversed(payload.get("items", [])):
                trials.append(
                    dict(
                        _clip_trial_item(item),
                        candidate=payload.get("candidate"),
                        split=payload.get("split"),
                        seq=seq,
                    )
                )
            if len(trials) >= TRIAL_ITEMS_TAIL:
                break
        if len(trials) >= TRIAL_ITEMS_TAIL or len(page) < size:
            break
        older = older.filter(seq__lt=page[-1][0])
        size = min(4 * size, TRIAL_ITEMS_TAIL)
    # Every rejected proposal is a faint mark on the score chart, not only those in
    # the tail: a reload must draw what the live page drew. Their numbers were stored
    # apart when the proposals were written: narrow rows, no payload to unpack.
    names = ("metric_calls", "parent", "before", "after", "minibatch_size")
    rejected = (
        RejectedProposal.objects.filter(run=run, seq__lte=run.last_seq)
        .order_by("seq")
        .values_list(*names)
    )
    columns = dict(
        zip(names, (list(values) for values in zip(*rejected)))
    )  # rows → columns in one pass
    columns = {name: columns.get(name, []) for name in names}
    return {
        "rejected": columns,
        "proposals": [dict(_clip_proposal(p), seq=s) for s, p in reversed(proposals)],
        "trials": list(reversed(trials[:TRIAL_ITEMS_TAIL])),
        "errors": [dict(p, seq=s) for s, p in reversed(errors)],
        "injections": [dict(p, seq=s) for s, p in reversed(injected)],
    }


class SqlCast(Cast):
    """A Cast whose value the database already returns in the Python type (an int
    or a float, or None): without Django's per-value converter, 60,000 calls a
    10,000-candidate snapshot."""

    @property
    def convert_value(self):
        # Django's own no-op, which get_db_converters skips by identity; django-stubs leaves it out.
        return self._convert_value_noop  # type: ignore[attr-defined]


class JsonText(Func):
    """A JSON column as its text, which Django hands over undecoded (see _json_column)."""

    output_field = TextField()

    def __init__(self, field: str):
        super().__init__(F(field))

    def as_sql(
        self, compiler, connection, function=None, template=None, arg_joiner=None, **extra
    ):  # SQLite keeps JSON as text
        return compiler.compile(self.source_expressions[0])

    def as_postgresql(self, compiler, connection, **extra):
        column, params = compiler.compile(self.source_expressions[0])
        return f"({column})::text", params


def _json_column(texts: list[str | None]) -> list:
    """JSON texts decoded in one json.loads: a call per value costs more than the
    parsing on a 10,000-candidate run. SQL NULL decodes as None."""
    return json.loads("[" + ",".join("null" if text is None else text for text in texts) + "]")


def _clip_proposal(payload: dict) -> dict:
    return dict(
        payload,
        texts={
            name: _clip(text, STREAM_TEXT_CHARS)
            for name, text in (payload.get("texts") or {}).items()
        },
        reasoning=_clip(payload.get("reasoning", ""), STREAM_TEXT_CHARS),
    )


def _clip_trial_item(item: dict) -> dict:
    return dict(
        item,
        output=_clip(item.get("output", ""), STREAM_TEXT_CHARS),
        reasons=list(item.get("reasons") or [])[:REASONS_SHOWN],
    )


def run_snapshot(run: Run) -> dict:
    """Everything the run page draws first, from the database alone.

    Shape: `run` (run_summary), `verifiers` (ids), `tasks` (val task keys: the
    heatmap's columns), `candidates` (columns of CANDIDATE_COLUMNS, one entry
    per candidate by index: lineage, scores, verdict counts, size/latency
    metrics; columns keep the keys out of a 10,000-row body), `rows` (the
    candidates whose per-task scores come along: the heatmap's rows),
    `scores` (rows × tasks matrix, rounded, null where not evaluated),
    `front` (`members`, `leaders` task → indices among `rows`), `rejected`
    (columns: every rejected proposal's metric calls, parent, minibatch score
    sums and size: the score chart's faint marks), the stream tails `proposals`, `trials`,
    `errors`, and `limits` (how the page clips stream text, so live events
    look like replayed ones).

    It reads what the recorder stored on each candidate (optimizer/val_summary.py),
    never the run's Evaluation rows, and stays small at any size: a run of up to
    HEATMAP_ROWS candidates sends every row; a bigger one the front members, the
    seed, the best and the top HEATMAP_TOP by val score, and the page asks
    `scores.json` for the rest on demand. Every task's top score is held by a
    front member (a candidate that dominates a top scorer scores the top too),
    so the tops, and the front the page recomputes from these rows, are exact.
    A fixed handful of queries whatever the run's size.
    """
    # Read as columns, the JSON ones as text decoded in one json.loads per column and the
    # summary's numbers cast in SQL: 10,000 candidates, no per-value JSON decoding here.
    values = (
        Candidate.objects.filter(run=run)
        .order_by("index")
        .values_list(
            "pk",
            "index",
            JsonText("parents"),
            "origin",
            "iteration",
            "metric_calls",
            "val_score",
            JsonText("objective_scores"),
            "on_front",
            "cost",
            "author__username",
            *(SqlCast(KT(f"val_summary__{path}"), field()) for path, field in SUMMARY_PATHS),
        )
    )
    columns = [list(column) for column in zip(*values)] or [
        [] for _ in range(11 + len(SUMMARY_PATHS))
    ]
    (
        pks,
        indices,
        parents,
        origins,
        iterations,
        metric_calls,
        val_scores,
        objectives,
        on_front,
        costs,
        authors,
    ) = columns[:11]
    summaries = columns[
        11:
    ]  # prompt_tokens, mean_output_tokens, mean_latency_ms, pass, borderline, fail
    unsummarised = [pk for pk, tokens in zip(pks, summaries[0]) if tokens is None]
    if (
        unsummarised
    ):  # recorded by a writer that stores no summary (an old import): once, then stored
        filled = fill_val_summaries(unsummarised)
        for position, pk in enumerate(pks):
            if pk in filled:
                summary = filled[pk]
                for column, value in zip(
                    summaries,
                    (
                        summary["prompt_tokens"],
                        summary["mean_output_tokens"],
                        summary["mean_latency_ms"],
                        *(summary["verdicts"].get(v, 0) for v in VERDICT_ORDER),
                    ),
                ):
                    column[position] = value
    rows = _heatmap_rows(run, pks, indices, val_scores, on_front)
    detail = Candidate.objects.filter(run=run)
    if len(rows) < len(indices):
        detail = detail.filter(index__in=rows)
    vectors = {
        index: (scores or {}, components)
        for index, scores, components in detail.values_list(
            "index", "val_task_scores", "components"
        )
    }
    tasks = _val_task_keys(run, {key for scores, _ in vectors.values() for key in scores})
    verifier_ids = [spec.get("id", "") for spec in run.verifier_specs or []]

    previews = [""] * len(
        indices
    )  # the heatmap rows' hover previews; the page fetches the others' with their scores
    for position, index in enumerate(indices):
        if index in vectors:
            components = vectors[index][1] or {}
            previews[position] = _clip(
                "\n\n".join(f"[{name}]\n{text}" for name, text in components.items()),
                HOVER_PREVIEW_CHARS,
            )
    out = dict(
        zip(
            CANDIDATE_COLUMNS,
            (
                indices,
                [p or [] for p in _json_column(parents)],
                origins,
                iterations,
                metric_calls,
                val_scores,
                [o or {} for o in _json_column(objectives)],
                on_front,
                # As the recorder's candidate.new: means over the tasks the model answered.
                summaries[0],
                summaries[1],
                summaries[2],
                [list(counts) for counts in zip(*summaries[3:])],
                previews,
                costs,
                # origin human: who wrote it ("" once the user is deleted); null for the engine's.
                [
                    (author or "") if origin == Origin.HUMAN else None
                    for author, origin in zip(authors, origins, strict=True)
                ],
            ),
            strict=True,
        )
    )
    matrix = [[_round_score(vectors[index][0].get(key)) for key in tasks] for index in rows]
    leaders = {}
    for key, task_scores in zip(tasks, zip(*matrix)):  # one column per task, in one transposition
        known = [score for score in task_scores if score is not None]
        if known:
            top = max(known)
            leaders[key] = [index for index, score in zip(rows, task_scores) if score == top]
    return {
        "run": run_summary(run),
        "verifiers": verifier_ids,
        "tasks": tasks,
        "candidates": out,
        "rows": rows,
        "scores": matrix,
        "front": {
            "members": [index for index, member in zip(indices, on_front) if member],
            "leaders": leaders,
        },
        # What decides a task's verdict and each verifier's passed (the trials stream says both).
        "judging": {
            "thresholds": judgments.run_thresholds(run),
            "pass_thresholds": judgments.pass_thresholds(run),
        },
        "limits": {
            "text": STREAM_TEXT_CHARS,
            "reasons": REASONS_SHOWN,
            "preview": HOVER_PREVIEW_CHARS,
            # how many items each stream keeps, live as after a reload
            "proposals": PROPOSALS_TAIL,
            "trials": TRIAL_ITEMS_TAIL,
            "errors": ERRORS_TAIL,
            "scores_page": SCORES_PAGE,
            "table_rows": TABLE_ROWS,
        },
        **_stream_tails(run),
        # What GEPA's reflection reads beside the verifiers' feedback (live: note.* events).
        "reviewer_notes": run_notes(run),
        "notes_refusal": notes_refusal(run),
    }


@overload
def _round_score(score: float) -> float: ...


@overload
def _round_score(score: float | None) -> float | None: ...


def _round_score(score: float | None) -> float | None:
    return None if score is None else round(score, 3)


def _heatmap_rows(
    run: Run, pks: list[int], indices: list[int], val_scores: list, on_front: list[bool]
) -> list[int]:
    """The candidates whose per-task scores the snapshot carries, ascending:
    all of a run of up to HEATMAP_ROWS, else the front, the seed, the best and
    the top HEATMAP_TOP by val score (ties: the earlier candidate)."""
    if len(indices) <= HEATMAP_ROWS:
        return list(indices)
    chosen = {index for index, member in zip(indices, on_front) if member}
    chosen.add(indices[0])
    if run.best_candidate_id:
        chosen.update(index for pk, index in zip(pks, indices) if pk == run.best_candidate_id)
    ranked = sorted(
        ((score, index) for score, index in zip(val_scores, indices) if score is not None),
        key=lambda pair: (-pair[0], pair[1]),
    )
    chosen.update(index for _, index in ranked[:HEATMAP_TOP])
    return sorted(chosen)


def run_scores_page(run: Run, *, after: int, limit: int) -> dict:
    """The per-task scores of the next `limit` candidates after index `after`
    (the run page's "more rows" of the heatmap), with their hover previews."""
    detail = list(
        Candidate.objects.filter(run=run, index__gt=after)
        .order_by("index")
        .values_list("index", "val_task_scores", "components")[:limit]
    )
    tasks = _val_task_keys(run, {key for _, scores, _ in detail for key in scores or {}})
    return {
        "tasks": tasks,
        "rows": [index for index, _, _ in detail],
        "scores": [
            [_round_score((scores or {}).get(key)) for key in tasks] for _, scores, _ in detail
        ],
        "previews": [
            _clip(
                "\n\n".join(f"[{name}]\n{text}" for name, text in (components or {}).items()),
                HOVER_PREVIEW_CHARS,
            )
            for _, _, components in detail
        ],
        "more": len(detail) == limit
        and Candidate.objects.filter(run=run, index__gt=detail[-1][0]).exists(),
    }


def candidate_detail(run: Run, index: int) -> dict | None:
    """One candidate: components, parents and children, its place on the front
    (the tasks it leads) and every evaluation with its check breakdown. A fixed
    number of queries whatever the run's size: the tops it is measured against
    are the front members' stored scores, never the run's Evaluation rows."""
    candidate = Candidate.objects.filter(run=run, index=index).first()
    if candidate is None:
        return None
    evaluations = list(candidate.evaluations.order_by("split", "task_key"))
    children = list(
        Candidate.objects.filter(run=run, index__gt=index)
        .order_by("index")
        .values_list("index", "parents")
    )
    tops = _task_tops(run)
    # Compared at the precision the run page's heatmap shows (its ○ leaders).
    leads = [
        e.task_key
        for e in evaluations
        if e.split == Split.VAL and e.task_key in tops and _round_score(e.score) >= tops[e.task_key]
    ]
    lead_keys = set(leads)
    judging = _Judging(run)
    return {
        "candidate": candidate,
        "evaluations": evaluations,
        # The table's cells, formatted here: 300 rows through the template's filters took most of the page's time.
        "rows": [
            _evaluation_row(e, e.split == Split.VAL and e.task_key in lead_keys, judging)
            for e in evaluations
        ],
        "verdict_rule": judgments.thresholds_text(judging.thresholds),
        "children": [i for i, parents in children if index in (parents or [])],
        "leads": leads,
        "val_count": sum(1 for e in evaluations if e.split == Split.VAL),
        "cost_label": format_cost(candidate.cost, run_pricing(run.config, run.external)),
        "usage_roles": [
            (role, u)
            for role, u in (candidate.usage or {}).items()
            if role != "total" and u.get("calls")
        ],
    }


def injection_offer(run: Run, user) -> dict:
    """What the candidate page's "Edit and add to run" says: whether it is offered
    (a native run, to who steers it), why not, and what adding costs now."""
    if run.is_external:
        return {
            "offered": False,
            "why_not": EXTERNAL_OBSERVE_ONLY[:1].upper() + EXTERNAL_OBSERVE_ONLY[1:] + ".",
        }
    if not run.steerable_by(user):
        return {"offered": False, "why_not": ""}
    size = run_valset_size(run)
    left = max(0, run.budget_total - run.budget_used)
    return {
        "offered": True,
        "why_not": "",
        "cost": (
            f"Evaluating it on the {size} val tasks costs {size} metric call{'s' if size != 1 else ''}; "
            f"{left} left."
        ),
        "ended": run.imported or run.status not in RunStatus.steerable(),
    }


class _Judging:
    """What decides a run's two judgments: its verdict thresholds and each
    verifier's passThreshold (docs/verifier-semantics.md "Passed and verdict")."""

    def __init__(self, run: Run) -> None:
        self.thresholds = judgments.run_thresholds(run)
        self.pass_thresholds = judgments.pass_thresholds(run)
        self.row_pass_thresholds = judgments.row_pass_thresholds(run)


def _evaluation_row(e: Evaluation, leads: bool, judging: _Judging) -> dict:
    checks = [
        {
            "css": "skipped"
            if c.get("skipped")
            else "hit"
            if (c.get("score") or 0) >= 1
            else "miss",
            "name": f"{v.get('id', '')}/{c.get('id', '')}",
            "score": _fixed(c.get("score"), 2),
            "reason": c.get("reason") or "",
        }
        for v in (e.result or {}).get("verifiers") or []
        if isinstance(v, dict)
        for c in v.get("checks") or []
        if isinstance(c, dict)
    ]
    output = e.output or ""
    return {
        "task_key": e.task_key,
        "split": e.split,
        "score": _fixed(e.score, 3),
        "verdict": e.verdict,
        "verdict_why": judgments.verdict_why(e.score, e.verdict, judging.thresholds),
        "verifiers_passed": judgments.verifier_judgments(
            e.result, judging.pass_thresholds, judging.row_pass_thresholds.get(e.task_key)
        ),
        "leads": leads,
        "checks": checks,
        "has_verifiers": bool((e.result or {}).get("verifiers")),
        "feedback": e.feedback,
        "tokens": f"{e.tokens_in} / {e.tokens_out}",
        "judge": f"judge {e.judge_tokens_in} / {e.judge_tokens_out}"
        if e.judge_tokens_in or e.judge_tokens_out
        else "",
        "output": output,
        "output_short": _clip(output, 80),
    }


def _fixed(value, digits: int) -> str:
    try:
        return f"{float(value):.{digits}f}"
    except (TypeError, ValueError):
        return ""


def _task_tops(run: Run) -> dict[str, float]:
    """Each val task's top score (rounded as the heatmap shows it). A front member
    holds every task's top (see run_snapshot), so the members' stored scores suffice."""
    tops: dict[str, float] = {}
    for scores in Candidate.objects.filter(run=run, on_front=True).values_list(
        "val_task_scores", flat=True
    ):
        for key, score in (scores or {}).items():
            rounded = _round_score(score)
            if rounded > tops.get(key, -1.0):
                tops[key] = rounded
    return tops


def launch_form_choices(*, user) -> dict:
    """What the launch form offers: usable task sets (with sizes), verifiers and endpoints."""
    return {
        "task_sets": TaskSet.objects.visible_to(user)
        .select_related("owner")
        .annotate(task_count=Count("tasks")),
        "verifiers": Verifier.objects.visible_to(user).only("slug", "name"),
        "endpoints": ModelEndpoint.objects.all(),
    }


def _lm_label(lm: dict | str) -> dict:
    if lm_is_simulator(lm):
        return {"label": DEMO_MODEL_LABEL, "is_simulator": True}
    if isinstance(lm, str):  # a model name never resolved (an imported run's config)
        return {"label": lm, "is_simulator": False}
    return {
        "label": (lm or {}).get("model") or (lm or {}).get("endpoint") or "–",
        "is_simulator": False,
    }


def run_explainer(run: Run) -> dict:
    """What the run page's header card says the run is: the seed prompt, the best
    prompt so far (index and full text), the verifiers with their weights, the
    aggregator and verdict thresholds, and the task and reflection models."""
    config = run.config or {}
    seed = Candidate.objects.filter(run=run, index=0).values_list("components", flat=True).first()
    best = run.best_candidate if run.best_candidate_id else None
    aggregator = config.get("aggregator", "weighted_average")
    return {
        "seed_components": seed if seed is not None else (config.get("seed_components") or {}),
        "best": {"index": best.index, "components": best.components, "val_score": best.val_score}
        if best
        else None,
        "verifiers": [
            {
                "id": spec.get("id", ""),
                "name": spec.get("name") or spec.get("id", ""),
                "weight": spec.get("weight", 1),
                "required": bool(spec.get("required")),
                "pass_threshold": judgments.threshold_text(float(spec.get("passThreshold", 1.0))),
            }
            for spec in run.verifier_specs or []
        ],
        "aggregator": aggregator
        if isinstance(aggregator, str)
        else aggregator.get("type", "custom"),
        "thresholds": judgments.run_thresholds(run),
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
        "forks": list(
            visible.filter(forked_from=run)
            .order_by("created_at")
            .values("pk", "name", "forked_from_candidate")
        ),
    }
