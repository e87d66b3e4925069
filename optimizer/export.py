"""Export a run (JSON, CSV) and import an exported run JSON elsewhere.

The JSON holds everything needed to view the run on another installation:
config, frozen verifier specs and task rows, candidates with lineage and
components, every evaluation, the event log and the reviewer notes, and the
best candidate's lift on the seed (val, holdout) with its paired bootstrap
interval: derived from the evaluations, so an import checks it and keeps
nothing of it (its pages compute their own). Import validates the whole
document with pydantic first (errors name the field), then writes it in one
transaction, so a broken file leaves nothing behind. Import only stores data:
nothing in the file is executed, and the run is marked `imported`.
"""

from __future__ import annotations

import codecs
import csv
import functools
import hashlib
import io
import itertools
import json
import re
from datetime import datetime
from typing import Annotated, Any, Literal

from django.db import connection, transaction
from django.db.models import Q
from django.db.models.functions import Collate
from django.utils import timezone
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from dashboard.lib.storable import MAX_JSON_DEPTH, depth_problem, storage_problems
from optimizer.config import RunConfigError, parse_run_config
from optimizer.models import (
    Candidate,
    Evaluation,
    Origin,
    ReviewerNote,
    Run,
    RunEvent,
    RunStatus,
    Scoring,
    ScoringCandidate,
    ScoringStatus,
    run_progress,
    store_rejected_marks,
)
from optimizer.promotion import SeedVsBestDoc, seed_vs_best
from optimizer.reviewer_notes import MAX_NOTE_CHARS, MAX_NOTES_PER_RUN, run_notes
from optimizer.scorings.reads import MAX_SCORINGS_PER_RUN, MAX_SPECS, scorings_export
from optimizer.tasksets.models import Split
from optimizer.val_summary import fill_val_summaries
from verifiers_app.engine.errors import validation_problems

FORMAT = "frontier.run"
VERSION = 1
MAX_TEXT = 200_000  # characters in any one prompt component, output or reflection

Text = Annotated[str, Field(max_length=MAX_TEXT)]
Key = Annotated[str, Field(min_length=1, max_length=200)]


def _plausible(value: datetime | None) -> datetime | None:
    # Converting a year-1 or year-9999 time with an offset to UTC overflows.
    if value is not None and not 1970 <= value.year <= 9998:
        raise ValueError("must be a date between 1970 and 9998")
    return value


Moment = Annotated[datetime | None, AfterValidator(_plausible)]
# Counters are stored in 32-bit integer columns (PostgreSQL rejects more).
Count = Annotated[int, Field(ge=0, le=2**31 - 1)]
Money = Annotated[float, Field(ge=0, le=1e12)]


