"""Read paths for comparing candidates and runs.

Everything here reads rows the runner (or an import) wrote; nothing writes.
Bad query parameters raise `CompareError` with a sentence naming the parameter.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field

import plotly.graph_objects as go
from django.core.paginator import Page, Paginator
from django.db.models import Q

from dashboard import judgments
from dashboard.lib.storable import without_nul
from optimizer.confidence import Lift, lift_of_pairs, paired_lift
from optimizer.models import Candidate, Evaluation, Run
from optimizer.promotion import (
    LIFT_SPLITS,
    best_candidate,
    seed_candidate,
    split_scores,
)
from optimizer.textdiff import LineageNode, sentence_origins, word_diff

MAX_COMPARED = 8
PAGE_SIZE = 50
VERDICTS = ("fail", "borderline", "pass")
SPLITS = ("val", "holdout", "train")
EPSILON = 1e-9
MAX_INDEX = 2**31 - 1


class CompareError(ValueError):
    """A query parameter the compare pages cannot use; the message names it."""


# ---------------------------------------------------------------- candidates


def compare_candidates(run: Run, raw_indices: list[str]) -> list[Candidate]:
    """The chosen candidates of a run, in the order given, without duplicates."""
    indices: list[int] = []
    for raw in raw_indices:
        try:
            index = int(raw)
        except ValueError:
            raise CompareError(f"c: {raw!r} is not a candidate index.") from None
        if not 0 <= index <= MAX_INDEX:  # beyond the integer column: the database would raise
            raise CompareError(f"c: {raw!r} is not a candidate index.")
        if index not in indices:
            indices.append(index)
    if len(indices) < 2:
        raise CompareError("c: choose at least two candidates to compare.")
    if len(indices) > MAX_COMPARED:
        raise CompareError(f"c: compare at most {MAX_COMPARED} candidates at a time.")
    found = {c.index: c for c in run.candidates.filter(index__in=indices)}
    missing = [i for i in indices if i not in found]
    if missing:
        raise CompareError(f"c: run {run.pk} has no candidate {missing[0]}.")
    return [found[i] for i in indices]


@dataclass
class ComponentDiff:
    name: str
    text: str
    ops: list[tuple[str, str]] | None  # None: nothing to diff against


@dataclass
class CandidateDiff:
    candidate: Candidate
    reference: Candidate | None
    components: list[ComponentDiff]
    cost_label: str = (
        ""  # what finding the candidate cost, as the page writes money (set by the view)
    )


def component_diffs(run: Run, candidates: list[Candidate], diff: str) -> list[CandidateDiff]:
    """Each candidate's components with a word diff against its first parent
    (`parent`), the seed (`seed`) or one fixed candidate (an index)."""
    fixed: Candidate | None = None
    if diff not in ("parent", "seed"):
        try:
            fixed = run.candidates.get(index=int(diff))
        except (ValueError, Candidate.DoesNotExist):
            raise CompareError(
                f"diff: {diff!r} is not 'parent', 'seed' or a candidate index of this run."
            ) from None
    elif diff == "seed":
        fixed = seed_candidate(run)
    parent_indices = {c.parents[0] for c in candidates if c.parents}
    parents = {c.index: c for c in run.candidates.filter(index__in=parent_indices)}
    out = []
    for cand in candidates:
        ref = (
            (parents.get(cand.parents[0]) if cand.parents else None) if diff == "parent" else fixed
        )
        if ref is not None and ref.pk == cand.pk:
            ref = None
        out.append(CandidateDiff(cand, ref, prompt_diff(ref, cand)))
    return out


def prompt_diff(old: Candidate | None, new: Candidate) -> list[ComponentDiff]:
    """`new`'s components (and any only `old` has) with word diffs from `old`."""
    theirs = old.components if old else {}
    names = list(new.components) + [n for n in theirs if n not in new.components]
    return [
        ComponentDiff(
            name,
            new.components.get(name, ""),
            word_diff(theirs.get(name, ""), new.components.get(name, "")) if old else None,
        )
        for name in names
    ]


# ---------------------------------------------------------------- per-task table


