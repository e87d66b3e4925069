"""Our GEPAAdapter (docs/verifier-semantics.md "The GEPA adapter contract"): run a candidate prompt on task rows and score it.

A candidate's components become the system prompt, a task's input the user
message. Every output is scored by ONE compiled scorer (the run's frozen specs,
plus each task row's own verifier). A failure of one example scores 0 with the
error as its feedback; only systemic failures raise (a configuration error of
the model, or too many consecutive failures), which fails the run.

What gepa keeps (outputs, trajectories) ends up pickled in the run_dir
checkpoint, so outputs handed to gepa are bounded text; the full record of each
evaluation (check breakdown, attempts, tokens) waits in `records` until the
recorder takes it.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from gepa import EvaluationBatch
from gepa.core.adapter import ProposalFn

from optimizer.lm.base import LanguageModel, LMConfigError, LMResponse, LMUnavailable
from optimizer.runs.budget import BudgetGuard, BudgetReached, UsageMeter
from optimizer.runs.verify_loop import Attempt, Judge, answer_with_verify
from verifiers_app.engine import Scorer
from verifiers_app.engine.json_types import JSONObject

MAX_OUTPUT_CHARS = 20_000
MAX_CONSECUTIVE_FAILURES = 8
# An endpoint that has answered nothing for this long, while its calls end in
# timeouts or refused connections, is down: the run fails now (naming it) rather
# than after every remaining call has timed out too. Resume it once it is back.
DEAD_ENDPOINT_SECONDS = 30.0
EMPTY_OUTPUT = "empty output (the task model answered with no text)"
# The feedback of an example the task model failed (then its Evaluation has no output).
MODEL_FAILED = "The task model failed: "
ROW_VERIFIER_ID = "row"


class Carried(Protocol):
    """What the adapter hands gepa to keep in its checkpoint (optimizer.runs.checkpoint.CarriedState)."""

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, saved: dict[str, Any]) -> None: ...


class SystemicFailure(RuntimeError):
    """The run cannot go on (bad model configuration, every call failing)."""


class Trace(TypedDict):
    """What gepa keeps of one evaluation to reflect on (EvaluationBatch.trajectories)."""

    task_key: str
    input: str
    output: str
    score: float
    verdict: str
    feedback: str


#: What an evaluation gives gepa: a trace per task, the output text as its rollout.
Batch = EvaluationBatch[Trace, str]

#: The reviewer notes a reflection reads now, per task key: each note's `id`,
#: `task_key`, `author` and `text` (optimizer/reviewer_notes.py, `notes_on_tasks`).
NotesSource = Callable[[list[str]], dict[str, list[JSONObject]]]


class NotesRead(TypedDict):
    """What one reflective dataset held: its minibatch and the notes in it."""

    minibatch: list[str]
    notes: list[JSONObject]


class Spent(TypedDict):
    """What one evaluation took: the attempts, time, tokens and money of an EvalRecord."""

    attempts: list[JSONObject]
    latency_ms: float
    tokens_in: int
    tokens_out: int
    judge_tokens_in: int
    judge_tokens_out: int
    cost: float


def system_prompt(candidate: dict[str, str]) -> str:
    """One component is the prompt itself; several are joined under their names."""
    if len(candidate) == 1:
        return next(iter(candidate.values()))
    return "\n\n".join(f"## {name}\n\n{text}" for name, text in candidate.items())


def candidate_digest(candidate: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(candidate, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class EvalRecord:
    """Everything an Evaluation row stores about one candidate on one task."""

    task_key: str
    output: str
    score: float
    verdict: str
    passed: bool
    result: JSONObject
    feedback: str
    objective_scores: dict[str, float]
    attempts: list[JSONObject] = field(default_factory=list)
    latency_ms: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    judge_tokens_in: int = 0
    judge_tokens_out: int = 0
    cost: float = 0.0  # task model and judge, at the endpoints' prices
    # The task model gave no answer to score (the call failed, or answered nothing):
    # the 0 is the endpoint's failure, not a measure of the prompt.
    failed: bool = False


class FrontierAdapter:
    # gepa calls adapter.propose_new_texts when it is not None; reflection is
    # done by the reflection LM / custom proposer passed to gepa.optimize.
    propose_new_texts: ProposalFn | None = None

    def __init__(
        self,
        *,
        task_lm: LanguageModel,
        scorer: Scorer,
        concurrency: int = 4,
        judge_factory: Callable[[JSONObject, str], Judge] | None = None,
        max_verify: int = 1,
        max_consecutive_failures: int = MAX_CONSECUTIVE_FAILURES,
        should_abort: Callable[[], bool] = lambda: False,
        dead_endpoint_seconds: float = DEAD_ENDPOINT_SECONDS,
        meter: UsageMeter | None = None,
        limits: BudgetGuard | None = None,
        carried: Carried | None = None,
        notes_source: NotesSource | None = None,
    ) -> None:
        self.task_lm = task_lm
        self.carried = carried
        # Evaluations already recorded, answered from their record with no model call
        # (answer_from_records): keyed like `records`, each used once.
        self.recorded: dict[tuple[str, str], EvalRecord] = {}
        self.notes_source = notes_source
        # The notes the last reflective dataset held, taken by the recorder's relay
        # with the proposal that read them (optimizer/runs/recording_thread.py).
        self.notes_read: NotesRead | None = None
        self.scorer = scorer
        self.concurrency = concurrency
        self.judge_factory = judge_factory
        self.max_verify = max_verify
        self.max_consecutive_failures = max_consecutive_failures
        self.should_abort = should_abort
        self.meter = meter
        self.limits = limits
        self.records: dict[tuple[str, str], EvalRecord] = {}
        # One pool for the adapter's life: starting `concurrency` threads for every
        # evaluation cost ~2 ms a thread on the engine's critical path (bench/run_throughput.py).
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, concurrency), thread_name_prefix="frontier-eval"
        )
        weakref.finalize(self, self._pool.shutdown, wait=False)
        self._lock = threading.Lock()
        self._consecutive_failures = 0
        self._last_error = ""
        self.dead_endpoint_seconds = dead_endpoint_seconds
        self._last_answer_at: float | None = (
            None  # monotonic: the task model's last answer (or our first call)
        )

    # -- gepa contract --------------------------------------------------------

    def evaluate(
        self, batch: list[JSONObject], candidate: dict[str, str], capture_traces: bool = False
    ) -> Batch:
        return self.batch_evaluate([(candidate, batch)], capture_traces=capture_traces)[0]

    def batch_evaluate(
        self, items: list[tuple[dict[str, str], list[JSONObject]]], capture_traces: bool = True
    ) -> list[Batch]:
        """Several (candidate, batch) pairs at once: gepa's round of parallel
        proposals (its parents, then its children, then the accepted ones on the
        valset). Every task call of the round shares the one pool, so the round
        takes as many waves as its calls need at the run's concurrency, not one
        evaluation after another."""
        if self.should_abort():
            raise SystemicFailure("the run was cancelled")
        if self.limits is not None:
            self.limits.check_batch(
                sum(len(batch) for _, batch in items)
            )  # nothing beyond the budget is run
        with self._lock:
            if self._last_answer_at is None:
                self._last_answer_at = time.monotonic()
        calls = [
            (candidate_digest(candidate), system_prompt(candidate), row)
            for candidate, batch in items
            for row in batch
        ]
        flat = iter(list(self._pool.map(lambda call: self._answer_one(*call), calls)))
        results: list[Batch] = []
        for candidate, batch in items:
            records = [next(flat) for _ in batch]
            results.append(self._batch_result(candidate, batch, records, capture_traces))
        return results

    def _batch_result(
        self,
        candidate: dict[str, str],
        batch: list[JSONObject],
        records: list[EvalRecord],
        capture_traces: bool,
    ) -> Batch:
        digest = candidate_digest(candidate)
        with self._lock:
            for record in records:
                self.records[(digest, record.task_key)] = record
        trajectories: list[Trace] | None = None
        if capture_traces:
            trajectories = [
                {
                    "task_key": r.task_key,
                    "input": row["input"],
                    "output": r.output,
                    "score": r.score,
                    "verdict": r.verdict,
                    "feedback": r.feedback,
                }
                for row, r in zip(batch, records, strict=True)
            ]
        return EvaluationBatch(
            outputs=[r.output for r in records],
            scores=[r.score for r in records],
            trajectories=trajectories,
            objective_scores=[r.objective_scores for r in records],
        )

    def carried_state(self) -> dict[str, Any]:
        """What gepa keeps in its checkpoint for us, read for each checkpoint
        written (optimizer.runs.checkpoint.ThrottledSave). Not gepa's
        `get_adapter_state`, which gepa 0.1.4 reads before every save, written or not."""
        return self.carried.snapshot() if self.carried is not None else {}

    def set_adapter_state(self, state: dict[str, Any]) -> None:
        """What the checkpoint kept for us, handed back on resume (before the first iteration)."""
        if self.carried is not None:
            self.carried.restore(state)

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: Batch, components_to_update: list[str]
    ) -> dict[str, list[JSONObject]]:
        """One record per minibatch task: its input, the output and the verifiers'
        feedback, then any reviewer notes on that task as they are now, each under
        its own heading (gepa's reflection prompt renders every key of a record
        as a "## key" section: docs/gepa-notes.md §18)."""
        self.notes_read = None
        traces = list(eval_batch.trajectories or [])
        keys = [str(trace.get("task_key", "")) for trace in traces]
        notes = self.notes_source([k for k in keys if k]) if self.notes_source else {}
        records: list[JSONObject] = []
        read: list[JSONObject] = []
        for key, trace in zip(keys, traces, strict=True):
            record: JSONObject = {
                "Inputs": {"task": trace["input"]},
                "Generated Outputs": trace["output"],
                "Feedback": feedback_with_score(trace),
            }
            on_task = notes.get(key, []) if key else []
            for n, note in enumerate(on_task, start=1):
                record[note_heading(str(note["author"]), n, len(on_task))] = note["text"]
            read.extend(on_task)
            records.append(record)
        self.notes_read = {"minibatch": keys, "notes": read}
        return dict.fromkeys(components_to_update, records)

    def take_notes_read(self) -> NotesRead | None:
        """The notes of the reflective dataset built last (once: then None)."""
        read, self.notes_read = self.notes_read, None
        return read

    # -- our side -------------------------------------------------------------

    def close(self) -> None:
        """Let the evaluation threads end (also done when the adapter is collected).
        Calls still in flight after an abort finish on their own; nothing waits for them."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def take_record(self, candidate: dict[str, str], task_key: str) -> EvalRecord | None:
        with self._lock:
            return self.records.pop((candidate_digest(candidate), task_key), None)

    def take_all_records(self) -> dict[tuple[str, str], EvalRecord]:
        """Every record waiting, keyed by (candidate_digest, task_key); the adapter keeps none."""
        with self._lock:
            records, self.records = self.records, {}
        return records

    def forget_records(self) -> None:
        with self._lock:
            self.records.clear()

    def answer_from_records(self, records: dict[tuple[str, str], EvalRecord]) -> None:
        """Evaluations already recorded, keyed (candidate_digest, task_key): asked for
        again, each is answered once from its record, with no model call and nothing
        metered. On resume gepa 0.1.4 evaluates the seed on the whole valset again
        and throws the result away (docs/gepa-notes.md §6): that costs nothing then."""
        with self._lock:
            self.recorded.update(records)

    def _answer_one(self, digest: str, prompt: str, row: JSONObject) -> EvalRecord:
        if self.recorded:
            with self._lock:
                known = self.recorded.pop((digest, row["task_id"]), None)
            if known is not None:
                return known
        return self._run_one(row, prompt)

    def _run_one(self, row: JSONObject, prompt: str) -> EvalRecord:
        if self.should_abort():
            raise SystemicFailure("the run was cancelled")
        # What this thread's calls cost (the task answer and any judge verdicts). Without a
        # judge there is one call, priced from its own tokens below: no tally to keep.
        usage = (
            self.meter.open_tally()
            if self.meter is not None and self.judge_factory is not None
            else None
        )
        try:
            response, attempts = self._answer(row, prompt)
        except BudgetReached:
            raise
        except LMConfigError as error:
            raise SystemicFailure(str(error)) from error
        except LMUnavailable as error:
            return self._failed(
                row,
                f"{type(error).__name__}: {error}",
                latency_ms=error.latency_ms,
                unavailable=True,
            )
        except Exception as error:  # one example failed: score 0, the error is its feedback
            return self._failed(
                row,
                f"{type(error).__name__}: {error}",
                latency_ms=getattr(error, "latency_ms", 0.0),
            )
        finally:
            if usage is not None and self.meter is not None:
                self.meter.close_tally(usage)
        spent: Spent = {
            "attempts": [a.as_dict() for a in attempts],
            "latency_ms": sum(a.latency_ms for a in attempts) if attempts else response.latency_ms,
            "tokens_in": sum(a.tokens_in for a in attempts) if attempts else response.tokens_in,
            "tokens_out": sum(a.tokens_out for a in attempts) if attempts else response.tokens_out,
            "judge_tokens_in": usage.judge_in if usage else 0,
            "judge_tokens_out": usage.judge_out if usage else 0,
            "cost": usage.cost if usage else self._task_cost(response),
        }
        with self._lock:
            self._last_answer_at = time.monotonic()
        if not response.text.strip():
            # A model that answers nothing is failing, not scoring low: it counts
            # towards the consecutive failures, so an all-empty run fails loudly.
            return self._failed(row, EMPTY_OUTPUT, **spent)
        with self._lock:
            self._consecutive_failures = 0
        output = response.text[:MAX_OUTPUT_CHARS]
        result = self.scorer.score(output, task=row, prompt=prompt)
        return EvalRecord(
            task_key=row["task_id"],
            output=output,
            score=result.score,
            verdict=result.verdict,
            passed=result.passed,
            result=result.as_dict(),
            feedback=result.feedback,
            objective_scores={v.id: v.score for v in result.verifiers},
            **spent,
        )

    def _task_cost(self, response: LMResponse) -> float:
        """One task-model answer at the task endpoint's price (what the meter counted for it)."""
        if self.meter is None:
            return 0.0
        return self.meter.prices["task"].cost(response.tokens_in, response.tokens_out)

    def _answer(self, row: JSONObject, prompt: str) -> tuple[LMResponse, list[Attempt]]:
        def ask(user_text: str) -> LMResponse:
            return self.task_lm.complete(
                [{"role": "system", "content": prompt}, {"role": "user", "content": user_text}]
            )

        if self.judge_factory is None:
            return ask(row["input"]), []
        return answer_with_verify(
            ask=ask,
            task=row["input"],
            judge=self.judge_factory(row, prompt),
            max_verify=self.max_verify,
        )

    def _failed(
        self,
        row: JSONObject,
        message: str,
        *,
        unavailable: bool = False,
        attempts: list[JSONObject] | None = None,
        latency_ms: float = 0.0,
        tokens_in: int = 0,
        tokens_out: int = 0,
        judge_tokens_in: int = 0,
        judge_tokens_out: int = 0,
        cost: float = 0.0,
    ) -> EvalRecord:
        with self._lock:
            self._consecutive_failures += 1
            failures = self._consecutive_failures
            silent_for = time.monotonic() - (self._last_answer_at or time.monotonic())
        if failures >= self.max_consecutive_failures:
            raise SystemicFailure(
                f"{failures} task-model calls failed in a row; the last: {message}"
            )
        if unavailable and silent_for >= self.dead_endpoint_seconds:
            raise SystemicFailure(
                f"The task model has not answered for {silent_for:.0f} s: {message.removeprefix('LMUnavailable: ')}"
            )
        ids = self.scorer.verifier_ids + ([ROW_VERIFIER_ID] if row.get("verifier") else [])
        return EvalRecord(
            task_key=row["task_id"],
            output="",
            score=0.0,
            verdict="fail",
            passed=False,
            result={},
            feedback=f"{MODEL_FAILED}{message}",
            objective_scores=dict.fromkeys(ids, 0.0),
            attempts=attempts or [],
            latency_ms=latency_ms,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            judge_tokens_in=judge_tokens_in,
            judge_tokens_out=judge_tokens_out,
            cost=cost,  # an empty answer was still paid for
            failed=True,
        )


REVIEWER_NOTE = "Reviewer note"


def note_heading(author: str, n: int, of: int) -> str:
    """A note's key in its reflective-dataset record: marked as a reviewer's, not a verifier's."""
    number = f" {n}" if of > 1 else ""
    return f"{REVIEWER_NOTE}{number} (from {author or 'a reviewer'})"


def feedback_with_score(trace: Trace) -> str:
    feedback = trace["feedback"] or "Every check passed."
    return f"Score {trace['score']:.2f} ({trace['verdict']}). {feedback}"
