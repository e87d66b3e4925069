"""The provider-neutral surface of a language model: one chat call, one response.

Everything the adapter and the runner need is here; nothing imports Django.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class LMResponse:
    """One completed chat call.

    ``attempts`` counts HTTP attempts including retries (1 = first try worked);
    ``latency_ms`` is the wall time of the whole call, retries and backoff included.
    """

    text: str
    tokens_in: int
    tokens_out: int
    latency_ms: float
    model: str
    attempts: int = 1


class LMError(Exception):
    """One call failed after its retries (a transient or per-example failure).

    The adapter scores that example 0 and uses ``str(error)`` as its feedback, so
    the message is one plain sentence and never contains a credential.
    ``latency_ms`` is how long the failed call took, retries included.
    """

    latency_ms: float = 0.0


class LMUnavailable(LMError):
    """The endpoint did not answer at all (timeouts, refused connections) after
    its retries: the adapter fails the run once nothing has answered for a while."""


class LMConfigError(LMError):
    """A systemic problem no retry can fix: missing key variable, rejected key,
    unknown model, unusable base URL. The run fails with ``str(error)``."""


@runtime_checkable
class LanguageModel(Protocol):
    label: str
    is_simulator: bool

    def complete(self, messages: list[dict[str, str]]) -> LMResponse: ...