@dataclass
class Cell:
    index: int
    score: float
    verdict: str
    delta: float | None  # against the baseline; None for the baseline itself

    @property
    def change(self) -> str:
        if self.delta is None or abs(self.delta) <= EPSILON:
            return ""
        return "improved" if self.delta > 0 else "regressed"


@dataclass
class TaskRow:
    task_key: str
    cells: list[Cell | None]

    @property
    def scored(self) -> list[Cell]:
        return [c for c in self.cells if c is not None]

    @property
    def differs(self) -> bool:
        scores = [c.score for c in self.scored]
        return len(scores) < len(self.cells) or max(scores) - min(scores) > EPSILON

    @property
    def worst_delta(self) -> float:
        deltas = [c.delta for c in self.scored if c.delta is not None]
        return min(deltas) if deltas else 0.0


@dataclass
class TaskFilters:
    split: str = "val"
    baseline: int | None = None
    only: str = ""
    verdict: str = ""
    q: str = ""
    sort: str = ""
    page: str = "1"

    @classmethod
    def from_query(cls, query, candidates: list[Candidate]) -> TaskFilters:
        f = cls(
            split=query.get("split", "val"),
            only=query.get("only", ""),
            verdict=query.get("verdict", ""),
            q=without_nul(query.get("q", "")).strip()[:200],
            sort=query.get("sort", ""),
            page=query.get("page", "1"),
        )
        if f.split not in SPLITS:
            raise CompareError(f"split: must be one of {', '.join(SPLITS)}.")
        if f.only not in ("", "diff", "fail"):
            raise CompareError("only: must be 'diff' or 'fail'.")
        if f.verdict not in ("", *VERDICTS):
            raise CompareError(f"verdict: must be one of {', '.join(VERDICTS)}.")
        if f.sort not in ("", "regression"):
            raise CompareError("sort: must be 'regression'.")
        raw = query.get("baseline")
        indices = [c.index for c in candidates]
        if raw in (None, ""):
            f.baseline = indices[0]
        else:
            try:
                f.baseline = int(raw)
            except ValueError:
                raise CompareError(f"baseline: {raw!r} is not a candidate index.") from None
            if f.baseline not in indices:
                raise CompareError(
                    f"baseline: candidate {f.baseline} is not one of the compared candidates."
                )
        return f


@dataclass
class CandidateSummary:
    index: int
    mean: float | None
    improved: int = 0
    regressed: int = 0


@dataclass
class TaskTable:
    filters: TaskFilters
    indices: list[int]
    page: Page
    total: int
    summaries: list[CandidateSummary] = field(default_factory=list)


def task_table(
    run: Run,
    candidates: list[Candidate],
    filters: TaskFilters,
    val_scores: dict[int, dict[str, float]] | None = None,
) -> TaskTable:
    """One row per task of the split: each candidate's score and verdict and its
    delta against the baseline, filtered, sorted and paginated server-side.
    With `val_scores` (a re-scoring's per-task scores by candidate index), the val
    split's scores are those, and a candidate or task it has no score for is not
    scored; the verdicts stay the recorded ones."""
    indices = [c.index for c in candidates]
    position = {c.pk: i for i, c in enumerate(candidates)}
    rescored = val_scores if filters.split == "val" else None
    evals = Evaluation.objects.filter(candidate__in=candidates, split=filters.split).order_by()
    by_task: dict[str, list[Cell | None]] = {}
    for cand_id, key, score, verdict in evals.values_list(
        "candidate_id", "task_key", "score", "verdict"
    ):
        index = indices[position[cand_id]]
        cells = by_task.setdefault(key, [None] * len(candidates))
        shown = score if rescored is None else rescored.get(index, {}).get(key)
        if shown is not None:
            cells[position[cand_id]] = Cell(index, shown, verdict, None)
    # No baseline chosen: the first candidate, as TaskFilters.from_query chooses.
    base = indices.index(filters.baseline if filters.baseline is not None else indices[0])
    summaries = [CandidateSummary(i, None) for i in indices]
    totals = [[0.0, 0] for _ in indices]
    rows = []
    for key in sorted(by_task):
        cells = by_task[key]
        base_cell = cells[base]
        for i, cell in enumerate(cells):
            if cell is None:
                continue
            totals[i][0] += cell.score
            totals[i][1] += 1
            if i != base and base_cell is not None:
                cell.delta = cell.score - base_cell.score
                if cell.delta > EPSILON:
                    summaries[i].improved += 1
                elif cell.delta < -EPSILON:
                    summaries[i].regressed += 1
        rows.append(TaskRow(key, cells))
    for summary, (total, n) in zip(summaries, totals):
        summary.mean = total / n if n else None

    if filters.only == "diff":
        rows = [r for r in rows if r.differs]
    elif filters.only == "fail":
        rows = [r for r in rows if any(c.verdict == "fail" for c in r.scored)]
    if filters.verdict:
        rows = [r for r in rows if any(c.verdict == filters.verdict for c in r.scored)]
    if filters.q:
        matching = _tasks_matching(run, candidates, filters.split, filters.q)
        rows = [r for r in rows if r.task_key in matching]
    if filters.sort == "regression":
        rows.sort(key=lambda r: r.worst_delta)  # stable: ties keep task order
    page = Paginator(rows, PAGE_SIZE).get_page(filters.page)
    return TaskTable(filters, indices, page, len(rows), summaries)


