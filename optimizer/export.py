"""Export a run (JSON, CSV) and import an exported run JSON elsewhere.

The JSON holds everything needed to view the run on another installation:
config, frozen verifier specs and task rows, candidates with lineage and
components, every evaluation, and the event log. Import validates the whole
document with pydantic first (errors name the field), then writes it in one
transaction, so a broken file leaves nothing behind. Import only stores data:
nothing in the file is executed, and the run is marked `imported`.
"""

from __future__ import annotations

import csv
import io
from datetime import datetime
from typing import Annotated, Literal

from django.db import transaction
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from optimizer.config import RunConfigError, parse_run_config
from optimizer.val_summary import fill_val_summaries
from optimizer.models import Candidate, Evaluation, Origin, Run, RunEvent, RunStatus, Split
from verifiers_app.engine.errors import validation_problems
from verifiers_app.storable import storage_problems

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
    name: Annotated[str, Field(max_length=200)] = ""


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
    iteration: int = Field(default=0, ge=-(2**31), le=2**31 - 1)
    metric_calls: Count = 0
    val_score: float | None = Field(default=None, ge=0, le=1)
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


class RunDocument(_Strict):
    format: Literal["frontier.run"]
    version: Literal[1]
    run: RunIn
    candidates: list[CandidateIn] = Field(min_length=1)
    events: list[EventIn] = []

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


def _first_error(exc: ValidationError) -> str:
    where, message = validation_problems(exc.errors(), dotted=True)[0]
    return f"{where}: {message}" if where and not message.startswith(where) else message


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def run_export(run: Run) -> dict:
    """The run as a JSON-ready dict that `run_import` reads back."""
    evals: dict[int, list[dict]] = {}
    for e in Evaluation.objects.filter(candidate__run=run).order_by("candidate_id", "split", "task_key"):
        evals.setdefault(e.candidate_id, []).append({
            "task_key": e.task_key, "split": e.split, "output": e.output, "score": e.score, "verdict": e.verdict,
            "passed": e.passed, "result": e.result, "feedback": e.feedback, "attempts": e.attempts,
            "latency_ms": e.latency_ms, "tokens_in": e.tokens_in, "tokens_out": e.tokens_out,
            "judge_tokens_in": e.judge_tokens_in, "judge_tokens_out": e.judge_tokens_out, "cost": e.cost,
        })
    candidates = list(run.candidates.order_by("index"))
    index_of = {c.pk: c.index for c in candidates}
    return {
        "format": FORMAT,
        "version": VERSION,
        "run": {
            "name": run.name, "status": run.status, "config": run.config, "verifier_specs": run.verifier_specs,
            "tasks_snapshot": run.tasks_snapshot, "task_set": run.task_set.name if run.task_set_id else None,
            "budget_total": run.budget_total, "budget_used": run.budget_used,
            "seed_score": run.seed_score, "best_score": run.best_score,
            "best_index": index_of.get(run.best_candidate_id), "chosen_index": index_of.get(run.chosen_candidate_id),
            "error": run.error, "cost": run.cost, "usage": run.usage, "stop_reason": run.stop_reason,
            "created_at": _iso(run.created_at), "started_at": _iso(run.started_at),
            "finished_at": _iso(run.finished_at),
        },
        "candidates": [
            {
                "index": c.index, "components": c.components, "parents": c.parents, "origin": c.origin,
                "iteration": c.iteration, "metric_calls": c.metric_calls, "val_score": c.val_score,
                "objective_scores": c.objective_scores, "on_front": c.on_front, "reflection": c.reflection,
                "cost": c.cost, "usage": c.usage, "evaluations": evals.get(c.pk, []),
            }
            for c in candidates
        ],
        "events": [
            {"seq": ev.seq, "type": ev.type, "data": ev.payload, "created_at": _iso(ev.created_at)}
            for ev in run.events.order_by("seq")
        ],
    }


def _csv_cell(value: str) -> str:
    # A task key like "=HYPERLINK(…)" would run as a formula in a spreadsheet.
    return f"'{value}" if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def run_export_csv(run: Run) -> str:
    """One row per task (and split), one score column per candidate."""
    candidates = list(run.candidates.order_by("index").values_list("pk", "index"))
    column = {pk: i for i, (pk, _) in enumerate(candidates)}
    rows: dict[tuple[str, str], list] = {}
    evals = Evaluation.objects.filter(candidate__run=run).order_by().values_list("candidate_id", "task_key", "split", "score")
    for cand_id, key, split, score in evals:
        rows.setdefault((split, key), [""] * len(candidates))[column[cand_id]] = repr(score)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["task_key", "split", *(f"candidate_{index}" for _, index in candidates)])
    for (split, key), scores in sorted(rows.items(), key=lambda item: (Split.values.index(item[0][0]), item[0][1])):
        writer.writerow([_csv_cell(key), split, *scores])
    return out.getvalue()


def run_import(*, owner, data) -> Run:
    """Create a finished, imported run from an exported document, or raise
    `RunImportError` naming the first bad field; nothing is saved on error."""
    if not isinstance(data, dict):
        raise RunImportError("The file must hold a JSON object exported from Frontier.")
    # NUL characters and non-finite numbers: PostgreSQL and browsers' JSON.parse refuse them.
    problems = storage_problems(data, "", dotted=True)
    if problems:
        raise RunImportError(problems[0])
    try:
        doc = RunDocument.model_validate(data)
    except ValidationError as exc:
        raise RunImportError(_first_error(exc)) from None
    meta = doc.run
    # A run exported while still going is imported as stopped: nothing runs it here.
    status = meta.status if meta.status in RunStatus.finished() else RunStatus.STOPPED
    with transaction.atomic():
        run = Run.objects.create(
            owner=owner, name=meta.name or (f"Imported {meta.task_set}"[:200] if meta.task_set else "Imported run"),
            status=status, imported=True, config=meta.config, verifier_specs=meta.verifier_specs,
            tasks_snapshot=meta.tasks_snapshot, budget_total=meta.budget_total, budget_used=meta.budget_used,
            seed_score=meta.seed_score, best_score=meta.best_score, error=meta.error,
            cost=meta.cost, usage=meta.usage, stop_reason=meta.stop_reason,
            started_at=meta.started_at, finished_at=meta.finished_at,
            last_seq=max((e.seq for e in doc.events), default=0),
        )
        made = Candidate.objects.bulk_create([
            Candidate(run=run, index=c.index, components=c.components, parents=c.parents, origin=c.origin,
                      iteration=c.iteration, metric_calls=c.metric_calls, val_score=c.val_score,
                      objective_scores=c.objective_scores, on_front=c.on_front, reflection=c.reflection,
                      cost=c.cost, usage=c.usage)
            for c in doc.candidates
        ])
        by_index = {c.index: c for c in made}
        Evaluation.objects.bulk_create([
            Evaluation(candidate=by_index[c.index], **e.model_dump())
            for c in doc.candidates for e in c.evaluations
        ], batch_size=500)
        fill_val_summaries(c.pk for c in made)  # what the run page reads, as the recorder stores it
        RunEvent.objects.bulk_create([
            RunEvent(run=run, seq=e.seq, type=e.type, payload=e.data) for e in doc.events
        ], batch_size=500)
        run.best_candidate = by_index.get(meta.best_index)
        run.chosen_candidate = by_index.get(meta.chosen_index)
        run.save(update_fields=["best_candidate", "chosen_candidate"])
    return run
