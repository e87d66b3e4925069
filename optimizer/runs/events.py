"""Writing and publishing run events.

The database is the source of truth; the websocket is a notification. An event
is written (with the next seq of its run) inside a transaction and published to
the group `run-<id>` only after that transaction commits, so a browser never
sees an event the database does not have.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, TextField
from django.db.models.functions import Cast
from django.utils import timezone
from psycopg import sql

from optimizer.models import RunEvent, run_progress, store_rejected_marks
from optimizer.runs import event_types as ev
from optimizer.runs.claims import RunClaim
from verifiers_app.engine.json_types import JSONObject

log = logging.getLogger(__name__)


def run_group(run_id: int) -> str:
    return f"run-{run_id}"


# Every open runs list listens here (dashboard.consumers.RunListConsumer). A
# batch holding one of these events also sends the run's list row, read after
# commit, so the list changes live without polling: at most one row per run
# per ROW_PUSH_SECONDS (RunRowPushes), at once for a status change.
RUNS_GROUP = "runs"
RUN_ROW_EVENTS = frozenset(
    {ev.RUN_STATUS, ev.RUN_BUDGET, ev.CANDIDATE_NEW, ev.FRONT_UPDATED, ev.RUN_FINISHED}
)
RUN_ROW_URGENT = frozenset({ev.RUN_STATUS, ev.RUN_FINISHED})
ROW_PUSH_SECONDS = 1.0


def publish_run_event(
    run_id: int, type: str, data: JSONObject, *, claim: RunClaim | None = None
) -> RunEvent:
    """Append an event to the run's log and publish it after commit."""
    return publish_run_events(run_id, [(type, data)], claim=claim)[0]


def publish_run_events(
    run_id: int,
    events: list[ev.Event],
    *,
    claim: RunClaim | None = None,
    progress: dict[str, Any] | None = None,
) -> list[RunEvent]:
    """Append several events with consecutive seqs in one transaction and publish
    them, in order, after commit (one database round and one channel-layer call
    for the batch: the runner's per-iteration cost). With a `claim` (the
    runner's), nothing is written unless this worker still holds the run:
    ClaimLost is raised instead and the enclosing transaction rolls back.
    `progress`: fields of the run's progress row (optimizer.models.PROGRESS_FIELDS)
    written by the same UPDATE that takes the seqs (the runner's budget reading).
    The rows returned are not read back: on PostgreSQL they have no pk.
    With FRONTIER_VALIDATE_EVENTS on (the tests), a payload that does not match
    its model in optimizer.runs.event_types raises EventPayloadError first."""
    if settings.FRONTIER_VALIDATE_EVENTS:
        for type, data in events:
            ev.validate_payload(type, data)
    with transaction.atomic():
        # The UPDATE takes the progress row's write lock (the run's narrow row:
        # optimizer.models.RunProgress), so concurrent publishers of one run get
        # consecutive seqs in commit order (PostgreSQL row lock; SQLite's
        # IMMEDIATE transactions serialise writers as a whole).
        if claim is not None:  # the runner's: one statement (UPDATE ... RETURNING)
            last = claim.take_seqs(len(events), **(progress or {}))
        else:
            fields = {**(progress or {}), "last_seq": F("last_seq") + len(events)}
            run_progress(run_id).update(**fields)
            last = run_progress(run_id).values_list("last_seq", flat=True).get()
        first = last - len(events) + 1
        rows = [
            RunEvent(run_id=run_id, seq=first + n, type=type, payload=data)
            for n, (type, data) in enumerate(events)
        ]
        encoded = _insert_events(rows)
        store_rejected_marks(
            rows
        )  # the score chart's numbers, so the run page need not unpack the payloads
        messages: list[JSONObject] = [row.as_message() for row in rows]
        if encoded is not None:  # the payloads' JSON, encoded once for the rows and the messages
            messages = [
                EncodedMessage(m, payload) for m, payload in zip(messages, encoded, strict=True)
            ]
        transaction.on_commit(lambda: _send(run_id, messages))
    return rows


#: The RunEvent columns _insert_events copies, in this order.
EVENT_COLUMNS = ("run", "seq", "type", "payload", "created_at")


def _insert_events(rows: list[RunEvent]) -> list[str] | None:
    """INSERT the new event rows. On PostgreSQL with COPY (psycopg's `Cursor.copy`):
    each payload is JSON-encoded once and no SQL is built per row; with a fast
    model a run writes ~10,000 events, and Django's bulk_create, which quotes
    every value into the statement, took a third of its writer thread's time.
    Returns the payloads' JSON texts (on PostgreSQL; else None)."""
    if connection.vendor != "postgresql":
        RunEvent.objects.bulk_create(rows)
        return None
    now = timezone.now()
    encoded = []
    with connection.cursor() as cursor, cursor.copy(_copy_events_sql()) as copy:
        for row in rows:
            row.created_at = now
            # JSONField's own encoding (no encoder: json.dumps), the text a jsonb column parses.
            payload = json.dumps(row.payload)
            encoded.append(payload)
            copy.write_row((row.run_id, row.seq, row.type, payload, now))
    return encoded


