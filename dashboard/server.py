"""The web server: uvicorn, configured once for every way Frontier is served
(`manage.py serve` in embedded and distributed mode, docker-compose, the tests).

uvicorn brings the flow control Frontier needs in both directions: it stops
reading a request body once 64 KB wait unread and reads on only when the
application asks for more (so dashboard.body_guard can refuse a body from its
headers), and an application's ``send()`` of a response body waits while the
client is behind (so a slow download is produced only as fast as it is read).

Two timeouts it does not have (asked for upstream as "--timeout-request-start"),
added by :class:`FrontierHttpProtocol` through uvicorn's documented
``Config(http=<protocol class>)`` and only asyncio's and httptools' public
callbacks:

- a connection must complete a request's headers within
  ``FRONTIER_HTTP_HEADER_SECONDS`` of opening or of the request's first byte
  (uvicorn's keep-alive timeout covers only the wait between requests, and it
  stops at the first byte), so idle and slow-header connections cannot pile up
  where no proxy stands in front (embedded mode);
- a client that reads nothing of a response for ``FRONTIER_STALLED_CLIENT_SECONDS``
  while the response waits for it is disconnected, which ends the response
  (Django's ASGI handler cancels it when the connection goes away).
"""

from __future__ import annotations

import asyncio
import logging

import uvicorn
from django.conf import settings
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)

APPLICATION = "dashboard.asgi:application"
#: How long a shutdown (Ctrl-C, SIGTERM) waits for open responses and websockets.
SHUTDOWN_SECONDS = 5


class FrontierHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header deadline and a stalled-client timeout."""

    _header_timer: asyncio.TimerHandle | None = None
    _stall_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:  # asyncio.Protocol
        super().connection_made(transport)
        self._arm_header_timer()

    def on_message_begin(self) -> None:  # httptools callback: a request's first byte
        if (
            self._header_timer is None
        ):  # the first request keeps the deadline of the connection's start
            self._arm_header_timer()
        super().on_message_begin()

    def on_headers_complete(self) -> None:  # httptools callback
        self._cancel("_header_timer")
        super().on_headers_complete()

    def pause_writing(self) -> None:  # asyncio.Protocol: the client is behind
        super().pause_writing()
        if self._stall_timer is None:
            self._stall_timer = self.loop.call_later(
                settings.FRONTIER_STALLED_CLIENT_SECONDS, self._stalled
            )

    def resume_writing(self) -> None:  # asyncio.Protocol: the client read
        self._cancel("_stall_timer")
        super().resume_writing()

    def connection_lost(self, exc) -> None:  # asyncio.Protocol
        self._cancel("_header_timer")
        self._cancel("_stall_timer")
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        self._cancel("_header_timer")
        self._header_timer = self.loop.call_later(
            settings.FRONTIER_HTTP_HEADER_SECONDS, self._headers_too_slow
        )

    def _cancel(self, name: str) -> None:
        timer = getattr(self, name)
        if timer is not None:
            timer.cancel()
            setattr(self, name, None)

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        log.info(
            "%s sent no complete request headers within %s s: closing the connection",
            _peer(self.transport),
            settings.FRONTIER_HTTP_HEADER_SECONDS,
        )
        self.transport.abort()

    def _stalled(self) -> None:
        self._stall_timer = None
        log.warning(
            "%s read nothing of a response for %s s: disconnecting it",
            _peer(self.transport),
            settings.FRONTIER_STALLED_CLIENT_SECONDS,
        )
        self.transport.abort()


def _peer(transport) -> str:
    peer = transport.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else "a client"


def browse_url(host: str, port: int) -> str:
    """The address to open in a browser for a server listening on `host`:`port`
    (a server on every interface, 0.0.0.0 or ::, is reached on this machine at
    the loopback address)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)  # noqa: S104
    if ":" in host:  # an IPv6 address
        host = f"[{host.strip('[]')}]"
    return f"http://{host}:{port}/"


def server_config(
    *,
    host: str,
    port: int,
    proxy_headers: bool = False,
    forwarded_allow_ips: str | None = None,
    access_log: bool = False,
) -> uvicorn.Config:
    """The uvicorn configuration every Frontier web process uses."""
    return uvicorn.Config(
        APPLICATION,
        host=host,
        port=port,
        http=FrontierHttpProtocol,
        ws="websockets-sansio",
        # Run events are small JSON messages: compressing each for every viewer
        # cost more server CPU per delivery (0.11 vs 0.08 ms) and p95 latency
        # (214 vs 129 ms, 200 viewers; docs/benchmarks.md) than it saves.
        ws_per_message_deflate=False,
        lifespan="off",  # Django's ASGI application has no lifespan events
        # Behind a proxy: the client's address (login throttling) and scheme come
        # from X-Forwarded-For / X-Forwarded-Proto, trusted from these addresses only.
        proxy_headers=proxy_headers,
        forwarded_allow_ips=forwarded_allow_ips,
        timeout_keep_alive=settings.FRONTIER_HTTP_KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
        access_log=access_log,
        log_config=None,  # Django's LOGGING is the one logging configuration
        server_header=False,
    )