class RunImportError(ValueError):
    """An import file that cannot be used; the message names the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _CheckShape(BaseModel):
    model_config = ConfigDict(extra="allow")


class _VerifierShape(BaseModel):
    model_config = ConfigDict(extra="allow")
    checks: list[_CheckShape] = []


class _ResultShape(BaseModel):
    """The parts of the engine's result shape the pages iterate over; anything
    else in it is kept as is."""

    model_config = ConfigDict(extra="allow")
    verifiers: list[_VerifierShape] = []


class _TaskRowShape(BaseModel):
    """A frozen task row as a launch stores it (`Task.as_row()` plus its split)."""

    model_config = ConfigDict(extra="allow")
    task_id: Key
    split: Split
    input: Text = ""
    params: dict = {}
    metadata: dict = {}


class _SpecShape(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: Key
    name: Text = ""  # as long as a spec may say (the verifier's row keeps its first 200 characters)


class EvaluationIn(_Strict):
    task_key: Key
    split: Split
    output: Text = ""
    score: float = Field(ge=0, le=1)
    verdict: Literal["pass", "borderline", "fail"]
    passed: bool = False
    result: dict = {}
    feedback: Text = ""
    attempts: list = []
    latency_ms: float = Field(default=0, ge=0)
    tokens_in: Count = 0
    tokens_out: Count = 0
    judge_tokens_in: Count = 0
    judge_tokens_out: Count = 0
    cost: Money = 0.0

    @field_validator("result")
    @classmethod
    def _engine_shape(cls, value: dict) -> dict:
        _ResultShape.model_validate(value)  # errors carry their path below `result`
        return value  # stored exactly as exported


class CandidateIn(_Strict):
    index: Count
    components: dict[Key, Text]
    parents: list[Count] = []
    origin: Origin = Origin.REFLECTION
    # origin human: who wrote it where it was run (a name only: not a user of this server).
    author: Annotated[str, Field(max_length=150)] | None = None
    iteration: int = Field(default=0, ge=-(2**31), le=2**31 - 1)
    metric_calls: Count = 0
    # Any finite score: an external run's adapter may give a candidate any
    # (optimizer/external/services.py takes them); per-task scores stay in [0, 1].
    val_score: float | None = Field(default=None, allow_inf_nan=False)
    objective_scores: dict[str, float] = {}
    on_front: bool = False
    reflection: Text = ""
    cost: Money = 0.0
    usage: dict = {}
    evaluations: list[EvaluationIn] = []

    @model_validator(mode="after")
    def _one_evaluation_per_task(self):
        seen = set()
        for i, e in enumerate(self.evaluations):
            if (e.task_key, e.split) in seen:
                raise ValueError(f"evaluations.{i}: task {e.task_key!r} ({e.split}) appears twice")
            seen.add((e.task_key, e.split))
        return self


class EventIn(_Strict):
    seq: int = Field(ge=1, le=2**31 - 1)
    type: Annotated[str, Field(min_length=1, max_length=50)]
    data: dict = {}
    created_at: Moment = None


class RunIn(_Strict):
    name: Annotated[str, Field(max_length=200)] = ""
    status: RunStatus
    config: dict
    verifier_specs: list[dict] = []
    tasks_snapshot: list[dict] = []
    task_set: str | None = None
    budget_total: Count = 0
    budget_used: Count = 0
    seed_score: float | None = None
    best_score: float | None = None
    best_index: int | None = None
    chosen_index: int | None = None
    error: Text = ""
    cost: Money = 0.0
    usage: dict = {}
    stop_reason: Annotated[str, Field(max_length=100)] = ""
    created_at: Moment = None
    started_at: Moment = None
    finished_at: Moment = None

    @field_validator("config")
    @classmethod
    def _a_run_config(cls, value: dict) -> dict:
        # The same model a launch froze it with and the runner reads it back with.
        try:
            parse_run_config(value)
        except RunConfigError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("tasks_snapshot")
    @classmethod
    def _task_rows(cls, value: list[dict]) -> list[dict]:
        TypeAdapter(list[_TaskRowShape]).validate_python(value)
        return value

    @field_validator("verifier_specs")
    @classmethod
    def _specs(cls, value: list[dict]) -> list[dict]:
        TypeAdapter(list[_SpecShape]).validate_python(value)
        return value


class ReviewerNoteIn(_Strict):
    """A reviewer's note on one task (optimizer/reviewer_notes.py); `id` is the
    exporting installation's, which the proposal events that read it name."""

    id: Count | None = None
    task_key: Key
    text: Annotated[str, Field(min_length=1, max_length=MAX_NOTE_CHARS)]
    author: Annotated[str, Field(max_length=150)] = ""
    created_at: Moment = None
    updated_at: Moment = None


class ScoringCandidateIn(_Strict):
    """One candidate under a re-scoring (optimizer/scorings.py)."""

    index: Count
    score: Annotated[float, Field(ge=0, le=1)] | None = None
    original_score: float | None = None
    rank: Count | None = None
    original_rank: Count | None = None
    on_front: bool = False
    cut_tasks: list[Key] = []
    kept: Count = 0
    task_scores: dict[Key, Annotated[float, Field(ge=0, le=1)]] = {}


class ScoringIn(_Strict):
    """A finished re-scoring of the run's stored outputs with other verifier specs;
    `id` is the exporting installation's."""

    id: Count | None = None
    name: Annotated[str, Field(min_length=1, max_length=200)]
    status: Literal["done"] = "done"
    done: Count = 0
    total: Count = 0
    error: Annotated[str, Field(max_length=2000)] = ""
    specs: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_SPECS)
    source: list[dict[str, Any]] = []
    created_by: Annotated[str, Field(max_length=150)] = ""
    created_at: Moment = None
    finished_at: Moment = None
    summary: dict[str, Any] = {}
    candidates: list[ScoringCandidateIn] = []


