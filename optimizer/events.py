"""Writing and publishing run events.

The database is the source of truth; the websocket is a notification. An event
is written (with the next seq of its run) inside a transaction and published to
the group `run-<id>` only after that transaction commits, so a browser never
sees an event the database does not have.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models import F

from optimizer.models import Run, RunEvent

log = logging.getLogger(__name__)


def run_group(run_id: int) -> str:
    return f"run-{run_id}"


def publish_run_event(run_id: int, type: str, data: dict) -> RunEvent:
    """Append an event to the run's log and publish it after commit."""
    with transaction.atomic():
        # The UPDATE takes the run row's write lock, so concurrent publishers of
        # one run get consecutive seqs in commit order (PostgreSQL row lock;
        # SQLite's IMMEDIATE transactions serialise writers as a whole).
        Run.objects.filter(pk=run_id).update(last_seq=F("last_seq") + 1)
        seq = Run.objects.filter(pk=run_id).values_list("last_seq", flat=True).get()
        event = RunEvent.objects.create(run_id=run_id, seq=seq, type=type, payload=data)
        transaction.on_commit(lambda: _send(run_id, event.as_message()))
    return event


def _send(run_id: int, message: dict) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(run_group(run_id), {"type": "run.event", "message": message})
    except Exception:  # a notification only: the browser catches up from the DB
        log.exception("could not publish event %s of run %s", message.get("seq"), run_id)
