"""A batch of run events: consecutive seqs, and the websocket group gets them in order after commit."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from optimizer.events import publish_run_events, run_group
from optimizer.models import Run, RunEvent

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_batch_gets_consecutive_seqs_and_reaches_the_group_in_order(user):
    run = Run.objects.create(owner=user)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(run_group(run.pk), channel)

    publish_run_events(run.pk, [("worker.ping", {"note": "a"})])
    publish_run_events(run.pk, [("worker.ping", {"note": "b"}), ("worker.ping", {"note": "c"})])

    assert list(RunEvent.objects.filter(run=run).values_list("seq", "payload__note")) == [(1, "a"), (2, "b"), (3, "c")]
    received = [async_to_sync(layer.receive)(channel)["message"] for _ in range(3)]
    assert [(m["seq"], m["data"]["note"]) for m in received] == [(1, "a"), (2, "b"), (3, "c")]
    run.refresh_from_db()
    assert run.last_seq == 3