class RunDocument(_Strict):
    format: Literal["frontier.run"]
    version: Literal[1]
    run: RunIn
    lift: SeedVsBestDoc | None = Field(
        default=None,
        description="Best vs seed on val and holdout with the paired bootstrap interval; "
        "derived from the evaluations (an import reads it and computes its own)",
    )
    candidates: list[CandidateIn] = Field(min_length=1)
    events: list[EventIn] = []
    reviewer_notes: list[ReviewerNoteIn] = Field(
        default=[],
        max_length=MAX_NOTES_PER_RUN,
        description="What reviewers wrote on tasks for GEPA's reflection to read",
    )
    scorings: list[ScoringIn] = Field(
        default=[],
        max_length=MAX_SCORINGS_PER_RUN,
        description="Finished re-scorings of the stored outputs with other verifiers "
        "(the run's own scores are the original)",
    )

    @model_validator(mode="after")
    def _references_resolve(self):
        indices = set()
        for i, c in enumerate(self.candidates):
            if c.index in indices:
                raise ValueError(f"candidates.{i}.index: candidate {c.index} appears twice")
            indices.add(c.index)
        for i, c in enumerate(self.candidates):
            for p in c.parents:
                if p not in indices:
                    raise ValueError(f"candidates.{i}.parents: candidate {p} is not in the file")
        for name in ("best_index", "chosen_index"):
            value = getattr(self.run, name)
            if value is not None and value not in indices:
                raise ValueError(f"run.{name}: candidate {value} is not in the file")
        seqs = set()
        for i, e in enumerate(self.events):
            if e.seq in seqs:
                raise ValueError(f"events.{i}.seq: seq {e.seq} appears twice")
            seqs.add(e.seq)
        return self


def scorings_import(run: Run, scorings: list[ScoringIn], pks: dict[int, int]) -> None:
    """The file's re-scorings, kept as they were measured (never scored again here)."""
    for n, item in enumerate(scorings):
        problem = storage_problems(item.model_dump(mode="json"), f"scorings.{n}", dotted=True)
        if problem:
            raise RunImportError(problem[0])
        scoring = Scoring.objects.create(
            run=run,
            name=item.name,
            specs=item.specs,
            source=item.source,
            status=ScoringStatus.DONE,
            done=item.done,
            total=max(item.total, item.done),
            summary=item.summary,
            finished_at=item.finished_at or timezone.now(),
        )
        rows = []
        for k, c in enumerate(item.candidates):
            if c.index not in pks:
                raise RunImportError(
                    f"scorings.{n}.candidates.{k}.index: candidate {c.index} is not in the file"
                )
            rows.append(
                ScoringCandidate(
                    scoring=scoring,
                    candidate_id=pks[c.index],
                    index=c.index,
                    val_score=c.score,
                    original_score=c.original_score,
                    task_scores=c.task_scores,
                    rank=c.rank,
                    original_rank=c.original_rank,
                    on_front=c.on_front,
                    cut_tasks=c.cut_tasks,
                    kept=c.kept,
                )
            )
        ScoringCandidate.objects.bulk_create(rows, batch_size=500)


def _unstorable(data) -> str | None:
    """The first place (in document order) holding what PostgreSQL text/jsonb
    columns and browsers' JSON.parse refuse (a NUL character, a non-finite
    number), as "path: problem"; None when there is none."""
    problems = storage_problems(data, "", dotted=True)
    return problems[0] if problems else None


def _first_error(exc: ValidationError) -> str:
    where, message = validation_problems(exc.errors(), dotted=True)[0]
    return f"{where}: {message}" if where and not message.startswith(where) else message


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


# Rows are read in chunks (a server-side cursor on PostgreSQL) and the document
# is written piece by piece: a run of a million evaluations exports in the
# memory of a few hundred of them.
CHUNK_ROWS = 500
_EVALUATION_FIELDS = (
    "task_key",
    "split",
    "output",
    "score",
    "verdict",
    "passed",
    "result",
    "feedback",
    "attempts",
    "latency_ms",
    "tokens_in",
    "tokens_out",
    "judge_tokens_in",
    "judge_tokens_out",
    "cost",
)


