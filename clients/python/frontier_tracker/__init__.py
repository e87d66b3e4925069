"""frontier_tracker: watch a GEPA run that executes in your own code, live, in Frontier.

    tracker = FrontierTracker(name="my run", valset=valset)  # FRONTIER_URL, FRONTIER_TOKEN
    gepa.optimize(..., valset=valset, callbacks=[tracker], stop_callbacks=[tracker.stopper])

The tracker is a gepa callback (gepa calls it synchronously on the thread that
runs `optimize`). Each callback only turns gepa's event into a small JSON
event and puts it on a bounded queue; a background thread sends the queue to
Frontier in numbered batches. So the optimization never waits for the network:

- order is kept (one sender, batches numbered 1, 2, …, a batch is resent until
  the server acknowledges it; the server ignores a batch it already applied);
- while the server is unreachable the events wait in the queue (up to
  `queue_size`; past that new events are dropped and counted in `dropped`) and
  the batch is retried with backoff (at most `max_backoff` seconds apart);
- nothing raises into gepa: every problem goes to the `frontier_tracker` logger.

Model usage: when litellm is loaded (gepa's model strings and DSPy call models
through it), the tracker adds a litellm success callback that counts each
call's tokens and cost (litellm's `response_cost`); `tracker.report_usage(...)`
adds what other clients spent. The totals reach the run page with the budget;
without them the page says the cost was not reported.

`tracker.stopper` is a gepa stop callback. It never touches the network: a
second background thread asks the server every `poll_seconds` whether Stop was
pressed on the run's page (that poll is also the client's heartbeat), and the
stopper returns the last answer.

Only gepa and the standard library are needed (HTTP is urllib).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import logging
import math
import os
import platform
import queue
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from importlib import metadata
from typing import Any

__all__ = ["FrontierTracker", "__version__"]
__version__ = "0.1.0"

log = logging.getLogger("frontier_tracker")

# The server's limits (optimizer/external/services.py); the tracker clips to them so a
# long prompt or output never gets a whole batch refused.
MAX_TEXT = 200_000
MAX_KEY = 200
MAX_REASONING = 4_000
MAX_MESSAGE = 5_000
MAX_BATCH_EVENTS = 500
MAX_BATCH_BYTES = 1_000_000
_CLOSE = object()


def _field(obj: Any, name: str) -> Any:
    """A field of a dict or an attribute of an object (litellm gives either)."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _clip(value: Any, limit: int) -> str:
    if value is None:
        return ""
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    text = text.replace("\x00", "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _score(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _default_key(instance: Any) -> str | None:
    """A data instance's own id: `task_id`, `id` or `key` of a dict or an object."""
    for name in ("task_id", "id", "key"):
        value = instance.get(name) if isinstance(instance, dict) else getattr(instance, name, None)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


def _server(url: str | None, token: str | None) -> tuple[str, str]:
    """The server's URL and the token: the arguments, else FRONTIER_URL and
    FRONTIER_TOKEN. A missing one is an error at once (not a silent tracker)."""
    url = url or os.environ.get("FRONTIER_URL", "").strip()
    token = token or os.environ.get("FRONTIER_TOKEN", "").strip()
    missing = [
        f"{name} (or {arg}=)"
        for name, arg, value in (("FRONTIER_URL", "url", url), ("FRONTIER_TOKEN", "token", token))
        if not value
    ]
    if missing:
        raise ValueError(
            "FrontierTracker needs the server's URL and an API token: set "
            + " and ".join(missing)
            + ", e.g. export FRONTIER_URL=http://127.0.0.1:8000 and "
            "export FRONTIER_TOKEN=$(frontier token create --user NAME)"
        )
    return url.rstrip("/"), token


def _guarded(method):
    """A callback that never raises into gepa."""

    @functools.wraps(method)
    def call(self, event):
        try:
            method(self, event)
        except Exception:
            log.exception("frontier_tracker: %s failed (the optimization goes on)", method.__name__)

    return call


class FrontierTracker:
    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        name: str = "",
        valset: list | None = None,
        task_key: Callable[[Any], str | None] | None = None,
        task_set_id: int | None = None,
        key: str | None = None,
        max_output_chars: int = 4_000,
        batch_seconds: float = 0.5,
        queue_size: int = 10_000,
        poll_seconds: float = 2.0,
        timeout: float = 10.0,
        max_backoff: float = 5.0,
        flush_timeout: float = 60.0,
        litellm_usage: bool = True,
    ):
        """`url`: the Frontier server, default $FRONTIER_URL; `token`: an API token
        of yours (`frontier token create --user NAME`, or the API tokens page),
        default $FRONTIER_TOKEN; an explicit argument wins over the variable;
        `valset`: the valset you pass to gepa, so tasks are named by their
        `task_id`/`id` (else by position); `task_key(instance)` names a task your way;
        `task_set_id`: a Frontier task set with those task ids (compare with native runs);
        `key`: the run's id on this side (default: a new one per tracker);
        `litellm_usage`: count the tokens and cost of litellm's calls (see the module docstring)."""
        self.url, self.token = _server(url, token)
        self.name = name
        self.valset = list(valset) if valset is not None else None
        self.task_key = task_key
        self.task_set_id = task_set_id
        self.key = key or uuid.uuid4().hex
        self.max_output_chars = max_output_chars
        self.batch_seconds = batch_seconds
        self.poll_seconds = poll_seconds
        self.timeout = timeout
        self.max_backoff = max_backoff
        self.flush_timeout = flush_timeout
        self.run_id: int | None = None
        self.stop_requested = False
        self.dropped = 0
        self.sent_batches = 0
        self._queue: queue.Queue = queue.Queue(queue_size)
        self._lock = threading.Lock()
        self._started = False
        self._closing = False
        self._disabled = False
        self._finished = False
        self._deadline: float | None = None
        self._done = threading.Event()
        self._sender: threading.Thread | None = None
        self._poller: threading.Thread | None = None
        # What one gepa iteration is doing (touched only on gepa's thread).
        self._optimizing = False
        self._seen: set[int] = set()
        self._metric_calls = 0
        self._valset_size = 0
        self._last_error = ""
        self._usage = {"calls": 0, "tokens_in": 0, "tokens_out": 0}
        self._cost: float | None = None
        self._usage_sent = dict(self._usage)
        self._litellm_usage = litellm_usage
        self._litellm_hooked = False
        self._reset_iteration(0)
        atexit.register(self.close)

    # -- public -----------------------------------------------------------------

    def stopper(self, state: Any = None) -> bool:
        """A gepa stop callback: True once Stop was pressed on the run's page."""
        return self.stop_requested

    def report_usage(
        self, *, tokens_in: int = 0, tokens_out: int = 0, cost: float | None = None, calls: int = 1
    ) -> None:
        """Add model calls the run made (any thread may call this): they reach the
        page with the next budget update. `cost` in the currency of your prices;
        leave it None when unknown (the page then shows tokens only)."""
        with self._lock:
            self._usage["calls"] += max(0, int(calls))
            self._usage["tokens_in"] += max(0, int(tokens_in or 0))
            self._usage["tokens_out"] += max(0, int(tokens_out or 0))
            if cost is not None and math.isfinite(cost) and cost >= 0:
                self._cost = (self._cost or 0.0) + float(cost)

    def close(self, timeout: float | None = None) -> bool:
        """Send what is queued (waiting at most `timeout`, default `flush_timeout`
        seconds) and stop the threads. True when everything reached the server."""
        self._unhook_litellm()
        with self._lock:
            if not self._started or self._closing:
                return not self._started or not (self._sender and self._sender.is_alive())
            if not self._finished:
                self._finished = True
                self._put(
                    {
                        "type": "finished",
                        "status": "failed",
                        "error": _clip(
                            self._last_error
                            or "the process ended before gepa finished the optimization",
                            MAX_MESSAGE,
                        ),
                    }
                )
            self._closing = True
        wait = self.flush_timeout if timeout is None else timeout
        self._deadline = time.monotonic() + wait
        try:
            self._queue.put(_CLOSE, timeout=max(wait, 0.1))
        except queue.Full:
            log.error(
                "frontier_tracker: the queue stayed full; %d events were not sent",
                self._queue.qsize(),
            )
        self._sender.join(wait)
        self._done.set()
        sent = not self._sender.is_alive() and not self._disabled
        if not sent:
            log.error(
                "frontier_tracker: could not deliver every event to %s before closing", self.url
            )
        return sent

    # -- gepa callbacks -------------------------------------------------------------

    @_guarded
    def on_optimization_start(self, event: dict) -> None:
        self._valset_size = int(event.get("valset_size") or 0)
        self._emit({"type": "status", "phase": "seed evaluation"})

    @_guarded
    def on_iteration_start(self, event: dict) -> None:
        self._reset_iteration(int(event["iteration"]))
        if not self._optimizing:
            self._optimizing = True
            self._emit({"type": "status", "phase": "optimizing"})

    @_guarded
    def on_candidate_selected(self, event: dict) -> None:
        self._parent = int(event["candidate_idx"])

    @_guarded
    def on_minibatch_sampled(self, event: dict) -> None:
        self._minibatch_ids = list(event.get("minibatch_ids") or [])

    @_guarded
    def on_evaluation_start(self, event: dict) -> None:
        inputs = list(event.get("inputs") or [])
        ids = (
            self._minibatch_ids
            if len(self._minibatch_ids) == len(inputs)
            else list(range(len(inputs)))
        )
        self._minibatch = [
            self._key(instance, f"train-{data_id}") for data_id, instance in zip(ids, inputs)
        ]

    @_guarded
    def on_evaluation_end(self, event: dict) -> None:
        scores = list(event.get("scores") or [])
        if event.get("candidate_idx") is not None:
            self._before = [_score(s) for s in scores]
        outputs = list(event.get("outputs") or [])
        trajectories = list(event.get("trajectories") or [])
        items = []
        for n, score in enumerate(scores):
            key = self._minibatch[n] if n < len(self._minibatch) else f"train-{n}"
            items.append(
                self._result(
                    key,
                    score,
                    outputs[n] if n < len(outputs) else None,
                    trajectories[n] if n < len(trajectories) else None,
                )
            )
        if items:
            self._emit(
                {
                    "type": "trials",
                    "candidate": event.get("candidate_idx"),
                    "split": "train",
                    "items": items,
                }
            )

    @_guarded
    def on_proposal_start(self, event: dict) -> None:
        self._proposal_starts += 1

    @_guarded
    def on_proposal_end(self, event: dict) -> None:
        self._proposal_ends += 1
        self._proposed = {
            _clip(k, MAX_KEY): _clip(v, MAX_TEXT)
            for k, v in dict(event.get("new_instructions") or {}).items()
        }
        raw = "\n\n".join(str(v) for v in (event.get("raw_lm_outputs") or {}).values())
        self._reasoning = _clip(raw, MAX_REASONING)

    @_guarded
    def on_budget_updated(self, event: dict) -> None:
        self._metric_calls = int(event["metric_calls_used"])
        remaining = event.get("metric_calls_remaining")
        total = self._metric_calls + int(remaining) if remaining is not None else None
        self._emit({"type": "budget", "used": self._metric_calls, "total": total})
        self._emit_usage()

    @_guarded
    def on_merge_attempted(self, event: dict) -> None:
        self._merge = True

    @_guarded
    def on_valset_evaluated(self, event: dict) -> None:
        index = int(event["candidate_idx"])
        if index in self._seen:  # the seed again when gepa resumes from its run_dir
            return
        self._seen.add(index)
        parents = [int(p) for p in event.get("parent_ids") or [] if p is not None]
        origin = "seed" if not parents else "merge" if len(parents) > 1 else "reflection"
        outputs = event.get("outputs_by_val_id") or {}
        tasks = [
            self._result(self._val_key(val_id), score, outputs.get(val_id), None)
            for val_id, score in dict(event.get("scores_by_val_id") or {}).items()
        ]
        self._emit(
            {
                "type": "candidate",
                "index": index,
                "parents": parents,
                "origin": origin,
                "components": {
                    _clip(k, MAX_KEY): _clip(v, MAX_TEXT)
                    for k, v in dict(event["candidate"]).items()
                },
                "iteration": int(event.get("iteration") or 0),
                "metric_calls": self._valset_size if origin == "seed" else self._metric_calls,
                "val_score": _score(event.get("average_score")),
                "tasks": tasks,
                "reflection": self._reasoning if origin == "reflection" else "",
            }
        )

    @_guarded
    def on_candidate_accepted(self, event: dict) -> None:
        if not self._merge:
            self._emit(
                self._proposal(
                    accepted=True,
                    candidate=int(event["new_candidate_idx"]),
                    after=_score(event["new_score"]),
                )
            )

    @_guarded
    def on_candidate_rejected(self, event: dict) -> None:
        self._emit(
            self._proposal(
                accepted=False,
                candidate=None,
                after=_score(event["new_score"]),
                before=_score(event["old_score"]),
            )
        )

    @_guarded
    def on_iteration_end(self, event: dict) -> None:
        if self._proposal_starts > self._proposal_ends:
            self._emit(
                {
                    "type": "error",
                    "where": "reflection",
                    "iteration": int(event["iteration"]),
                    "message": "Reflection failed: the reflection returned no new text (gepa swallowed the error)",
                }
            )

    @_guarded
    def on_error(self, event: dict) -> None:
        exception = event.get("exception")
        message = _clip(f"{type(exception).__name__}: {exception}", MAX_MESSAGE)
        self._last_error = message
        iteration = event.get("iteration")
        self._emit(
            {
                "type": "error",
                "where": "runner",
                "message": message,
                "iteration": int(iteration)
                if isinstance(iteration, int) and iteration >= 0
                else None,
            }
        )

    @_guarded
    def on_optimization_end(self, event: dict) -> None:
        with self._lock:
            if self._finished:
                return
            self._finished = True
        self._emit_usage()
        self._emit(
            {"type": "finished", "status": "stopped" if self.stop_requested else "completed"}
        )

    # -- model usage --------------------------------------------------------------------

    def _emit_usage(self) -> None:
        """The usage totals, when they changed since last sent (with each budget update)."""
        self._hook_litellm()
        with self._lock:
            if self._usage == self._usage_sent:
                return
            self._usage_sent = dict(self._usage)
            event = {"type": "usage", **self._usage, "cost": self._cost}
        self._emit(event)

    def _hook_litellm(self) -> None:
        # Only once litellm is loaded (importing it costs seconds): gepa loads it at
        # its first model call, DSPy at import.
        if self._litellm_hooked or not self._litellm_usage or "litellm" not in sys.modules:
            return
        self._litellm_hooked = True
        try:
            sys.modules["litellm"].success_callback.append(self._on_litellm_success)
        except Exception:
            log.exception("frontier_tracker: could not count litellm's usage")

    def _on_litellm_success(
        self, kwargs: Any, response: Any, start_time: Any, end_time: Any
    ) -> None:
        """litellm's success callback (a plain function callback: kwargs, response, times)."""
        try:
            usage = _field(response, "usage")
            cost = _field(kwargs, "response_cost")
            self.report_usage(
                tokens_in=_field(usage, "prompt_tokens") or 0,
                tokens_out=_field(usage, "completion_tokens") or 0,
                cost=cost if isinstance(cost, (int, float)) else None,
            )
        except Exception:  # never into litellm, nor into gepa
            log.exception("frontier_tracker: could not read a litellm call's usage")

    def _unhook_litellm(self) -> None:
        if self._litellm_hooked:
            with contextlib.suppress(KeyError, AttributeError, ValueError):
                sys.modules["litellm"].success_callback.remove(self._on_litellm_success)

    # -- turning gepa's events into ours ------------------------------------------------

    def _reset_iteration(self, iteration: int) -> None:
        self._iteration = iteration
        self._parent: int | None = None
        self._minibatch_ids: list = []
        self._minibatch: list[str] = []
        self._before: list[float] = []
        self._proposed: dict[str, str] = {}
        self._reasoning = ""
        self._proposal_starts = self._proposal_ends = 0
        self._merge = False

    def _key(self, instance: Any, fallback: str) -> str:
        key = None
        try:
            key = self.task_key(instance) if self.task_key else _default_key(instance)
        except Exception:  # the user's task_key may raise anything; never into gepa
            log.exception("frontier_tracker: task_key failed")
        return _clip(key if key else fallback, MAX_KEY)

    def _val_key(self, val_id: Any) -> str:
        if self.valset is not None and isinstance(val_id, int) and 0 <= val_id < len(self.valset):
            return self._key(self.valset[val_id], str(val_id))
        return _clip(val_id, MAX_KEY) or "?"

    def _result(self, key: str, score: Any, output: Any, trajectory: Any) -> dict:
        feedback = ""
        if isinstance(trajectory, dict):
            feedback = trajectory.get("feedback") or trajectory.get("Feedback") or ""
        return {
            "task_key": key,
            "score": _score(score),
            "output": _clip(output, self.max_output_chars),
            "feedback": _clip(feedback, self.max_output_chars),
        }

    def _proposal(
        self, *, accepted: bool, candidate: int | None, after: float, before: float | None = None
    ) -> dict:
        return {
            "type": "proposal",
            "iteration": self._iteration,
            "parent": self._parent,
            "accepted": accepted,
            "candidate": candidate,
            "before": sum(self._before) if before is None else before,
            "after": after,
            "minibatch": self._minibatch,
            "texts": self._proposed,
            "reasoning": self._reasoning,
            "metric_calls": self._metric_calls,
        }

    # -- the queue and the sender ---------------------------------------------------------

    def _emit(self, event: dict) -> None:
        with self._lock:
            if self._disabled or self._closing:
                return
            if not self._started:
                self._started = True
                self._sender = threading.Thread(
                    target=self._send_loop, name="frontier-tracker-sender", daemon=True
                )
                self._poller = threading.Thread(
                    target=self._poll_loop, name="frontier-tracker-stop-poll", daemon=True
                )
                self._sender.start()
                self._poller.start()
            self._put(event)

    def _put(self, event: dict) -> None:
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning(
                    "frontier_tracker: queue full (server unreachable for long?); %d events dropped",
                    self.dropped,
                )

    def _send_loop(self) -> None:
        pending: list[dict] = []
        closing = False
        while True:
            if not pending and not closing:
                item = self._queue.get()
                if item is _CLOSE:
                    closing = True
                else:
                    pending.append(item)
            until = time.monotonic() + (0 if closing else self.batch_seconds)
            while len(pending) < MAX_BATCH_EVENTS:
                try:
                    left = until - time.monotonic()
                    item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _CLOSE:
                    closing, until = True, 0
                else:
                    pending.append(item)
            if not pending:
                if closing:
                    return
                continue
            encoded = self._batch(pending)
            if not self._deliver(encoded):
                lost = len(pending) + self._queue.qsize()
                log.error(
                    "frontier_tracker: gave up; %d events were not sent to %s", lost, self.url
                )
                self._disabled = True
                return
            del pending[: len(encoded)]

    @staticmethod
    def _batch(pending: list[dict]) -> list[str]:
        """The first events of `pending` that fit in one request, JSON-encoded (once)."""
        encoded, total = [], 0
        for event in pending:
            text = json.dumps(event)
            total += len(text)
            if total > MAX_BATCH_BYTES and encoded:
                break
            encoded.append(text)
        return encoded

    def _deliver(self, events: list[str]) -> bool:
        """Send one batch (JSON-encoded events) until the server acknowledges it.
        False: give up (refused for good, or closing past the deadline)."""
        if self.run_id is None and not self._open():
            return False
        body = f'{{"seq": {self.sent_batches + 1}, "events": [{", ".join(events)}]}}'
        status, answer = self._call("POST", f"/api/external/runs/{self.run_id}/events", body)
        if status == 200:
            self.sent_batches += 1
            if answer.get("stop"):
                self.stop_requested = True
            return True
        if status in (400, 413):  # a bug of ours: drop this batch, keep the run going
            log.error(
                "frontier_tracker: the server refused a batch of %d events: %s",
                len(events),
                answer.get("detail", answer),
            )
            return True
        if status is not None:
            log.error(
                "frontier_tracker: the server refused the run's events (%s): %s",
                status,
                answer.get("detail", answer),
            )
        return False

    def _open(self) -> bool:
        try:
            gepa_version = metadata.version("gepa")
        except metadata.PackageNotFoundError:
            gepa_version = ""
        body = {
            "key": self.key,
            "name": _clip(self.name, 200),
            "host": _clip(socket.gethostname(), 200),
            "gepa_version": gepa_version[:50],
            "client_version": __version__,
            "python_version": platform.python_version(),
            "task_set_id": self.task_set_id,
        }
        status, answer = self._call("POST", "/api/external/runs", body)
        if status in (200, 201):
            self.run_id = int(answer["id"])
            self.sent_batches = int(answer.get("last_batch") or 0)
            log.info("frontier_tracker: watching at %s/runs/%s/", self.url, self.run_id)
            return True
        if status is not None:
            log.error(
                "frontier_tracker: could not open the run (%s): %s",
                status,
                answer.get("detail", answer),
            )
        return False

    def _call(
        self, method: str, path: str, body: dict | str | None = None
    ) -> tuple[int | None, dict]:
        """One request, retried with backoff on network errors, 5xx, 408 and 429.
        (None, {}) when closing and the flush deadline passed."""
        attempt = 0
        while True:
            try:
                status, answer = self._request(method, path, body)
                if status < 500 and status not in (408, 429):
                    return status, answer
                problem = f"HTTP {status}"
            except (OSError, ValueError) as error:  # refused, reset, timed out, not JSON
                problem = f"{type(error).__name__}: {error}"
            if self._deadline is not None and time.monotonic() > self._deadline:
                return None, {}
            delay = min(self.max_backoff, 0.25 * 2**attempt)
            attempt += 1
            log.warning(
                "frontier_tracker: %s %s failed (%s); retrying in %.1fs",
                method,
                path,
                problem,
                delay,
            )
            time.sleep(delay)

    def _request(self, method: str, path: str, body: dict | str | None = None) -> tuple[int, dict]:
        data = (
            None if body is None else (body if isinstance(body, str) else json.dumps(body)).encode()
        )
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                answer = json.loads(raw or b"{}")
            except ValueError:
                answer = {"detail": raw[:200].decode(errors="replace")}
            return error.code, answer if isinstance(answer, dict) else {"detail": answer}

    def _poll_loop(self) -> None:
        """Ask whether Stop was pressed (also the client's heartbeat) until closed or finished."""
        while not self._done.wait(self.poll_seconds):
            if self.run_id is None:
                continue
            try:
                status, answer = self._request("GET", f"/api/external/runs/{self.run_id}/control")
            except (OSError, ValueError) as error:
                log.debug("frontier_tracker: stop poll failed: %s", error)
                continue
            if status == 200:
                if answer.get("stop"):
                    self.stop_requested = True
                if answer.get("status") == "abandoned":
                    log.error(
                        "frontier_tracker: Frontier ended run %s as abandoned (it heard nothing "
                        "from this process for too long); the optimization goes on, unrecorded",
                        self.run_id,
                    )
                    self._disabled = True
                    return
                if answer.get("status") in ("stopped", "completed", "failed"):
                    return
