"""Runs queued by another process reach the embedded server's worker.

In embedded mode the broker is in memory: a run queued by `manage.py optimize
run` without `--wait`, or by `optimize resume` in another process, is a `queued`
row in the database that no worker hears about. A serving process polls for
such rows twice a second and queues them on its own worker, so they start
within a second or two. Runs this process published itself (the web form, the
API) are left alone: its worker already has them. A run delivered twice would
be harmless anyway (`runner.claim` lets one worker run it).

The poller also touches a file in DATA_DIR on every round, so another process
(the CLI) can tell whether a server is there to pick its run up.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from celery.signals import after_task_publish
from django.conf import settings
from django.db import close_old_connections

from optimizer.models import Run, RunStatus

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
ALIVE_WITHIN_SECONDS = 5.0
TASK_NAME = "optimizer.run_optimization"


def alive_file() -> Path:
    return Path(settings.DATA_DIR) / "embedded-server.alive"


def server_is_alive() -> bool:
    """True when an embedded server's poller touched its file just now."""
    try:
        return time.time() - alive_file().stat().st_mtime < ALIVE_WITHIN_SECONDS
    except OSError:
        return False


class QueuedRunPoller:
    def __init__(self) -> None:
        self._published: set[int] = set()
        self._published_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        after_task_publish.connect(self._on_publish, weak=False)
        self._thread = threading.Thread(target=self._loop, name="queued-runs-poller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        after_task_publish.disconnect(self._on_publish)
        if self._thread is not None:
            self._thread.join(timeout=5)
        alive_file().unlink(missing_ok=True)

    def _on_publish(
        self,
        sender: object = None,
        headers: dict[str, Any] | None = None,
        body: object = None,
        **_kwargs: Any,
    ) -> None:
        if sender != TASK_NAME:
            return
        args = (headers or {}).get("argsrepr") or ""
        try:
            run_id = int(str(args).strip("(),[] "))
        except ValueError:
            return
        with self._published_lock:
            self._published.add(run_id)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception:  # the next round tries again
                log.exception("could not look for queued runs")
            finally:
                close_old_connections()
            self._stop.wait(POLL_SECONDS)

    def poll_once(self) -> list[int]:
        """Queue the queued runs this process has not published; returns their ids."""
        alive = alive_file()
        alive.parent.mkdir(parents=True, exist_ok=True)
        alive.touch()
        queued = set(
            Run.objects.filter(status=RunStatus.QUEUED, imported=False).values_list("pk", flat=True)
        )
        with self._published_lock:
            # A run that left the queue and came back (resumed elsewhere) is new again.
            self._published &= queued
            fresh = sorted(queued - self._published)
        from optimizer.celery_tasks import run_optimization

        for run_id in fresh:
            # The runner says "started" when the worker takes it.
            log.debug("run %s was queued by another process: sending it to this worker", run_id)
            run_optimization.delay(run_id)  # published: _on_publish records it
        return fresh