def _run_meta(run: Run) -> dict:
    index_of = dict(
        run.candidates.filter(
            pk__in=[pk for pk in (run.best_candidate_id, run.chosen_candidate_id) if pk]
        ).values_list("pk", "index")
    )
    return {
        "name": run.name,
        "status": run.status,
        "config": run.config,
        "verifier_specs": run.verifier_specs,
        "tasks_snapshot": run.tasks_snapshot,
        "task_set": run.task_set.name if run.task_set is not None else None,
        "budget_total": run.budget_total,
        "budget_used": run.budget_used,
        "seed_score": run.seed_score,
        "best_score": run.best_score,
        "best_index": index_of.get(run.best_candidate_id)
        if run.best_candidate_id is not None
        else None,
        "chosen_index": index_of.get(run.chosen_candidate_id)
        if run.chosen_candidate_id is not None
        else None,
        "error": run.error,
        "cost": run.cost,
        "usage": run.usage,
        "stop_reason": run.stop_reason,
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
    }


def _candidates(run: Run):
    """(candidate dict without its evaluations, candidate pk), by index."""
    rows = run.candidates.order_by("index").values_list(
        "pk",
        "index",
        "components",
        "parents",
        "origin",
        "author__username",
        "iteration",
        "metric_calls",
        "val_score",
        "objective_scores",
        "on_front",
        "reflection",
        "cost",
        "usage",
    )
    for pk, *values in rows.iterator(chunk_size=CHUNK_ROWS):
        yield (
            dict(
                zip(
                    (
                        "index",
                        "components",
                        "parents",
                        "origin",
                        "author",
                        "iteration",
                        "metric_calls",
                        "val_score",
                        "objective_scores",
                        "on_front",
                        "reflection",
                        "cost",
                        "usage",
                    ),
                    values,
                    strict=True,
                )
            ),
            pk,
        )


def _evaluations(candidate_pk: int):
    rows = (
        Evaluation.objects.filter(candidate_id=candidate_pk)
        .order_by("split", "task_key")
        .values_list(*_EVALUATION_FIELDS)
    )
    for values in rows.iterator(chunk_size=CHUNK_ROWS):
        yield dict(zip(_EVALUATION_FIELDS, values, strict=True))


def _events(run: Run):
    rows = run.events.order_by("seq").values_list("seq", "type", "payload", "created_at")
    for seq, type_, payload, created_at in rows.iterator(chunk_size=CHUNK_ROWS):
        yield {"seq": seq, "type": type_, "data": payload, "created_at": _iso(created_at)}


def run_export(run: Run) -> dict:
    """The run as a JSON-ready dict that `run_import` reads back (the whole run
    in memory: for tests and small runs; downloads use `run_export_stream`)."""
    candidates = []
    for candidate, pk in _candidates(run):
        candidate["evaluations"] = list(_evaluations(pk))
        candidates.append(candidate)
    return {
        "format": FORMAT,
        "version": VERSION,
        "run": _run_meta(run),
        "lift": seed_vs_best(run),
        "candidates": candidates,
        "events": list(_events(run)),
        "reviewer_notes": run_notes(run),
        "scorings": scorings_export(run),
    }


