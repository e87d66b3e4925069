"""Provider for any OpenAI-compatible chat endpoint (OpenAI, Ollama, vLLM, llama.cpp).

Retries are ours (`RetryPolicy`, a loop around one call of the client built with
``max_retries=0``), so nothing here depends on the openai client's private
methods. They keep the rules the client's own retries had (openai 3.52,
``SyncAPIClient._should_retry`` / ``_calculate_retry_timeout``): connection
errors, timeouts, 408, 409, 429 and every 5xx are retried, up to
``LMConfig.max_retries`` times; a server's ``x-should-retry: true|false`` is
obeyed; a ``Retry-After`` (or ``retry-after-ms``) of up to two minutes is the
wait, a longer one means no retry; otherwise the wait is
``retry_initial_delay * 2**n`` (at most 16 × the initial delay) minus up to 25 %
jitter.

The API key is read from the environment variable named in the config at build
time. It never appears in a repr, a log line or an exception message, and our
exceptions are raised outside any ``except`` block so they do not carry the
openai exception (whose request holds the Authorization header) as context.
"""

from __future__ import annotations

import email.utils
import math
import os
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx2
import openai

from .base import LMConfigError, LMError, LMResponse, LMUnavailable
from .config import LMConfig

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
# Local servers (Ollama, llama.cpp, vLLM without --api-key) ignore the key, but the
# client insists on a non-empty one.
PLACEHOLDER_KEY = "not-needed"
MAX_ERROR_DETAIL = 200


# A server may ask for a wait of up to two minutes (Retry-After); a longer one
# means "do not retry" (as the openai client decides).
MAX_RETRY_AFTER_SECONDS = 120.0
# The exponential backoff stops doubling at 16 x the initial delay (0.5 s → 8 s).
MAX_BACKOFF_FACTOR = 16.0
RETRIED_STATUSES = frozenset({408, 409, 429})


class _OpenAI(openai.OpenAI):
    """The stock client, with a repr that can never show more than the endpoint."""

    def __repr__(self) -> str:
        return f"<OpenAI client base_url={str(self.base_url)!r}>"


def _retry_after_seconds(headers: Any) -> float | None:
    """The wait a response asks for (``retry-after-ms``, then ``retry-after`` in
    seconds or as an HTTP date), or None when it names none."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        return seconds if math.isfinite(seconds) else MAX_RETRY_AFTER_SECONDS + 1
    try:
        parsed = email.utils.parsedate_tz(headers.get("retry-after") or "")
        return None if parsed is None else email.utils.mktime_tz(parsed) - time.time()
    except (TypeError, ValueError, OverflowError):
        return None


@dataclass(frozen=True)
class RetryPolicy:
    """Which failed calls are tried again, and after how long."""

    max_retries: int
    initial_delay: float

    def wait(
        self, retries_done: int, error: BaseException, *, jitter: float | None = None
    ) -> float | None:
        """Seconds to wait before trying again after `error`, having retried
        `retries_done` times already; None when the call must not be retried.
        `jitter` in [0, 1) (random when None) takes up to 25 % off a backoff."""
        if retries_done >= self.max_retries:
            return None
        server_wait = None
        if isinstance(error, openai.APIStatusError):
            headers = error.response.headers
            server_wait = _retry_after_seconds(headers)
            if server_wait is not None and server_wait > MAX_RETRY_AFTER_SECONDS:
                return None
            should_retry = headers.get("x-should-retry")
            if should_retry == "false":
                return None
            if (
                should_retry != "true"
                and error.status_code not in RETRIED_STATUSES
                and error.status_code < 500
            ):
                return None
        elif not isinstance(error, openai.APIConnectionError):  # timeouts are connection errors too
            return None
        if server_wait is not None and server_wait > 0:
            return server_wait  # the server said how long to wait: obey it
        backoff = self.initial_delay * min(2.0**retries_done, MAX_BACKOFF_FACTOR)
        return backoff * (1 - 0.25 * (random.random() if jitter is None else jitter))


def resolve_api_key(config: LMConfig) -> str:
    """The key from the named environment variable; LMConfigError if it is unset."""
    env_name = config.api_key_env
    if env_name is None:
        if config.base_url is not None:
            return os.environ.get(DEFAULT_KEY_ENV) or PLACEHOLDER_KEY
        env_name = DEFAULT_KEY_ENV
    key = os.environ.get(env_name, "").strip()
    if not key:
        raise LMConfigError(
            f"The environment variable {env_name} that should hold the API key for "
            f"{config.label} is not set (or is empty)."
        )
    return key


def _endpoint(config: LMConfig) -> str:
    return config.base_url or "https://api.openai.com/v1"


def _short(text: object) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_ERROR_DETAIL else text[: MAX_ERROR_DETAIL - 1] + "…"


def _server_message(error: openai.APIStatusError, key: str) -> str:
    """The server's own error message, bounded, with the key scrubbed if echoed."""
    body = error.body
    message: object = ""
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message", "") if isinstance(inner, dict) else inner
    elif body:
        message = body
    text = _short(message)
    if key and key != PLACEHOLDER_KEY and len(key) >= 4:
        text = text.replace(key, "[redacted]")
        # OpenAI echoes a masked key ("sk-ab***yz"); drop anything that starts like ours
        text = text.replace(key[:6], "[redacted]")
    return text


