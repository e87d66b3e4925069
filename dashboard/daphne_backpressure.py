"""Flow control for HTTP response bodies under daphne.

daphne (4.2.x) hands each ``http.response.body`` message straight to Twisted's
``Request.write`` and returns from the application's ``send()`` at once, so
whatever the client has not read yet piles up in the connection's write buffer
inside the web process: a 452 MB run export read at 20 MB/s made daphne grow by
420-480 MB. A user downloading over an ordinary link is such a slow client.

Twisted already knows when a connection is behind: its transport calls
``pauseProducing()`` on a registered streaming producer when its write buffer
goes above 64 KB and ``resumeProducing()`` once it has drained, and
``stopProducing()`` when the connection is lost (the HTTP channel forwards all
three to the producer its current request registered). daphne runs Twisted on
the asyncio reactor, so the transport and the application's ``send()`` share
one event loop and thread. The patch below registers a small producer on a
response's first body piece with ``more_body`` and makes ``send()`` await while
the transport is paused; it unregisters it before the final piece (Twisted's
``Request.finish`` must not find a producer still registered). The
application's body iterator (a streaming download, the export relay reading
the export process's pipe) is then pulled only as fast as the client reads.

A send never waits forever: a lost connection wakes it (``stopProducing``), a
response finished some other way (daphne's own timeout) is noticed within
``_RECHECK_SECONDS``, and a client that reads nothing at all for
``STALLED_CLIENT_SECONDS`` is disconnected, which ends the response (and kills
an export process, as for any client that goes away). Websockets and other
message types are untouched.

``install_daphne_response_backpressure`` is applied on import of
``dashboard.asgi``, so ``daphne dashboard.asgi:application``, ``manage.py
serve`` and the tests' daphne processes all get it. It relies on daphne's
``Server.handle_reply`` and Twisted's ``HTTPChannel._waitingForTransport``:
``CHECKED_DAPHNE_VERSION`` is the daphne it was written against, and a unit
test fails when the installed daphne differs.
"""

from __future__ import annotations

import asyncio
import logging
import time

logger = logging.getLogger(__name__)

CHECKED_DAPHNE_VERSION = "4.2.3"
# A client that has read nothing for this long while a response waits for it is
# disconnected (a browser's paused download included), so a stalled connection
# cannot hold an export process and a waiting application forever.
STALLED_CLIENT_SECONDS = 600.0
_RECHECK_SECONDS = 1.0


class ResponseBodyProducer:
    """A Twisted streaming producer (IPushProducer) standing for one response's
    application: paused while the connection's write buffer is full."""

    def __init__(self, paused: bool):
        self._writable = asyncio.Event()
        if not paused:
            self._writable.set()
        self.stopped = False

    def pauseProducing(self) -> None:
        if not self.stopped:
            self._writable.clear()

    def resumeProducing(self) -> None:
        self._writable.set()

    def stopProducing(self) -> None:
        """The connection is gone: let a waiting send return."""
        self.stopped = True
        self._writable.set()

    @property
    def paused(self) -> bool:
        return not self._writable.is_set()

    async def wait_writable(self, request) -> None:
        """Return once the transport takes more data, or the response can no
        longer be written (finished, connection lost, client stalled too long)."""
        waited_since = time.monotonic()
        while self.paused:
            try:
                await asyncio.wait_for(self._writable.wait(), _RECHECK_SECONDS)
            except TimeoutError:
                if request.finished or request.channel is None or request.producer is not self:
                    return
                if time.monotonic() - waited_since > STALLED_CLIENT_SECONDS:
                    logger.warning("Client %s read nothing for %.0f s: disconnecting it", request.client_addr,
                                   STALLED_CLIENT_SECONDS)
                    request.channel.transport.abortConnection()
                    return


def install_daphne_response_backpressure() -> None:
    """Patch daphne's ``Server.handle_reply`` (idempotent); see the module docstring."""
    try:
        from daphne.http_protocol import WebRequest
        from daphne.server import Server
    except ImportError:  # not served by daphne
        return
    if getattr(Server, "_frontier_response_backpressure", False):
        return
    from twisted.internet.interfaces import IPushProducer
    from twisted.web.http import HTTPChannel
    from zope.interface import classImplements

    # Loud at start-up rather than a silent unbounded buffer if these move.
    if not (hasattr(HTTPChannel, "_waitingForTransport") and hasattr(WebRequest, "registerProducer")
            and hasattr(WebRequest, "producer") and hasattr(Server, "handle_reply")):
        raise RuntimeError("daphne or Twisted changed: review dashboard/daphne_backpressure.py")
    classImplements(ResponseBodyProducer, IPushProducer)

    handle_reply = Server.handle_reply

    async def handle_reply_with_backpressure(self, protocol, message):
        if message.get("type") != "http.response.body" or not isinstance(protocol, WebRequest):
            return await handle_reply(self, protocol, message)
        producer = getattr(protocol, "_frontier_body_producer", None)
        more_body = message.get("more_body", False)
        if not more_body and producer is not None and protocol.producer is producer:
            # Request.finish (in the final piece) must find no producer registered.
            if protocol.channel is not None:
                protocol.unregisterProducer()
            else:
                protocol.producer = None
        await handle_reply(self, protocol, message)
        if not more_body or protocol.finished or protocol.channel is None:
            return
        if producer is None:
            if protocol.producer is not None:  # someone else's: leave it alone
                return
            producer = ResponseBodyProducer(paused=protocol.channel._waitingForTransport)
            protocol._frontier_body_producer = producer
            protocol.registerProducer(producer, True)
        await producer.wait_writable(protocol)

    handle_reply_with_backpressure.__doc__ = handle_reply.__doc__
    Server.handle_reply = handle_reply_with_backpressure
    Server._frontier_response_backpressure = True