def run_export_stream(run: Run, *, piece_bytes: int = 256 * 1024):
    """The JSON text of `run_export(run)`, byte for byte as
    `json.dumps(run_export(run), ensure_ascii=False)` writes it, as a generator
    of UTF-8 pieces of about `piece_bytes`. Only one candidate's evaluations
    (as rows stream from the cursor) are held at a time. Wrapped in one
    transaction, so every query reads from a cursor that lives until the end
    (PostgreSQL: a server-side cursor that streams instead of a WITH HOLD copy)."""
    dumps = functools.partial(json.dumps, ensure_ascii=False)
    buffer: list[str] = []
    size = 0

    def put(text: str):
        nonlocal size
        buffer.append(text)
        size += len(text)
        return size >= piece_bytes

    def flush() -> bytes:
        nonlocal size
        piece = "".join(buffer).encode()
        buffer.clear()
        size = 0
        return piece

    with transaction.atomic():
        put(
            f'{{"format": {dumps(FORMAT)}, "version": {VERSION}, "run": {dumps(_run_meta(run))}, '
            f'"lift": {dumps(seed_vs_best(run))}, "candidates": ['
        )
        for n, (candidate, pk) in enumerate(_candidates(run)):
            head = dumps({**candidate, "evaluations": []})
            put(
                (", " if n else "") + head[:-2]
            )  # the candidate without the closing `[]}`: its evaluations follow
            for k, evaluation in enumerate(_evaluations(pk)):
                if put((", " if k else "") + dumps(evaluation)):
                    yield flush()
            put("]}")
        put('], "events": [')
        for n, event in enumerate(_events(run)):
            if put((", " if n else "") + dumps(event)):
                yield flush()
        put(f'], "reviewer_notes": {dumps(run_notes(run))}')
        put(f', "scorings": {dumps(scorings_export(run))}}}')
        yield flush()


def _csv_cell(value: str) -> str:
    # A task key like "=HYPERLINK(…)" would run as a formula in a spreadsheet.
    return f"'{value}" if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def _csv_column(index: int, origin: str, parents: list[int], author: str | None) -> str:
    """A candidate's score column: `candidate_N`, and who wrote it for origin human."""
    if origin != Origin.HUMAN:
        return f"candidate_{index}"
    edited = f"edited from {parents[0]}" if parents else "written"
    return _csv_cell(f"candidate_{index} (human: {edited} by {author or 'a deleted user'})")


class _Line:
    """A file-like `csv.writer` target that hands back what one row wrote."""

    def write(self, text: str) -> str:
        return text


def run_export_csv_stream(run: Run):
    """One row per task (and split), one score column per candidate, as a
    generator of UTF-8 lines. Evaluations stream split by split, each sorted
    by task and candidate as an index led by the run holds them (migration
    0023_evaluation_csv_order_by_run), so the first row goes out without the
    run being sorted first or other runs' entries read, and only one task
    row is held at a time."""
    writer = csv.writer(_Line())
    with transaction.atomic():
        candidates = list(
            run.candidates.order_by("index").values_list(
                "pk", "index", "origin", "parents", "author__username"
            )
        )
        column = {pk: i for i, (pk, *_) in enumerate(candidates)}
        yield writer.writerow(
            ["task_key", "split", *(_csv_column(*c[1:]) for c in candidates)]
        ).encode()
        # Code point order, as Python sorts strings (PostgreSQL's default collation may not be).
        binary = "C" if connection.vendor == "postgresql" else "BINARY"
        evals = Evaluation.objects.filter(run=run)  # the index's first column: no join
        # The splits in their declared order, then any other split value together,
        # asked for as the ranges around the known values: the index finds none
        # at once where "not one of them" would read the whole run again. (The
        # known values are lowercase ASCII words: every collation sorts them alike.)
        known = sorted(Split.values)
        other = Q(split__lt=known[0]) | Q(split__gt=known[-1])
        for low, high in itertools.pairwise(known):
            other |= Q(split__gt=low, split__lt=high)
        parts = [evals.filter(split=split) for split in Split.values] + [evals.filter(other)]
        current: tuple[str, str] | None = None
        scores: list[str] = []
        for part in parts:
            rows = part.order_by(Collate("task_key", binary), "candidate_id").values_list(
                "candidate_id", "task_key", "split", "score"
            )
            for cand_id, key, split, score in rows.iterator(chunk_size=CHUNK_ROWS * 4):
                if (split, key) != current:
                    if current is not None:
                        yield writer.writerow([_csv_cell(current[1]), current[0], *scores]).encode()
                    current, scores = (split, key), [""] * len(candidates)
                scores[column[cand_id]] = repr(score)
        if current is not None:
            yield writer.writerow([_csv_cell(current[1]), current[0], *scores]).encode()


def run_export_csv(run: Run) -> str:
    """The whole CSV as one string (tests and small runs)."""
    return b"".join(run_export_csv_stream(run)).decode()