class EncodedMessage(dict[str, Any]):
    """A websocket message (RunEvent.as_message) with its JSON text, made from its
    payload's JSON already encoded for the row: the text json.dumps gives the
    message, without encoding the payload a second time on the publisher's thread."""

    __slots__ = ("text",)

    def __init__(self, message: JSONObject, payload: str) -> None:
        super().__init__(message)
        self.text: str | None = None  # another shape than this: json.dumps encodes it
        if list(message) == ["seq", "type", "data"]:
            self.text = event_text(message["seq"], message["type"], payload)


def event_text(seq: int, type: str, payload: str) -> str:
    """An event's websocket message (RunEvent.as_message) as JSON text, around its
    payload's JSON text: the text json.dumps gives the message when `payload` is
    json.dumps's of the payload."""
    return f'{{"seq": {json.dumps(seq)}, "type": {json.dumps(type)}, "data": {payload}}}'


def event_texts(run_id: int, after: int, limit: int) -> list[tuple[int, str]]:
    """Up to `limit` of the run's events after seq `after`: (seq, the message's JSON
    text). The payloads are read as the database's JSON text (jsonb::text on
    PostgreSQL), never decoded and encoded again: a reader of the log (a socket
    catching up, the API's page) holds a batch's text, not its objects."""
    rows = (
        RunEvent.objects.filter(run_id=run_id, seq__gt=after)
        .order_by("seq")
        .annotate(text=Cast("payload", TextField()))
        .values_list("seq", "type", "text")[:limit]
    )
    return [(seq, event_text(seq, type, text)) for seq, type, text in rows]


def message_text(message: JSONObject) -> str:
    """A message's JSON text, as the websocket sends it."""
    text = getattr(message, "text", None)
    return text if text is not None else json.dumps(message)


@functools.cache
def _copy_events_sql() -> str:
    """_insert_events's COPY statement (built once: the writer copies a batch every ~100 ms)."""
    columns = {f.name: f.column for f in RunEvent._meta.concrete_fields if f.column}
    names: list[sql.Composable] = [sql.Identifier(columns[name]) for name in EVENT_COLUMNS]
    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(RunEvent._meta.db_table), sql.SQL(", ").join(names)
    )
    return statement.as_string()


def publish_run_access_changed(run_id: int, *, lost_by: list[int]) -> None:
    """Tell the run's open sockets and every runs list, after commit, that who
    may see the run changed (sharing edited): a run socket re-checks its user
    and closes with 4403 if they lost access, and the runs lists of the users
    in `lost_by` drop the run's row, so an unshared user stops receiving the run
    at once (the others only forget their cached answer)."""
    transaction.on_commit(lambda: _send_access_changed(run_id, lost_by))


