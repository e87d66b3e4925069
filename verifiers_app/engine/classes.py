"""The verifier-class registry (docs/verifier-semantics.md "Verifier classes"): config-level reward logic.

A class declares ``name``, a pydantic ``Config`` (``extra="forbid"``) for its
params, and ``verify(self, *, prompt, completion, target) ->
VerificationResult``. A spec selects it with ``kind: <name>``; its ``params``
are validated by ``Config`` and passed to the constructor as keywords.

Third-party packages ship classes through the entry-point group
``frontier.verifiers`` (``name = "pkg.module:Class"``). Plugins load once, on
the first lookup of a name that is not registered in-process; a plugin that
fails to import is a warning, never an error.

A class may declare ``target_fields`` (the ``target`` keys ``verify`` reads),
so a launch can warn about task data no chosen verifier reads; a class that
does not is taken to read every key.

A class may define ``explain(result) -> str`` to write the reason for a
sub-perfect reward; otherwise ``info["reason"]`` is used when it is a string,
else a generic reason showing the reward and ``info``.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict

from .quoting import quote

ENTRY_POINT_GROUP = "frontier.verifiers"
RESERVED_KINDS = frozenset({"native", "in_process"})

logger = logging.getLogger(__name__)


@dataclass
class VerificationResult:
    reward: float
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Verifier(Protocol):
    name: ClassVar[str]
    Config: ClassVar[type[BaseModel]]

    def verify(
        self, *, prompt: str, completion: str, target: dict[str, Any]
    ) -> VerificationResult: ...


VerifierClass = TypeVar("VerifierClass", bound=type[Verifier])

_CLASSES: dict[str, type[Verifier]] = {}
_plugins_loaded = False


def register_verifier(name: str) -> Callable[[VerifierClass], VerifierClass]:
    """Class decorator: register a verifier class under ``name`` (its ``kind``)."""
    if not isinstance(name, str) or not name:
        raise ValueError("a verifier class needs a non-empty name")
    if name in RESERVED_KINDS:
        raise ValueError(f"{name!r} is a built-in spec kind, not a verifier class name")

    def decorate(cls: VerifierClass) -> VerifierClass:
        _check_contract(cls, name)
        _CLASSES[name] = cls
        return cls

    return decorate


def _check_contract(cls: Any, name: str) -> None:
    config = getattr(cls, "Config", None)
    if not (isinstance(config, type) and issubclass(config, BaseModel)):
        raise TypeError(f"verifier class {name!r} needs a pydantic Config model")
    if not callable(getattr(cls, "verify", None)):
        raise TypeError(
            f"verifier class {name!r} needs a verify(*, prompt, completion, target) method"
        )


def load_plugins(*, force: bool = False) -> None:
    """Register the classes of the ``frontier.verifiers`` entry-point group.

    Runs once per process unless ``force``. A plugin that fails to load or
    breaks the contract is reported with a warning and left out.
    """
    global _plugins_loaded
    if _plugins_loaded and not force:
        return
    _plugins_loaded = True
    try:
        entry_points = metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception as exc:  # a broken installation must not stop scoring
        _warn(f"could not list {ENTRY_POINT_GROUP} entry points: {exc}")
        return
    for entry_point in entry_points:
        try:
            cls = entry_point.load()
            if entry_point.name in RESERVED_KINDS:
                raise ValueError(f"{entry_point.name!r} is a built-in spec kind")
            _check_contract(cls, entry_point.name)
        except Exception as exc:
            _warn(
                f"verifier plugin {entry_point.name!r} ({entry_point.value}) was not loaded: "
                f"{type(exc).__name__}: {exc}"
            )
            continue
        _CLASSES.setdefault(entry_point.name, cls)


def _warn(message: str) -> None:
    logger.warning(message)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def get_verifier_class(name: str) -> type[Verifier] | None:
    """The class registered as ``name`` (loading plugins if needed), or None."""
    cls = _CLASSES.get(name)
    if cls is None and not _plugins_loaded:
        load_plugins()
        cls = _CLASSES.get(name)
    return cls


def registered_verifiers() -> list[str]:
    """Names of every registered verifier class (plugins included), sorted."""
    load_plugins()
    return sorted(_CLASSES)


def explain(verifier: Any, kind: str, result: VerificationResult, reward: float) -> str:
    """The reason for a sub-perfect reward from a verifier class."""
    custom = getattr(verifier, "explain", None)
    if callable(custom):
        reason = custom(result)
        if reason:
            return str(reason)
    info = result.info if isinstance(result.info, dict) else {}
    info_reason = info.get("reason")
    if isinstance(info_reason, str) and info_reason:
        return info_reason
    try:
        details = json.dumps(info, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        details = str(info)
    return f"verifier {quote(kind)} gave reward {reward:.2f} (info: {details})"


# --- built-in ----------------------------------------------------------------


class FormatOnlyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    has_think_reward: float = 0.5
    has_answer_reward: float = 0.5


@register_verifier("format_only")
class FormatOnlyVerifier:
    """Rewards structure only: ``<think>…</think>`` and ``<answer>…</answer>``."""

    name: ClassVar[str] = "format_only"
    Config: ClassVar[type[BaseModel]] = FormatOnlyConfig
    #: The keys of `target` verify reads (engine.reads): none, only the completion.
    target_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *, has_think_reward: float = 0.5, has_answer_reward: float = 0.5) -> None:
        self.has_think_reward = has_think_reward
        self.has_answer_reward = has_answer_reward

    def verify(self, *, prompt: str, completion: str, target: dict[str, Any]) -> VerificationResult:
        has_think = "<think>" in completion and "</think>" in completion
        has_answer = "<answer>" in completion and "</answer>" in completion
        reward = (self.has_think_reward if has_think else 0.0) + (
            self.has_answer_reward if has_answer else 0.0
        )
        return VerificationResult(
            reward=reward, info={"has_think": has_think, "has_answer": has_answer}
        )

    def explain(self, result: VerificationResult) -> str:
        missing = [
            f"wrap {what} in {quote(f'<{tag}>')} … {quote(f'</{tag}>')}"
            for tag, what, present in (
                ("think", "the reasoning", result.info.get("has_think")),
                ("answer", "the final answer", result.info.get("has_answer")),
            )
            if not present
        ]
        return "; ".join(missing) or "format reward below 1"
