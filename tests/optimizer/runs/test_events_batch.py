"""A batch of run events: consecutive seqs, and the websocket group gets them in order after commit."""

from __future__ import annotations

import asyncio
import json
import threading
from unittest import mock

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from optimizer.models import Run, RunEvent
from optimizer.runs import event_types as ev
from optimizer.runs import events
from optimizer.runs.events import publish_run_events, publishing_in_background, run_group

pytestmark = pytest.mark.django_db(transaction=True)


def receive(layer, channel: str, n: int) -> list[dict]:
    """The next `n` messages of `channel`, received in one event loop, as a
    consumer does. channels-redis hands a message it took on a loop that then
    ends out again, so one async_to_sync call per message (a loop each) read
    the first batch twice on Redis."""

    async def taking() -> list[dict]:
        return [await asyncio.wait_for(layer.receive(channel), 10) for _ in range(n)]

    return async_to_sync(taking)()


def test_a_batch_gets_consecutive_seqs_and_reaches_the_group_in_order(user):
    run = Run.objects.create(owner=user)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(run_group(run.pk), channel)

    publish_run_events(run.pk, [("worker.ping", {"host": "test", "note": "a"})])
    publish_run_events(
        run.pk,
        [
            ("worker.ping", {"host": "test", "note": "b"}),
            ("worker.ping", {"host": "test", "note": "c"}),
        ],
    )

    assert list(RunEvent.objects.filter(run=run).values_list("seq", "payload__note")) == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
    ]
    batches = receive(layer, channel, 2)  # one group message per batch
    assert [b["type"] for b in batches] == ["run.events", "run.events"] and [
        len(b["events"]) for b in batches
    ] == [1, 2]
    received = [json.loads(text) for b in batches for _, text in b["events"]]
    assert [(m["seq"], m["data"]["note"]) for m in received] == [(1, "a"), (2, "b"), (3, "c")]
    run.refresh_from_db()
    assert run.last_seq == 3