def _send_access_changed(run_id: int, lost_by: list[int]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(run_group(run_id), {"type": "run.access"})
        async_to_sync(layer.group_send)(
            RUNS_GROUP, {"type": "runs.access", "run_id": run_id, "lost_by": lost_by}
        )
    except Exception:  # the sockets also re-check on their own every few seconds
        log.exception("could not tell the sockets of run %s that its sharing changed", run_id)


class _BackgroundPublisher(threading.Thread):
    """Sends committed events to the channel layer from one thread, first in first
    out, so a runner's engine thread does not wait on the channel layer (and the
    runs-list row read) for every event batch. The events are already in the
    database when they are queued; only the notification is deferred."""

    def __init__(self) -> None:
        super().__init__(name="run-event-publisher", daemon=True)
        # (run id, its messages); None: stop.
        self.queue: queue.SimpleQueue[tuple[int, list[JSONObject]] | None] = queue.SimpleQueue()

    def run(self) -> None:
        # One event loop for the thread's life: async_to_sync would start a loop
        # per batch, and the channel layer opens its Redis connections per loop
        # (with a fast model that was most of the worker's publishing time).
        loop = asyncio.new_event_loop()
        try:
            while (item := self.queue.get()) is not None:
                _send_now(*item, loop=loop)
        finally:
            loop.close()  # the channel layer closes this loop's connections with it
            connection.close()

    def close(self) -> None:
        self.queue.put(None)
        self.join()


_local = threading.local()


@contextmanager
def publishing_in_background() -> Iterator[None]:
    """Within this block, the events this thread commits are sent to the channel
    layer by a background thread, in commit order; leaving the block waits until
    every one of them is sent (so what follows is published after them)."""
    publisher = _BackgroundPublisher()
    publisher.start()
    _local.publisher = publisher
    try:
        yield
    finally:
        _local.publisher = None
        publisher.close()


def background_publisher() -> _BackgroundPublisher | None:
    """The publisher this thread's commits go to (inside publishing_in_background), if any."""
    return getattr(_local, "publisher", None)


@contextmanager
def publishing_through(publisher: _BackgroundPublisher | None) -> Iterator[None]:
    """Within this block, this thread's committed events go to `publisher` (another
    thread's, from background_publisher()), in the order they commit, after
    whatever that thread queued before. None: sent from this thread, as usual."""
    previous = getattr(_local, "publisher", None)
    _local.publisher = publisher
    try:
        yield
    finally:
        _local.publisher = previous


def _send(run_id: int, messages: list[JSONObject]) -> None:
    publisher = getattr(_local, "publisher", None)
    if publisher is not None:
        publisher.queue.put((run_id, messages))
    else:
        _send_now(run_id, messages)


def _send_now(
    run_id: int, messages: list[JSONObject], *, loop: asyncio.AbstractEventLoop | None = None
) -> None:
    """Send now, on `loop` (the caller's own, not running) or in a loop of asgiref's."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        # One group message for the whole batch, each event's JSON text encoded
        # once here: every viewer's consumer forwards the text as one websocket
        # frame per event (the channel layer's cost is per message, and encoding
        # per viewer cost the web process 200× the work with 200 viewers).
        batch = [[m["seq"], message_text(m)] for m in messages]
        message = {"type": "run.events", "events": batch}
        if loop is None:
            async_to_sync(layer.group_send)(run_group(run_id), message)
        else:
            loop.run_until_complete(layer.group_send(run_group(run_id), message))
    except Exception:  # a notification only: the browser catches up from the DB
        log.exception(
            "could not publish events %s of run %s", [m.get("seq") for m in messages], run_id
        )
    types = {m["type"] for m in messages}
    if not types.isdisjoint(RUN_ROW_EVENTS):
        row_pushes.note(run_id, urgent=not types.isdisjoint(RUN_ROW_URGENT))


class RunRowPushes:
    """Coalesces a run's runs-list rows: at most one push per run per
    `interval` seconds. A change inside the interval schedules one trailing
    push at its end (the row is read then, so it shows the latest state); an
    urgent change (a status) is pushed at once and replaces a scheduled push.
    The timer threads are not daemons: a process ending within the interval
    still sends its last row."""

    def __init__(
        self,
        push: Callable[[int], None],
        *,
        interval: float = ROW_PUSH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        timer: Callable[..., threading.Timer] = threading.Timer,
    ) -> None:
        self.push = push
        self.interval = interval
        self.clock = clock
        self.timer = timer
        self.lock = threading.Lock()
        self.last: dict[int, float] = {}
        self.scheduled: dict[int, threading.Timer] = {}

    def note(self, run_id: int, *, urgent: bool = False) -> None:
        with self.lock:
            now = self.clock()
            if urgent or now - self.last.get(run_id, float("-inf")) >= self.interval:
                pending = self.scheduled.pop(run_id, None)
                if pending is not None:
                    pending.cancel()
                self.last[run_id] = now
            else:
                if run_id not in self.scheduled:
                    wait = self.last[run_id] + self.interval - now
                    self.scheduled[run_id] = timer = self.timer(wait, self._due, args=(run_id,))
                    timer.start()
                return
        self.push(run_id)

    def cancel_all(self, timeout: float = 10) -> None:
        """Forget every run and stop its pushes: the scheduled ones are cancelled and one
        already under way is waited for (a test's database is about to be flushed)."""
        with self.lock:
            self.scheduled.clear()  # a timer that fires now finds nothing to push
            self.last.clear()
        for timer in self.live_timers():
            timer.cancel()
            timer.join(timeout)

    def live_timers(self) -> list[threading.Timer]:
        """This instance's timer threads still alive (scheduled, or pushing)."""
        return [
            thread
            for thread in threading.enumerate()
            if isinstance(thread, threading.Timer)
            and getattr(thread, "function", None) == self._due
        ]

    def _due(self, run_id: int) -> None:
        with self.lock:
            if self.scheduled.pop(run_id, None) is None:
                return  # cancelled: an urgent push went out meanwhile
            self.last[run_id] = self.clock()
        try:
            self.push(run_id)
        finally:
            connection.close()  # this timer thread's own connection


def _push_run_row(run_id: int) -> None:
    layer = get_channel_layer()
    row = _run_row(run_id)
    if layer is None or row is None:
        return
    try:
        if isinstance(threading.current_thread(), threading.Timer):
            # A trailing push (RunRowPushes), maybe during interpreter exit, when
            # async_to_sync's executor refuses new work: a loop of its own.
            asyncio.run(layer.group_send(RUNS_GROUP, row))
        else:
            async_to_sync(layer.group_send)(RUNS_GROUP, row)
    except Exception:  # the list resyncs from the DB when its socket reconnects
        log.exception("could not push the list row of run %s", run_id)


row_pushes = RunRowPushes(_push_run_row)


def _run_row(run_id: int) -> JSONObject | None:
    # The row is the runs list's own format (the run read model; one query).
    from optimizer.runs.summary import run_list_row_for_push

    try:
        found = run_list_row_for_push(run_id)
    except Exception:  # the list resyncs from the DB when its socket reconnects
        log.exception("could not read the list row of run %s", run_id)
        return None
    if found is None:
        return None
    owner_id, row = found
    return {"type": "runs.row", "run_id": run_id, "owner_id": owner_id, "row": row}
