"""The response back-pressure patch of daphne (dashboard/daphne_backpressure.py);
its effect on a real daphne and a slow client is in
tests/integration/test_slow_client.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import daphne
from daphne.server import Server

from dashboard import daphne_backpressure
from dashboard.daphne_backpressure import (
    CHECKED_DAPHNE_VERSION,
    ResponseBodyProducer,
    install_daphne_response_backpressure,
)


def test_the_installed_daphne_is_the_one_the_patch_was_checked_against():
    # The patch wraps daphne's Server.handle_reply and reads Twisted's
    # HTTPChannel._waitingForTransport: review it (and this pin) when daphne moves.
    assert daphne.__version__ == CHECKED_DAPHNE_VERSION


def test_importing_the_asgi_application_installs_the_patch_once():
    import dashboard.asgi  # noqa: F401

    patched = Server.handle_reply
    assert Server._frontier_response_backpressure
    install_daphne_response_backpressure()
    assert Server.handle_reply is patched


def _request(producer, aborted):
    transport = SimpleNamespace(abortConnection=lambda: aborted.append(True))
    return SimpleNamespace(finished=0, channel=SimpleNamespace(transport=transport), producer=producer,
                           client_addr=["127.0.0.1", 1])


def test_a_send_waiting_for_a_slow_client_returns_when_the_client_reads_or_goes_away():
    async def scenario():
        producer = ResponseBodyProducer(paused=False)
        request = _request(producer, [])
        await asyncio.wait_for(producer.wait_writable(request), 1)  # not paused: no wait
        producer.pauseProducing()
        waiting = asyncio.ensure_future(producer.wait_writable(request))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        producer.resumeProducing()
        await asyncio.wait_for(waiting, 1)
        producer.pauseProducing()
        waiting = asyncio.ensure_future(producer.wait_writable(request))
        await asyncio.sleep(0.05)
        producer.stopProducing()  # the connection is lost
        await asyncio.wait_for(waiting, 1)
        producer.pauseProducing()  # after the loss nothing pauses it again
        assert not producer.paused

    asyncio.run(scenario())


def test_a_client_that_reads_nothing_for_too_long_is_disconnected(monkeypatch):
    monkeypatch.setattr(daphne_backpressure, "STALLED_CLIENT_SECONDS", 0.2)
    monkeypatch.setattr(daphne_backpressure, "_RECHECK_SECONDS", 0.05)

    async def scenario():
        producer = ResponseBodyProducer(paused=True)
        aborted = []
        await asyncio.wait_for(producer.wait_writable(_request(producer, aborted)), 2)
        assert aborted == [True]
        finished = ResponseBodyProducer(paused=True)  # a response daphne finished some other way
        request = _request(finished, aborted)
        request.finished = 1
        await asyncio.wait_for(finished.wait_writable(request), 2)
        assert aborted == [True]

    asyncio.run(scenario())