def test_a_batchs_progress_fields_are_written_by_the_update_that_takes_its_seqs(user):
    """The runner hands the progress row's budget reading with its batch: one
    UPDATE of the progress row for both."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from optimizer.models import run_progress

    run = Run.objects.create(owner=user)
    with CaptureQueriesContext(connection) as queries:
        publish_run_events(
            run.pk,
            [("worker.ping", {"host": "test", "note": "a"})],
            progress={"budget_used": 7, "cost": 0.5},
        )
    updates = [q for q in queries if str(q["sql"]).lstrip().upper().startswith("UPDATE")]
    assert len(updates) == 1
    assert run_progress(run.pk).values_list("budget_used", "cost", "last_seq").get() == (7, 0.5, 1)


def test_payloads_are_stored_as_given_whatever_characters_they_hold(user, settings):
    """On PostgreSQL the rows go in with COPY, whose text format escapes
    backslashes, tabs and newlines: every payload reads back as it was sent."""
    settings.FRONTIER_VALIDATE_EVENTS = False  # a nested payload no event type has
    run = Run.objects.create(owner=user)
    awkward = 'tab\there, "quoted", back\\slash \\N, new\nline, \r, é, 雪, 🙂, \\x00 {}[]'
    payloads = [
        {"host": "test", "note": awkward},
        {"host": "test", "note": ""},
        {"host": "h\\", "note": "\\.", "nested": {"list": [1, 2.5, None, True, awkward]}},
    ]
    rows = publish_run_events(run.pk, [("worker.ping", p) for p in payloads])
    stored = RunEvent.objects.filter(run=run).order_by("seq")
    assert [e.payload for e in stored] == payloads
    assert (
        [(e.seq, e.type) for e in stored]
        == [(r.seq, r.type) for r in rows]
        == [
            (1, "worker.ping"),
            (2, "worker.ping"),
            (3, "worker.ping"),
        ]
    )
    assert all(e.created_at is not None for e in stored)


def test_events_sent_from_the_background_publisher_reach_the_group_in_commit_order_before_the_block_ends(
    user,
):
    run = Run.objects.create(owner=user)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(run_group(run.pk), channel)
    sent_from: set[str] = set()
    loops: set[object] = set()
    send_now = events._send_now

    def recording(run_id, messages, **kwargs):
        sent_from.add(threading.current_thread().name)
        loops.add(kwargs.get("loop"))
        send_now(run_id, messages, **kwargs)

    with mock.patch.object(events, "_send_now", recording), publishing_in_background():
        for n in range(20):
            publish_run_events(
                run.pk,
                [
                    ("worker.ping", {"host": "test", "note": f"{n}a"}),
                    ("worker.ping", {"host": "test", "note": f"{n}b"}),
                ],
            )
    # Leaving the block waited for every send: all 40 are in the channel now.
    received = [json.loads(text) for b in receive(layer, channel, 20) for _, text in b["events"]]
    assert [m["seq"] for m in received] == list(range(1, 41))
    assert [m["data"]["note"] for m in received[:4]] == ["0a", "0b", "1a", "1b"]
    assert sent_from == {"run-event-publisher"}  # not the thread that committed them
    # One event loop for all 20 sends (the channel layer's connections are per loop).
    assert len(loops) == 1 and None not in loops


def test_outside_the_block_events_are_sent_by_the_thread_that_commits_them(user):
    run = Run.objects.create(owner=user)
    with publishing_in_background():
        pass
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(run_group(run.pk), channel)
    with mock.patch.object(events, "_send_now", wraps=events._send_now) as send_now:
        publish_run_events(run.pk, [("worker.ping", {"host": "test", "note": "now"})])
        send_now.assert_called_once()
    assert (
        json.loads(async_to_sync(layer.receive)(channel)["events"][0][1])["data"]["note"] == "now"
    )


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class _Timers:
    """threading.Timer stand-in: the test decides when a timer fires."""

    def __init__(self):
        self.made = []

    def __call__(self, wait, function, args=()):
        timers = self

        class Timer:
            cancelled = False

            def start(self):
                timers.made.append(self)

            def cancel(self):
                self.cancelled = True

            def fire(self):
                if not self.cancelled:
                    function(*args)

        timer = Timer()
        timer.wait = wait
        return timer


@pytest.mark.django_db
def test_a_busy_run_pushes_its_list_row_at_most_once_a_second_and_its_last_state_at_the_end():
    pushed, clock, timers = [], _Clock(), _Timers()
    pushes = events.RunRowPushes(pushed.append, clock=clock, timer=timers)

    pushes.note(7)  # the first change goes out at once
    for _ in range(50):  # fifty more within the same second: one trailing push is scheduled
        clock.now += 0.01
        pushes.note(7)
    pushes.note(8)  # another run is not held back by this one

    assert pushed == [7, 8] and len(timers.made) == 1 and timers.made[0].wait == pytest.approx(0.99)
    clock.now = 101.0
    timers.made[0].fire()
    assert pushed == [7, 8, 7]
    clock.now = 101.5
    pushes.note(7)  # half a second after the trailing push: waits again
    assert pushed == [7, 8, 7] and len(timers.made) == 2


@pytest.mark.django_db
def test_a_status_change_is_pushed_at_once_and_replaces_the_waiting_push():
    pushed, clock, timers = [], _Clock(), _Timers()
    pushes = events.RunRowPushes(pushed.append, clock=clock, timer=timers)
    pushes.note(7)
    clock.now += 0.2
    pushes.note(7)
    clock.now += 0.2
    pushes.note(7, urgent=True)  # e.g. run.finished
    timers.made[0].fire()
    assert pushed == [7, 7] and timers.made[0].cancelled


def test_a_batch_of_budget_events_sends_one_list_row_and_a_status_change_another(user):
    run = Run.objects.create(owner=user)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.RUNS_GROUP, channel)
    with mock.patch.object(
        events, "row_pushes", events.RunRowPushes(events._push_run_row, interval=60)
    ):
        for used in range(5):
            publish_run_events(run.pk, [("run.budget", {"used": used, "total": 10})])
        publish_run_events(run.pk, [("run.status", {"status": "running", "phase": "optimizing"})])
        rows = receive(layer, channel, 2)
        assert (
            not events.row_pushes.scheduled
        )  # the status push replaced the trailing one of the budget events
    assert [r["row"]["last_seq"] for r in rows] == [1, 6]


def test_a_second_change_within_the_interval_leaves_a_trailing_runs_list_push_scheduled():
    events.row_pushes.note(999_999)
    events.row_pushes.note(999_999)  # within the interval: pushed at its end
    assert 999_999 in events.row_pushes.scheduled


def test_no_runs_list_push_of_an_earlier_test_is_still_waiting_to_read_the_database():
    # A trailing push firing during the next test's database teardown deadlocked
    # PostgreSQL's flush (tests/conftest.py cancels them after each test).
    assert events.row_pushes.live_timers() == [] and not events.row_pushes.scheduled


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {
            "candidate": 3,
            "split": "train",
            "items": [{"task": "t-1", "score": 0.5, "passed": None}],
        },
        {"message": 'quotes " and \\ and \u00e9\u4e2d\U0001f600 and </script>', "cost": 1e-08},
        {"nested": {"a": [1.0, 2, [True, False]], "b": None}},
    ],
)
def test_a_message_sent_with_its_payloads_json_is_the_text_json_dumps_gives(payload):
    """The writer encodes each payload once, for its row; the message sent to
    the websockets is made from that text and is exactly what json.dumps gives."""
    message = RunEvent(run_id=1, seq=42, type=ev.ERROR, payload=payload).as_message()
    encoded = events.EncodedMessage(message, json.dumps(payload))
    assert encoded == message
    assert events.message_text(encoded) == json.dumps(message)
    assert events.message_text(message) == json.dumps(message)
