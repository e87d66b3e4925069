"""A batch of run events: consecutive seqs, and the websocket group gets them in order after commit."""

from __future__ import annotations

import threading
from unittest import mock

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from optimizer import events
from optimizer.events import publish_run_events, publishing_in_background, run_group
from optimizer.models import Run, RunEvent

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_batch_gets_consecutive_seqs_and_reaches_the_group_in_order(user):
    run = Run.objects.create(owner=user)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(run_group(run.pk), channel)

    publish_run_events(run.pk, [("worker.ping", {"host": "test", "note": "a"})])
    publish_run_events(run.pk, [("worker.ping", {"host": "test", "note": "b"}), ("worker.ping", {"host": "test", "note": "c"})])

    assert list(RunEvent.objects.filter(run=run).values_list("seq", "payload__note")) == [(1, "a"), (2, "b"), (3, "c")]
    received = [async_to_sync(layer.receive)(channel)["message"] for _ in range(3)]
    assert [(m["seq"], m["data"]["note"]) for m in received] == [(1, "a"), (2, "b"), (3, "c")]
    run.refresh_from_db()
    assert run.last_seq == 3


def test_events_sent_from_the_background_publisher_reach_the_group_in_commit_order_before_the_block_ends(user):
    run = Run.objects.create(owner=user)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(run_group(run.pk), channel)
    sent_from: set[str] = set()
    send_now = events._send_now

    def recording(run_id, messages):
        sent_from.add(threading.current_thread().name)
        send_now(run_id, messages)

    with mock.patch.object(events, "_send_now", recording), publishing_in_background():
        for n in range(20):
            publish_run_events(run.pk, [("worker.ping", {"host": "test", "note": f"{n}a"}), ("worker.ping", {"host": "test", "note": f"{n}b"})])
    # Leaving the block waited for every send: all 40 are in the channel now.
    received = [async_to_sync(layer.receive)(channel)["message"] for _ in range(40)]
    assert [m["seq"] for m in received] == list(range(1, 41))
    assert [m["data"]["note"] for m in received[:4]] == ["0a", "0b", "1a", "1b"]
    assert sent_from == {"run-event-publisher"}  # not the thread that committed them


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
    assert async_to_sync(layer.receive)(channel)["message"]["data"]["note"] == "now"