def _key_source(config: LMConfig) -> str:
    if config.api_key_env:
        return f"the API key in environment variable {config.api_key_env}"
    if config.base_url is None:
        return f"the API key in environment variable {DEFAULT_KEY_ENV}"
    return "the endpoint's authentication (set api_key_env to the variable holding a key)"


_http_client = None
_http_client_lock = threading.Lock()


def shared_http_client():
    """One HTTP connection pool for every OpenAI-compatible model of this process.
    Building a client (its TLS context) cost ~80 ms, twice per run (task and
    reflection model) on the run's critical path (bench/run_throughput.py); the
    pool is thread-safe, and timeouts travel with each request, so the models'
    own settings still hold. Made lazily: a forked worker builds its own."""
    global _http_client
    with _http_client_lock:
        if _http_client is None:
            _http_client = openai.DefaultHttpxClient()
        return _http_client


@dataclass
class UsageTotals:
    calls: int = 0
    failures: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float = 0.0


class OpenAIChatModel:
    """A task or reflection model behind an OpenAI-compatible ``/chat/completions``.

    Thread-safe: the adapter calls ``complete`` from many threads at once.
    """

    is_simulator = False

    def __init__(self, config: LMConfig) -> None:
        if config.provider != "openai":
            raise LMConfigError(
                f"OpenAIChatModel needs provider 'openai', not {config.provider!r}."
            )
        self.config = config
        self.label = config.label
        self._api_key = resolve_api_key(config)
        # One HTTP attempt per client call: `complete` retries (RetryPolicy).
        # One connection pool per process (shared_http_client); each request keeps its own timeout.
        self._client = _OpenAI(
            api_key=self._api_key,
            base_url=config.base_url,
            timeout=config.timeout,
            max_retries=0,
            http_client=shared_http_client(),
        )
        self._retry = RetryPolicy(
            max_retries=config.max_retries, initial_delay=config.retry_initial_delay
        )
        self._lock = threading.Lock()
        self._totals = UsageTotals()

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.label!r})"

    def usage(self) -> UsageTotals:
        """A snapshot of calls, failures, tokens and latency so far."""
        with self._lock:
            return UsageTotals(**vars(self._totals))

    def complete(self, messages: list[dict[str, str]]) -> LMResponse:
        config = self.config
        kwargs: dict[str, Any] = {
            "model": config.model,
            "messages": messages,
            "temperature": config.temperature,
        }
        if config.max_tokens is not None:
            kwargs["max_tokens"] = config.max_tokens
        started = time.perf_counter()
        failure: LMError | None = None
        read: tuple[str | None, int, int, str | None] = (None, 0, 0, None)
        attempts = 0
        while True:
            attempts += 1
            error: BaseException | None = None
            try:
                # The client's public `post` rather than `chat.completions.create`: the same
                # request, headers and errors, without the typed transform of the body and the
                # typed model of the answer, ~1.5 ms of CPU a call that the run's other calls
                # wait for (one interpreter lock; bench/run_throughput.py).
                answer = self._client.post(
                    "/chat/completions",
                    body=kwargs,
                    cast_to=httpx2.Response,
                    options={"security": {"bearer_auth": True}},
                )
                read = _read_completion(answer.json())
            except (
                openai.OpenAIError,
                ValueError,
                TypeError,
            ) as raised:  # ValueError/TypeError: an unreadable 200
                error = raised
            if error is None:
                break
            wait = self._retry.wait(attempts - 1, error)
            if wait is None:
                failure = self._failure(error, attempts)
                break
            time.sleep(wait)
        latency_ms = (time.perf_counter() - started) * 1000.0

        text, tokens_in, tokens_out, model = read
        if failure is None and text is not None:
            with self._lock:
                self._totals.calls += 1
                self._totals.tokens_in += tokens_in
                self._totals.tokens_out += tokens_out
                self._totals.latency_ms += latency_ms
            return LMResponse(
                text=text,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                latency_ms=latency_ms,
                model=model or config.model,
                attempts=attempts,
            )
        if failure is None:
            failure = LMError(
                f"{self.label} returned a malformed chat completion (no choices or message)."
            )
        with self._lock:
            self._totals.calls += 1
            self._totals.failures += 1
            self._totals.latency_ms += latency_ms
        failure.latency_ms = latency_ms
        raise failure

    def _failure(self, error: BaseException, attempts: int) -> LMError:
        """One sentence for a call that failed for good, naming the endpoint, never the key."""
        config = self.config
        tried = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if isinstance(error, openai.APITimeoutError):
            return LMUnavailable(
                f"{self.label} ({_endpoint(config)}) did not answer within {config.timeout:g} s ({tried})."
            )
        if isinstance(error, openai.APIConnectionError):
            cause = type(error.__cause__).__name__ if error.__cause__ else "connection error"
            return LMUnavailable(f"Could not connect to {_endpoint(config)} ({cause}, {tried}).")
        if isinstance(error, openai.AuthenticationError | openai.PermissionDeniedError):
            return LMConfigError(
                f"{_endpoint(config)} rejected {_key_source(config)} "
                f"(HTTP {error.status_code}); check that the key is valid for model {config.model!r}."
            )
        if isinstance(error, openai.NotFoundError):
            detail = _server_message(error, self._api_key)
            return LMConfigError(
                f"Model {config.model!r} was not found at {_endpoint(config)} (HTTP 404"
                + (f": {detail}" if detail else "")
                + "); check the model name and the base URL (it usually ends in /v1)."
            )
        if isinstance(error, openai.APIStatusError):
            detail = _server_message(error, self._api_key)
            retried = f", {tried}" if attempts > 1 else ""
            return LMError(
                f"{self.label} answered HTTP {error.status_code}{retried}"
                + (f": {detail}" if detail else "")
                + "."
            )
        if isinstance(error, openai.APIResponseValidationError):
            return LMError(f"{self.label} returned a response that is not a valid chat completion.")
        if isinstance(error, openai.OpenAIError):  # anything else the client raises
            return LMError(f"{self.label} call failed: {type(error).__name__}.")
        return LMError(f"{self.label} returned a malformed chat completion (unreadable body).")