def _tasks_matching(run: Run, candidates: list[Candidate], split: str, q: str) -> set[str]:
    """Task keys whose key, input or any compared candidate's output contains `q`."""
    keys = set(
        Evaluation.objects.filter(candidate__in=candidates, split=split)
        .filter(Q(task_key__icontains=q) | Q(output__icontains=q))
        .values_list("task_key", flat=True)
    )
    needle = q.casefold()
    keys.update(
        str(row.get("task_id"))
        for row in run.tasks_snapshot
        if needle in str(row.get("input", "")).casefold()
    )
    return keys


def task_drilldown(
    run: Run, candidates: list[Candidate], task_key: str, split: str
) -> tuple[dict | None, list]:
    """The task row and, per candidate, its evaluation (output, checks, feedback)
    or None when that candidate was not scored on the task, and its two judgments
    with what decided each (`verdict_why`, `verifiers`: dashboard.judgments)."""
    if split not in SPLITS:
        raise CompareError(f"split: must be one of {', '.join(SPLITS)}.")
    if "\x00" in task_key:  # PostgreSQL refuses NUL in a query parameter
        raise CompareError("task: contains a NUL character.")
    evals = {
        e.candidate_id: e
        for e in Evaluation.objects.filter(candidate__in=candidates, split=split, task_key=task_key)
    }
    if not evals:
        raise CompareError(f"task: no compared candidate was scored on {task_key!r} ({split}).")
    task = next((row for row in run.tasks_snapshot if str(row.get("task_id")) == task_key), None)
    thresholds = judgments.run_thresholds(run)
    passes = judgments.pass_thresholds(run)
    row_pass = judgments.row_pass_thresholds(run).get(task_key)

    def judged(e: Evaluation | None) -> dict | None:
        if e is None:
            return None
        return {
            "verdict_why": judgments.verdict_why(e.score, e.verdict, thresholds),
            "verifiers": judgments.verifier_judgments(e.result, passes, row_pass),
        }

    return task, [(c, evals.get(c.pk), judged(evals.get(c.pk))) for c in candidates]


# ---------------------------------------------------------------- prompt history


@dataclass
class SentenceOrigin:
    text: str
    candidate: Candidate


def prompt_history(
    run: Run, candidate: Candidate
) -> tuple[list[Candidate], dict[str, list[SentenceOrigin]]]:
    """The candidate's ancestry (seed first) and, for each component, every
    sentence with the candidate (its iteration and reflection) that introduced it."""
    everyone = {
        c.index: c
        for c in run.candidates.only(
            "index",
            "parents",
            "components",
            "iteration",
            "origin",
            "reflection",
            "val_score",
            "run_id",
        )
    }
    nodes = {i: LineageNode(i, tuple(c.parents), c.components) for i, c in everyone.items()}
    history = {
        name: [
            SentenceOrigin(text, everyone[i])
            for text, i in sentence_origins(nodes, candidate.index, name)
        ]
        for name in candidate.components
    }
    ancestry: list[Candidate] = []
    current: Candidate | None = candidate
    while current is not None and current not in ancestry:
        ancestry.append(current)
        current = everyone.get(current.parents[0]) if current.parents else None
    return ancestry[::-1], history