def run_import(*, owner, data) -> Run:
    """`run_import_stream` for a document already in memory (a parsed dict)."""
    if not isinstance(data, dict):
        raise RunImportError("The file must hold a JSON object exported from Frontier.")
    return run_import_stream(
        owner=owner, raw=io.BytesIO(json.dumps(data, ensure_ascii=False).encode())
    )


# -- streaming import ------------------------------------------------------------

#: The largest single value (one candidate with its evaluations, one event, the
#: `run` header) an import holds in memory at once, in characters.
MAX_IMPORT_VALUE_CHARS = 256 * 1024 * 1024
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_LEADING_PATH = re.compile(r"^[\w.]+: ")


class _JsonStream:
    """Reads a JSON text from a binary file piece by piece: the top-level
    object's keys one at a time and, inside its arrays, one element at a
    time, so a file of any size is parsed holding one element (plus a read
    chunk). Errors name the file's line and column as `json.loads` would."""

    def __init__(self, raw, *, chunk: int = 1024 * 1024):
        self.raw = raw
        self.chunk = chunk
        self.decoder = codecs.getincrementaldecoder(
            "utf-8-sig"
        )()  # a BOM from a Windows editor is fine
        self.json = json.JSONDecoder()
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.lines = 0  # newlines before buf[0]
        self.column = 0  # characters of the current line before buf[0]

    def _more(self) -> None:
        consumed = self.buf[: self.pos]
        newline = consumed.rfind("\n")
        if newline >= 0:
            self.lines += consumed.count("\n")
            self.column = len(consumed) - newline - 1
        else:
            self.column += len(consumed)
        data = self.raw.read(self.chunk)
        self.buf = self.buf[self.pos :] + self.decoder.decode(data, final=not data)
        self.pos = 0
        self.eof = not data

    def where(self, at: int) -> str:
        newline = self.buf.rfind("\n", 0, at)
        line = self.lines + self.buf.count("\n", 0, at) + 1
        column = at - newline if newline >= 0 else self.column + at + 1
        return f"line {line}, column {column}"

    def invalid(self, at: int, why: str) -> RunImportError:
        return RunImportError(f"file: not valid JSON at {self.where(at)} ({why}).")

    def peek(self) -> str:
        while True:
            blank = _WHITESPACE.match(self.buf, self.pos)  # always matches (maybe nothing)
            self.pos = blank.end() if blank else self.pos
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos : self.pos + 1]
            self._more()

    def expect(self, chars: str, what: str) -> str:
        found = self.peek()
        if not found or found not in chars:
            raise self.invalid(self.pos, f"Expecting {what}")
        self.pos += 1
        return found

    def value(self, where: str):
        """The next JSON value. When it is cut by the end of the buffer, read
        on (doubling what is held) and decode again: each value is decoded
        O(log size) times, and never held beyond MAX_IMPORT_VALUE_CHARS."""
        self.peek()
        want = self.chunk
        while True:
            try:
                value, end = self.json.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof or len(self.buf) - self.pos > MAX_IMPORT_VALUE_CHARS:
                    raise self.invalid(exc.pos, exc.msg) from None
            except RecursionError:
                raise RunImportError(
                    f"file: {where}: nested more than {MAX_JSON_DEPTH} levels deep; "
                    "an exported run is never that deep"
                ) from None
            except ValueError as exc:  # e.g. an integer literal of thousands of digits
                raise RunImportError(f"file: not valid JSON ({exc}).") from None
            else:
                if (
                    end < len(self.buf) or self.eof
                ):  # a number at the very end may go on in the next chunk
                    self.pos = end
                    problem = depth_problem(value, where)
                    if problem:
                        raise RunImportError(f"file: {problem}; an exported run is never that deep")
                    return value
            want = max(want, 2 * (len(self.buf) - self.pos))
            while not self.eof and len(self.buf) - self.pos < want:
                self._more()

    def end(self) -> None:
        if self.peek():
            raise self.invalid(self.pos, "Extra data")


def _located(exc: ValidationError, prefix: str) -> str:
    where, message = validation_problems(exc.errors()[:1], prefix=prefix, dotted=True)[0]
    if where == prefix and _LEADING_PATH.match(
        message
    ):  # "evaluations.3: …" from a model validator
        return f"{prefix}.{message}"
    return f"{where}: {message}" if where else message


