"""The ``demo`` provider: an offline, deterministic, seeded simulator of a task
model and of a reflection model. It is labelled as a simulator everywhere.

See ``rules.py`` (the grammar and probability model), ``task_model.py`` (how a
reply is composed), ``feedback.py`` (how verifier reasons are read) and
``reflection.py`` (how feedback becomes sharper prompt rules).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..base import LMError, LMResponse
from ..config import DEMO_LABEL, LMConfig
from .reflection import (
    looks_like_reflection_prompt,
    records_from_dataset,
    reflect,
    reflection_reply,
)
from .task_model import simulate_reply
from .text import digest

__all__ = [
    "DemoCandidateProposer",
    "DemoLanguageModel",
    "DemoReflectionLM",
    "labelled_reasoning",
    "reasoning_text",
    "reflect",
    "simulate_reply",
]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


def approx_tokens(text: str) -> int:
    return math.ceil(len(text) / 4) if text else 0


def _pause(config: LMConfig) -> None:
    if config.simulated_latency_ms > 0:
        time.sleep(config.simulated_latency_ms / 1000.0)


class DemoLanguageModel:
    """Simulated task model. ``complete`` reads the system messages as the prompt and
    the last user message as the task; given gepa's reflection prompt it answers as
    the simulated reflection instead."""

    is_simulator = True
    label = DEMO_LABEL

    def __init__(self, config: LMConfig) -> None:
        self.config = config

    def __repr__(self) -> str:
        return f"DemoLanguageModel(seed={self.config.seed})"

    def complete(self, messages: list[dict[str, str]]) -> LMResponse:
        started = time.perf_counter()
        system = "\n\n".join(
            _text_of(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
        )
        users = [_text_of(m.get("content")) for m in messages if m.get("role") == "user"]
        user = users[-1] if users else ""
        if looks_like_reflection_prompt(user):
            try:
                text, _ = reflection_reply(user)
            except ValueError as error:
                raise LMError(f"{DEMO_LABEL}: {error}.") from None
        else:
            text = simulate_reply(system, user, self.config.seed)
        _pause(self.config)
        return LMResponse(
            text=text,
            tokens_in=sum(approx_tokens(_text_of(m.get("content"))) for m in messages),
            tokens_out=approx_tokens(text),
            latency_ms=(time.perf_counter() - started) * 1000.0,
            model=self.config.model,
        )


class DemoReflectionLM:
    """gepa ``reflection_lm`` callable: gepa's reflection prompt in, a reply with the
    new instruction in a ``` block out (reasoning before the block)."""

    is_simulator = True
    label = DEMO_LABEL

    def __init__(self, config: LMConfig) -> None:
        self.config = config
        self.last_reasoning = ""

    def __repr__(self) -> str:
        return "DemoReflectionLM()"

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        if not isinstance(prompt, str):
            prompt = "\n".join(_text_of(m.get("content")) for m in prompt if isinstance(m, Mapping))
        reply, self.last_reasoning = reflection_reply(prompt)
        _pause(self.config)
        return reply


class DemoCandidateProposer:
    """gepa ``custom_candidate_proposer``: rewrites each component to update from the
    Feedback of its reflective dataset. ``last_reasoning`` explains the last proposal;
    ``propose`` returns each proposal with its own reasoning (what runs use, several
    proposals of a round at once).

    It remembers what it proposed for each (component text, feedback): asked again
    about the same text with the same feedback, its last proposal evidently did not
    help (gepa kept the parent), so it reflects on that proposal instead and states
    its rules more sharply, as a real reflection model sampling again would try
    something else. Without this, a train set whose minibatch is always the same
    (one train task) gets the same rejected proposal forever. With parallel
    proposals (``remember=False``) a round's proposals are asked for together,
    before gepa keeps or drops any, so an earlier one was not rejected: each is
    answered afresh."""

    is_simulator = True
    label = DEMO_LABEL
    MAX_REMEMBERED = 1_000

    def __init__(self, config: LMConfig, *, remember: bool = True) -> None:
        self.config = config
        self.remember = remember
        self.last_reasoning = ""
        self.last_reasoning_by_component: dict[str, str] = {}
        self._proposed: dict[tuple[str, str, str], str] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "DemoCandidateProposer()"

    def remembered(self) -> list[list[str]]:
        """What it remembers, as plain lists (a paused run carries it in its checkpoint)."""
        with self._lock:
            return [[*key, text] for key, text in self._proposed.items()]

    def recall(self, saved: list[list[str]]) -> None:
        """Remember again what `remembered` gave (a resumed run)."""
        with self._lock:
            self._proposed = {
                (name, text, feedback): proposal for name, text, feedback, proposal in saved
            }

    def propose(
        self,
        candidate: dict[str, str],
        reflective_dataset: Mapping[str, Sequence[Mapping[str, Any]]],
        components_to_update: list[str],
    ) -> tuple[dict[str, str], dict[str, str]]:
        """(new texts, reasoning per component). Safe to call from several threads
        at once (a round of parallel proposals): each call keeps its own reasoning."""
        proposal: dict[str, str] = {}
        reasons: dict[str, str] = {}
        for name in components_to_update:
            records = records_from_dataset(reflective_dataset.get(name))
            current = candidate.get(name, "")
            key = (name, digest(current), digest("\x00".join(r.feedback for r in records)))
            with self._lock:
                previous = self._proposed.get(key) if self.remember else None
            if previous is not None and previous != current:
                proposal[name], why = reflect(previous, records)
                reasons[name] = (
                    "The same prompt and feedback again: my last proposal was not kept, "
                    "so its rules are stated more sharply.\n" + why
                )
            else:
                proposal[name], reasons[name] = reflect(current, records)
            if self.remember:
                with self._lock:
                    if key in self._proposed or len(self._proposed) < self.MAX_REMEMBERED:
                        self._proposed[key] = proposal[name]
        _pause(self.config)
        return proposal, reasons

    def __call__(
        self,
        candidate: dict[str, str],
        reflective_dataset: Mapping[str, Sequence[Mapping[str, Any]]],
        components_to_update: list[str],
    ) -> dict[str, str]:
        proposal, reasons = self.propose(candidate, reflective_dataset, components_to_update)
        self.last_reasoning_by_component = reasons
        self.last_reasoning = reasoning_text(reasons)
        return proposal


def labelled_reasoning(reasons: Mapping[str, str]) -> dict[str, str]:
    """Per-component reasoning labelled with its component when there are several,
    so that their texts joined by a blank line read as one reasoning."""
    if len(reasons) == 1:
        return dict(reasons)
    return {name: f"[{name}]\n{why}" for name, why in reasons.items()}


def reasoning_text(reasons: Mapping[str, str]) -> str:
    """A proposal's whole reasoning: its components' reasoning, labelled when several."""
    return "\n\n".join(labelled_reasoning(reasons).values())