# ---------------------------------------------------------------- lift


@dataclass
class LiftTable:
    split: str
    seed: Candidate
    best: Candidate
    counts: list[list[int]]  # [from verdict][to verdict], in VERDICTS order
    up: int
    down: int
    same: int
    lift: Lift  # best − seed score on this split's tasks, with its interval

    @property
    def rows(self) -> list[tuple[str, list[int]]]:
        return list(zip(VERDICTS, self.counts))


def lift_breakdown(run: Run) -> list[LiftTable]:
    """Seed → best verdict transitions per scored split (val, then holdout),
    each with the paired interval of the mean score difference."""
    seed, best = seed_candidate(run), best_candidate(run)
    if seed is None or best is None:
        return []
    tables = []
    for split in LIFT_SPLITS:
        scored: dict[str, dict[int, tuple[float, str]]] = {}
        for cand_id, key, score, verdict in Evaluation.objects.filter(
            candidate__in=[seed, best], split=split
        ).values_list("candidate_id", "task_key", "score", "verdict"):
            scored.setdefault(key, {})[cand_id] = (score, verdict)
        counts = [[0] * 3 for _ in VERDICTS]
        pairs: dict[str, tuple[float, float]] = {}
        for key, pair in scored.items():
            if seed.pk in pair and best.pk in pair:
                pairs[key] = (pair[seed.pk][0], pair[best.pk][0])
                before, after = pair[seed.pk][1], pair[best.pk][1]
                if before in VERDICTS and after in VERDICTS:
                    counts[VERDICTS.index(before)][VERDICTS.index(after)] += 1
        if any(map(any, counts)):
            up = sum(counts[i][j] for i in range(3) for j in range(3) if j > i)
            down = sum(counts[i][j] for i in range(3) for j in range(3) if j < i)
            lift = lift_of_pairs(pairs[k] for k in sorted(pairs))
            tables.append(
                LiftTable(
                    split, seed, best, counts, up, down, sum(counts[i][i] for i in range(3)), lift
                )
            )
    return tables


@dataclass
class PairLift:
    """One compared candidate against the baseline; a split is None where the
    two share no scored task."""

    index: int
    baseline: int
    val: Lift | None
    holdout: Lift | None


def pair_lifts(
    candidates: list[Candidate],
    baseline: int | None,
    val_scores: dict[int, dict[str, float]] | None = None,
) -> list[PairLift]:
    """Each compared candidate against the baseline on val and holdout: the
    paired interval and improved / worse / unchanged. Only these pairs (at most
    MAX_COMPARED − 1, two splits each), never all pairs of the compared
    candidates: a bootstrap of 300 tasks costs tens of milliseconds. With
    `val_scores` (a re-scoring's, by candidate index) the val lifts are on those."""
    val = (
        split_scores(candidates, "val")
        if val_scores is None
        else [val_scores.get(c.index, {}) for c in candidates]
    )
    holdout = split_scores(candidates, "holdout")
    # No baseline chosen: the first candidate, as TaskFilters.from_query chooses.
    base = next((i for i, c in enumerate(candidates) if c.index == baseline), 0)

    def lift(scores: list[dict[str, float]], i: int) -> Lift | None:
        found = paired_lift(scores[base], scores[i])
        return found if found.tasks else None

    return [
        PairLift(cand.index, candidates[base].index, lift(val, i), lift(holdout, i))
        for i, cand in enumerate(candidates)
        if i != base
    ]


# ---------------------------------------------------------------- compare runs