def _checked(value, model: TypeAdapter, prefix: str):
    """`value` validated by `model`, or RunImportError naming the place under `prefix`."""
    problem = _unstorable(value)
    if problem:
        raise RunImportError(f"{prefix}.{problem}" if ": " in problem else f"{prefix}: {problem}")
    try:
        return model.validate_python(value)
    except ValidationError as exc:
        raise RunImportError(_located(exc, prefix)) from None


# RunDocument, read a part at a time.
_HEADER: dict[str, TypeAdapter[Any]] = {
    "format": TypeAdapter(Literal["frontier.run"]),
    "version": TypeAdapter(Literal[1]),
    "run": TypeAdapter(RunIn),
    "lift": TypeAdapter(SeedVsBestDoc | None),  # derived: checked, never stored
    "reviewer_notes": TypeAdapter(
        Annotated[list[ReviewerNoteIn], Field(max_length=MAX_NOTES_PER_RUN)]
    ),
    "scorings": TypeAdapter(Annotated[list[ScoringIn], Field(max_length=MAX_SCORINGS_PER_RUN)]),
}
_CANDIDATE, _EVENT = TypeAdapter(CandidateIn), TypeAdapter(EventIn)


class _Hashing:
    """A binary file whose bytes are hashed as they are read."""

    def __init__(self, raw):
        self.raw, self.sha256 = raw, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.sha256.update(data)
        return data


class _ImportedBefore(Exception):
    def __init__(self, run: Run):
        self.run = run


def run_import_stream(*, owner, raw) -> Run:
    """Create a finished, imported run from an exported document read from the
    binary file `raw` piece by piece (one candidate or event in memory at a
    time), or raise `RunImportError` naming the first bad field or line.
    Everything is written in one transaction: on any error nothing is saved.

    The same file imported twice by one owner gives one run (its key is the
    file's hash, as for a replayed gepa_state.bin): the second import returns
    the first run, with `imported_before` set."""
    hashing = _Hashing(raw)
    stream = _JsonStream(hashing)
    try:
        if stream.peek() != "{":
            raise RunImportError("The file must hold a JSON object exported from Frontier.")
        with transaction.atomic():
            run = _import_document(stream, owner)
            key = "import-" + hashing.sha256.hexdigest()[:40]
            before = Run.objects.filter(owner=owner, external_key=key).first()
            if before is not None:
                raise _ImportedBefore(before)  # rolls the copy back
            Run.objects.filter(pk=run.pk).update(external_key=key)
            run.external_key, run.imported_before = key, False
            return run
    except _ImportedBefore as found:
        found.run.imported_before = True
        return found.run
    except UnicodeDecodeError:
        raise RunImportError("file: not UTF-8 text.") from None


