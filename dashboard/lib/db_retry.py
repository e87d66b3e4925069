"""Queries retried through transient database errors (a restarted PostgreSQL,
connections terminated by a proxy) on a fresh connection: the run engine's
heartbeat, stopper and recorder callbacks run theirs through `retry_db`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)
T = TypeVar("T")

# Errors a new connection may cure. IntegrityError and friends are bugs, not blips.
TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)


def is_transient(error: BaseException) -> bool:
    return isinstance(error, TRANSIENT_DB_ERRORS)


def retry_db(
    fn: Callable[[], T],
    *,
    what: str,
    give_up_after: float | None = 60.0,
    first_delay: float = 0.2,
    max_delay: float = 5.0,
    stop: threading.Event | None = None,
) -> T | None:
    """Call `fn`; on a transient database error close this thread's connection
    (the next query opens a new one) and call it again, with exponential
    backoff, for at most `give_up_after` seconds (None: for ever) or until
    `stop` is set (then None). `fn` must be safe to repeat: a failed
    transaction was rolled back whole."""
    delay = first_delay
    deadline = None if give_up_after is None else time.monotonic() + give_up_after
    while True:
        try:
            return fn()
        except DatabaseError as error:
            if not is_transient(error) or connection.in_atomic_block:
                raise  # an outer transaction must see the error and roll back itself
            if deadline is not None and time.monotonic() + delay > deadline:
                raise
            log.warning("%s: database error, retrying in %.1f s: %s", what, delay, error)
            _drop_connection()
            if stop is not None:
                if stop.wait(delay):
                    return None
            else:
                time.sleep(delay)
            delay = min(delay * 2, max_delay)


def _drop_connection() -> None:
    try:
        connection.close()
    except DatabaseError:  # closing a dead connection may complain; it is gone either way
        connection.connection = None