def _flatten(value, prefix: str = "") -> dict[str, str]:
    if isinstance(value, dict) and value:
        out = {}
        for key, sub in value.items():
            out.update(_flatten(sub, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix or "(config)": json.dumps(value, sort_keys=True)}


def config_diff(a: dict, b: dict) -> list[tuple[str, str | None, str | None]]:
    """(setting, value in a, value in b) for every setting that differs."""
    fa, fb = _flatten(a), _flatten(b)
    return [
        (k, fa.get(k), fb.get(k)) for k in sorted(fa.keys() | fb.keys()) if fa.get(k) != fb.get(k)
    ]


def _task_keys(run: Run) -> set[str]:
    return {str(row.get("task_id")) for row in run.tasks_snapshot}


def check_same_task_set(a: Run, b: Run) -> None:
    if a.task_set_id and b.task_set_id:
        same = a.task_set_id == b.task_set_id
    else:  # an imported run has no task set here: compare the frozen task rows
        same = bool(_task_keys(a)) and _task_keys(a) == _task_keys(b)
    if not same:
        raise CompareError(f"b: runs {a.pk} and {b.pk} were not run on the same task set.")


def score_curves(runs: list[Run]) -> dict:
    """Best-so-far validation score against metric calls, one line per run, plus
    every candidate as a marker; a Plotly figure as a JSON-ready dict."""
    fig = go.Figure()
    for run in runs:
        points = list(
            run.candidates.exclude(val_score=None)
            .order_by("metric_calls", "index")
            .values_list("metric_calls", "val_score", "index")
        )
        best, xs, ys = -1.0, [], []
        for calls, score, _ in points:
            if score is None:  # excluded by the query above
                continue
            best = max(best, score)
            xs.append(calls)
            ys.append(best)
        # Plotly renders trace names as HTML; it shows &quot; literally, so escape only <, > and &.
        name = html.escape(f"#{run.pk} {run}", quote=False)
        fig.add_trace(
            go.Scatter(x=xs, y=ys, mode="lines", line={"shape": "hv"}, name=f"{name} best so far")
        )
        fig.add_trace(
            go.Scatter(
                x=[p[0] for p in points],
                y=[p[1] for p in points],
                mode="markers",
                name=f"{name} candidates",
                cliponaxis=False,
                text=[f"candidate {p[2]}" for p in points],
                hovertemplate="%{text}: %{y:.3f} at %{x} calls<extra></extra>",
            )
        )
    # The page's charts.js gives it the style of every other chart (and drops plotly.py's template).
    fig.update_layout(
        xaxis_title="metric calls",
        yaxis_title="validation score",
        yaxis_range=[0, 1],
        margin={"l": 50, "r": 10, "t": 40, "b": 40},
        height=340,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02},
    )
    return json.loads(fig.to_json())


@dataclass
class BestVsBest:
    best_a: Candidate | None
    best_b: Candidate | None
    page: Page
    lift: Lift  # b's best − a's best on the val tasks both were scored on


def best_vs_best(a: Run, b: Run, page: str) -> BestVsBest:
    """The two runs' best candidates scored task by task on the validation
    split, with the paired interval of b's best over a's."""
    best_a, best_b = best_candidate(a), best_candidate(b)
    pair = [c for c in (best_a, best_b) if c is not None]
    by_task: dict[str, list[Cell | None]] = {}
    for cand_id, key, score, verdict in (
        Evaluation.objects.filter(candidate__in=pair, split="val")
        .order_by()
        .values_list("candidate_id", "task_key", "score", "verdict")
    ):
        slot = 0 if best_a and cand_id == best_a.pk else 1
        row = by_task.setdefault(key, [None, None])
        row[slot] = Cell(slot, score, verdict, None)
    rows = []
    pairs = []
    for key in sorted(by_task):
        ca, cb = by_task[key]
        if ca and cb:
            cb.delta = cb.score - ca.score
            pairs.append((ca.score, cb.score))
        rows.append(TaskRow(key, [ca, cb]))
    return BestVsBest(
        best_a, best_b, Paginator(rows, PAGE_SIZE).get_page(page), lift_of_pairs(pairs)
    )