def _import_document(stream: _JsonStream, owner) -> Run:
    stream.expect("{", "'{'")
    header: dict = {}
    run: Run | None = None
    parents: dict[int, tuple[int, list[int]]] = {}  # index → (position in the file, its parents)
    pks: dict[int, int] = {}  # index → Candidate pk
    seqs: set[int] = set()
    events: list[RunEvent] = []

    def the_run() -> Run:
        nonlocal run
        if run is None:  # its fields are filled in once the whole header is known
            run = Run.objects.create(
                owner=owner, name="Imported run", status=RunStatus.STOPPED, imported=True
            )
        return run

    def flush_events() -> None:
        RunEvent.objects.bulk_create(events, batch_size=500)
        store_rejected_marks(events)
        events.clear()

    first = True
    while stream.peek() != "}":
        if not first:
            stream.expect(",", "',' delimiter")
        first = False
        key_at = stream.pos
        key = stream.value("key")
        if not isinstance(key, str):
            raise stream.invalid(key_at, "Expecting property name enclosed in double quotes")
        stream.expect(":", "':' delimiter")
        if key in ("candidates", "events"):
            stream.expect("[", f"'[' (the {key} array)")
            n = 0
            while stream.peek() != "]":
                if n:
                    stream.expect(",", "',' delimiter")
                element = stream.value(f"{key}.{n}")
                if key == "candidates":
                    c = _checked(element, _CANDIDATE, f"candidates.{n}")
                    if c.index in parents:
                        raise RunImportError(
                            f"candidates.{n}.index: candidate {c.index} appears twice"
                        )
                    parents[c.index] = (n, c.parents)
                    made = Candidate.objects.create(
                        run=the_run(),
                        index=c.index,
                        components=c.components,
                        parents=c.parents,
                        origin=c.origin,
                        iteration=c.iteration,
                        metric_calls=c.metric_calls,
                        val_score=c.val_score,
                        objective_scores=c.objective_scores,
                        on_front=c.on_front,
                        reflection=c.reflection,
                        cost=c.cost,
                        usage=c.usage,
                    )
                    pks[c.index] = made.pk
                    Evaluation.objects.bulk_create(
                        [
                            Evaluation(candidate=made, run=made.run, **e.model_dump())
                            for e in c.evaluations
                        ],
                        batch_size=500,
                    )
                else:
                    e = _checked(element, _EVENT, f"events.{n}")
                    if e.seq in seqs:
                        raise RunImportError(f"events.{n}.seq: seq {e.seq} appears twice")
                    seqs.add(e.seq)
                    events.append(RunEvent(run=the_run(), seq=e.seq, type=e.type, payload=e.data))
                    if len(events) >= 500:
                        flush_events()
                del element
                n += 1
            stream.expect("]", "']'")
            if key == "candidates" and n == 0:
                raise RunImportError(
                    "candidates: List should have at least 1 item after validation, not 0"
                )
        else:
            value = stream.value(key)
            if key not in _HEADER:
                raise RunImportError(f"{key}: Extra inputs are not permitted")
            # Each part as soon as it is read: a file of another format stops here.
            header[key] = _checked(value, _HEADER[key], key)
        if stream.peek() not in (",", "}"):
            raise stream.invalid(stream.pos, "Expecting ',' delimiter")
    stream.expect("}", "'}'")
    stream.end()
    flush_events()
    for name in ("format", "version", "run"):
        if name not in header:
            raise RunImportError(f"{name}: Field required")
    if not parents:
        raise RunImportError("candidates: Field required")
    meta = header["run"]
    for n, its_parents in parents.values():
        for p in its_parents:
            if p not in parents:
                raise RunImportError(f"candidates.{n}.parents: candidate {p} is not in the file")
    for name in ("best_index", "chosen_index"):
        value = getattr(meta, name)
        if value is not None and value not in parents:
            raise RunImportError(f"run.{name}: candidate {value} is not in the file")
    # A run exported while still going is imported as stopped: nothing runs it here.
    status = meta.status if meta.status in RunStatus.finished() else RunStatus.STOPPED
    run = the_run()
    fill_val_summaries(pks.values())  # what the run page reads, as the recorder stores it
    Run.objects.filter(pk=run.pk).update(
        name=meta.name or (f"Imported {meta.task_set}"[:200] if meta.task_set else "Imported run"),
        status=status,
        config=meta.config,
        verifier_specs=meta.verifier_specs,
        tasks_snapshot=meta.tasks_snapshot,
        budget_total=meta.budget_total,
        seed_score=meta.seed_score,
        best_score=meta.best_score,
        error=meta.error,
        stop_reason=meta.stop_reason,
        started_at=meta.started_at,
        finished_at=meta.finished_at,
        best_candidate_id=pks.get(meta.best_index),
        chosen_candidate_id=pks.get(meta.chosen_index),
    )
    ReviewerNote.objects.bulk_create(
        [
            ReviewerNote(
                run=run,
                task_key=note.task_key,
                text=note.text,
                author_name=note.author,
                created_at=note.created_at or timezone.now(),
                updated_at=note.updated_at or note.created_at or timezone.now(),
            )
            for note in header.get("reviewer_notes", [])
        ]
    )
    scorings_import(run, header.get("scorings", []), pks)
    run_progress(run.pk).update(
        budget_used=meta.budget_used,
        cost=meta.cost,
        usage=meta.usage,
        last_seq=max(seqs, default=0),
    )
    run.refresh_from_db()
    return run