def _read_completion(body: Any) -> tuple[str | None, int, int, str | None]:
    """(text, prompt tokens, completion tokens, model) of a chat completion's JSON;
    text None when it has no choice or message. Token counts that are not numbers
    raise ValueError/TypeError (an unreadable body)."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        return None, 0, 0, None
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return None, 0, 0, None
    text = message.get("content")
    if text is None:
        text = message.get("refusal") or ""
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    model = body.get("model") if isinstance(body.get("model"), str) else None
    return (
        str(text),
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
        model,
    )


def check_openai_endpoint(config: LMConfig, *, timeout: float = 5.0) -> str | None:
    """A cheap dry-run probe: ``GET /models`` once, no retries, short timeout.

    Returns one sentence describing the problem, or None when the endpoint answers,
    accepts the key and (if it lists models) serves the configured model.
    """
    try:
        key = resolve_api_key(config)
    except LMConfigError as error:
        return str(error)
    client = _OpenAI(
        api_key=key, base_url=config.base_url, timeout=min(timeout, config.timeout), max_retries=0
    )
    problem: str | None = None
    try:
        page = client.models.list()
        served = [getattr(model, "id", "") for model in getattr(page, "data", []) or []]
        if served and config.model not in served:
            shown = ", ".join(sorted(served)[:10]) + (" …" if len(served) > 10 else "")
            problem = (
                f"Model {config.model!r} is not served by {_endpoint(config)} (available: {shown})."
            )
    except openai.APITimeoutError:
        problem = f"{_endpoint(config)} did not answer within {min(timeout, config.timeout):g} s."
    except openai.APIConnectionError:
        problem = f"Could not connect to {_endpoint(config)}; check the base URL and that the server is running."
    except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
        problem = f"{_endpoint(config)} rejected {_key_source(config)} (HTTP {error.status_code})."
    except openai.NotFoundError:
        problem = f"{_endpoint(config)}/models was not found (HTTP 404); check the base URL (it usually ends in /v1)."
    except openai.APIStatusError as error:
        problem = f"{_endpoint(config)} answered HTTP {error.status_code} to a model listing."
    except (openai.OpenAIError, ValueError, TypeError) as error:
        problem = (
            f"{_endpoint(config)} returned an unexpected model listing ({type(error).__name__})."
        )
    finally:
        client.close()
    return problem
