"""The embedded Celery worker: a real worker on threads inside this process.

Used by `manage.py serve` in embedded mode (no REDIS_URL): tasks queued by the
web process on the in-memory broker are consumed here, so one command runs the
whole product with no services.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from typing import Any

from django.conf import settings

log = logging.getLogger(__name__)

_lock = threading.Lock()
_stack: contextlib.ExitStack | None = None
_worker: Any = None  # celery's WorkController (celery ships no type hints), held open by _stack


def ensure_worker(concurrency: int | None = None):
    """Start the embedded worker once per process and return it (idempotent)."""
    global _stack, _worker
    from celery.contrib.testing.worker import start_worker

    from dashboard.celery import app

    if not settings.EMBEDDED:
        raise RuntimeError("the embedded worker is only for embedded mode (REDIS_URL is set)")
    with _lock:
        if _stack is None:
            stack = contextlib.ExitStack()
            worker = stack.enter_context(
                start_worker(
                    app,
                    pool="threads",
                    concurrency=concurrency or settings.EMBEDDED_WORKER_CONCURRENCY,
                    perform_ping_check=False,
                    loglevel="WARNING",
                    shutdown_timeout=30,
                    hostname=f"embedded@{socket.gethostname()}",
                )
            )
            _stack, _worker = stack, worker
            log.debug("embedded Celery worker started (%s threads)", worker.concurrency)
        return _worker


def stop_worker() -> None:
    """Stop the embedded worker (tests; a server process simply exits)."""
    global _stack, _worker
    with _lock:
        if _stack is not None:
            _stack.close()
            _stack, _worker = None, None
