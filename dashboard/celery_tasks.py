from __future__ import annotations

import socket

from celery import shared_task

from optimizer.runs import event_types as ev
from optimizer.runs.events import publish_run_event


@shared_task(name="dashboard.worker_ping")
def worker_ping(run_id: int, note: str = "") -> int:
    """Diagnostic: a worker writes a `worker.ping` event to a run's log.

    Proves the whole path (broker → worker → database → channel layer →
    websocket) in one call; returns the event's seq.
    """
    event = publish_run_event(
        run_id, ev.WORKER_PING, {"host": socket.gethostname(), "note": note[:200]}
    )
    return event.seq
