"""The embedded mode's channel layer must deliver a message sent from a worker
thread to a consumer waiting in the server's event loop at once (channels'
InMemoryChannelLayer does not: docs/architecture.md "Two ways to run" measured a 4.5 s median)."""

import asyncio
import statistics
import threading
import time

import pytest
from asgiref.sync import async_to_sync
from channels.exceptions import ChannelFull

from dashboard.channel_layer import ThreadSafeInMemoryChannelLayer


async def test_a_group_message_from_a_worker_thread_wakes_the_waiting_receiver_within_a_fraction_of_a_second():
    layer = ThreadSafeInMemoryChannelLayer()
    channel = await layer.new_channel()
    await layer.group_add("run-1", channel)
    delays = []
    for i in range(20):
        sent_at = {}

        def send_from_thread(i=i, sent_at=sent_at):
            sent_at["t"] = time.perf_counter()
            async_to_sync(layer.group_send)("run-1", {"type": "run.event", "n": i})

        receiving = asyncio.ensure_future(layer.receive(channel))
        await asyncio.sleep(0.01)  # the receiver is now parked in this loop
        thread = threading.Thread(target=send_from_thread)
        thread.start()
        message = await asyncio.wait_for(receiving, timeout=2)
        delays.append(time.perf_counter() - sent_at["t"])
        thread.join()
        assert message == {"type": "run.event", "n": i}
    assert statistics.median(delays) < 0.05
    assert max(delays) < 0.5


async def test_messages_sent_before_anyone_listens_are_queued_in_order():
    layer = ThreadSafeInMemoryChannelLayer()
    channel = await layer.new_channel()
    for i in range(3):
        await layer.send(channel, {"type": "x", "n": i})
    assert [(await layer.receive(channel))["n"] for _ in range(3)] == [0, 1, 2]


async def test_a_cancelled_receiver_does_not_swallow_the_next_message():
    layer = ThreadSafeInMemoryChannelLayer()
    channel = await layer.new_channel()
    waiting = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.sleep(0)
    await layer.send(channel, {"type": "x", "n": 1})
    assert (await asyncio.wait_for(layer.receive(channel), 1))["n"] == 1


async def test_a_full_channel_refuses_direct_sends_but_group_sends_skip_it():
    layer = ThreadSafeInMemoryChannelLayer(capacity=2)
    channel = await layer.new_channel()
    await layer.group_add("g", channel)
    await layer.send(channel, {"type": "x"})
    await layer.send(channel, {"type": "x"})
    with pytest.raises(ChannelFull):
        await layer.send(channel, {"type": "x"})
    await layer.group_send("g", {"type": "x"})  # dropped for that member, no error


async def test_a_discarded_channel_no_longer_receives_group_messages():
    layer = ThreadSafeInMemoryChannelLayer()
    a, b = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("g", a)
    await layer.group_add("g", b)
    await layer.group_discard("g", a)
    await layer.group_send("g", {"type": "x", "to": "members"})
    assert (await asyncio.wait_for(layer.receive(b), 1))["to"] == "members"
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive(a), 0.1)


async def test_messages_older_than_the_expiry_are_dropped():
    layer = ThreadSafeInMemoryChannelLayer(expiry=0.05)
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "old"})
    await asyncio.sleep(0.1)
    await layer.send(channel, {"type": "new"})
    assert (await asyncio.wait_for(layer.receive(channel), 1))["type"] == "new"
