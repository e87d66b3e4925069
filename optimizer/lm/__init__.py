"""Language-model providers: one interface, two providers.

- ``openai``: any OpenAI-compatible chat endpoint, through the ``openai`` client.
- ``demo``: an offline, deterministic, seeded simulator (labelled as such).

Pure Python: nothing here imports Django, so the package is usable and testable
on its own.

    lm = build_lm({"provider": "demo", "model": "demo"})
    lm.complete([{"role": "system", "content": prompt}, {"role": "user", "content": task}])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .base import LanguageModel, LMConfigError, LMError, LMResponse, LMUnavailable
from .config import DEMO_LABEL, LMConfig, coerce_config, format_config_error

if TYPE_CHECKING:
    from .simulator import DemoCandidateProposer

__all__ = [
    "DEMO_LABEL",
    "LMConfig",
    "LMConfigError",
    "LMError",
    "LMResponse",
    "LMUnavailable",
    "LanguageModel",
    "build_candidate_proposer",
    "build_lm",
    "build_reflection_lm",
    "check_endpoint",
]


def _config(config: LMConfig | dict) -> LMConfig:
    try:
        return coerce_config(config)
    except ValidationError as error:
        raise LMConfigError(format_config_error(error)) from None


def build_lm(config: LMConfig | dict) -> LanguageModel:
    """The task model for ``config``. Raises LMConfigError for an invalid config or
    (openai) an unset API-key variable."""
    config = _config(config)
    if config.provider == "demo":
        from .simulator import DemoLanguageModel

        return DemoLanguageModel(config)
    from .openai_provider import OpenAIChatModel

    return OpenAIChatModel(config)


class ReflectionCallable:
    """gepa ``reflection_lm`` over any LanguageModel: prompt in, reply text out.
    LMError propagates (gepa swallows it; the runner must surface it)."""

    def __init__(self, lm: LanguageModel) -> None:
        self.lm = lm
        self.label = lm.label
        self.is_simulator = lm.is_simulator
        self.last_response: LMResponse | None = None

    def __repr__(self) -> str:
        return f"ReflectionCallable({self.lm!r})"

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        messages = (
            [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        )
        self.last_response = self.lm.complete(messages)
        return self.last_response.text


def build_reflection_lm(config: LMConfig | dict) -> Callable[[str], str]:
    """A gepa ``reflection_lm`` callable for ``config``."""
    config = _config(config)
    if config.provider == "demo":
        from .simulator import DemoReflectionLM

        return DemoReflectionLM(config)
    return ReflectionCallable(build_lm(config))


def build_candidate_proposer(
    config: LMConfig | dict, *, remember: bool = True
) -> DemoCandidateProposer | None:
    """For ``demo``: a gepa ``custom_candidate_proposer`` (with ``last_reasoning``,
    and ``propose`` giving each proposal's own reasoning);
    ``remember``: sharpen a proposal asked for again (DemoCandidateProposer).
    For ``openai``: None — pass ``build_reflection_lm(config)`` to gepa instead."""
    config = _config(config)
    if config.provider == "demo":
        from .simulator import DemoCandidateProposer

        return DemoCandidateProposer(config, remember=remember)
    return None


def check_endpoint(config: LMConfig | dict) -> str | None:
    """A cheap dry-run check: one sentence describing the problem, or None if the
    endpoint looks usable. Never raises for endpoint problems."""
    try:
        config = _config(config)
    except LMConfigError as error:
        return str(error)
    if config.provider == "demo":
        return None
    from .openai_provider import check_openai_endpoint

    return check_openai_endpoint(config)
