"""The verify= loop (docs/verifier-semantics.md "The verify loop"): a judge may reject an answer and the task is
re-asked with the judge's verdict as feedback, at most `max_verify` attempts.
The last attempt is kept (and scored by the caller) whatever its verdict.

A judge is a callable `(task, output) -> verdict`; a verdict starting with
"approved" (case-insensitive) accepts. Two judges exist: the run's own verifiers
(approved when the verdict is pass) and an LLM judge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from optimizer.lm.base import LanguageModel, LMResponse
from optimizer.runs.event_types import PREVIEW_CHARS
from verifiers_app.engine import Result
from verifiers_app.engine.json_types import JSONObject

Judge = Callable[[str, str], str]
MAX_VERDICT_CHARS = 1000


@dataclass(frozen=True)
class Attempt:
    output: str
    verdict: str
    approved: bool
    latency_ms: float
    tokens_in: int
    tokens_out: int

    def as_dict(self) -> JSONObject:
        return asdict(self)


def is_approved(verdict: str) -> bool:
    return verdict.strip().lower().startswith("approved")


def retry_prompt(task: str, verdict: str) -> str:
    return f"{task}\n\nFeedback: {verdict}"


def answer_with_verify(
    *, ask: Callable[[str], LMResponse], task: str, judge: Judge, max_verify: int
) -> tuple[LMResponse, list[Attempt]]:
    """Ask, judge, re-ask with the verdict; return the last response and every attempt.

    The retry is built from the original task and the latest verdict only, so
    feedback never piles up across attempts.
    """
    if max_verify < 1:
        raise ValueError("max_verify must be at least 1")
    attempts: list[Attempt] = []
    prompt = task
    for _ in range(max_verify):
        response = ask(prompt)
        verdict = str(judge(task, response.text))[:MAX_VERDICT_CHARS]
        approved = is_approved(verdict)
        attempts.append(
            Attempt(
                output=response.text[:PREVIEW_CHARS],
                verdict=verdict,
                approved=approved,
                latency_ms=response.latency_ms,
                tokens_in=response.tokens_in,
                tokens_out=response.tokens_out,
            )
        )
        if approved:
            break
        prompt = retry_prompt(task, verdict)
    return response, attempts


def verifier_judge(score_output: Callable[[str], Result]) -> Judge:
    """Approve when the run's verifiers give the verdict `pass`; else reject with their feedback."""

    def judge(task: str, output: str) -> str:
        result = score_output(output)
        if result.verdict == "pass":
            return "approved"
        return (
            f"rejected: {result.feedback or f'verdict {result.verdict} (score {result.score:.2f})'}"
        )

    return judge


def llm_judge(model: LanguageModel, instructions: str) -> Judge:
    """An LLM judge: its reply must start with "approved" or be a rejection reason."""

    def judge(task: str, output: str) -> str:
        reply = model.complete(
            [
                {"role": "system", "content": instructions},
                {"role": "user", "content": f"Task:\n{task}\n\nAnswer:\n{output}"},
            ]
        )
        return reply.text.strip()

    return judge
