"""ASGI middleware that decides about a request body before anything reads it.

Django reads a whole body (spooling it to a temporary file) before any
middleware runs, and the CSRF check then parses a multipart body to look for
its token: an anonymous 60 MB upload, answered 403 in the end, took the server
from 176 MB to 861 MB. So, before the body is read:

- a body larger than ``FRONTIER_MAX_REQUEST_BYTES`` is refused with 413, from
  anyone (the run import, the largest upload, takes up to 50 MB);
- a multipart POST whose boundary Django's parser would refuse is a 400 (it
  raised from the CSRF check: a 500; Twisted used to refuse it first, see below);
- a body larger than :data:`ANONYMOUS_BODY_BYTES` is refused with 401 (API) or
  403 (pages) unless the request carries a session or Bearer token that
  authenticates. Smaller anonymous bodies (a login form) go on to Django,
  which answers them as before.

Daphne would receive the whole body before it calls the application (on disk
above 100 KB, then handed over in 8 KB messages), so under daphne the same
decisions are made earlier, as soon as the headers are in (see "daphne" below):
this middleware is what holds under any other ASGI server, and the second look
under daphne. ``README.md`` ("Limits") has the measured numbers.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from types import SimpleNamespace
from urllib.parse import urlsplit

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http.multipartparser import MultiPartParser
from django.utils.http import parse_header_parameters

from verifiers_app.api_errors import error_body, split_problem

#: Bodies up to this size are let through to Django without an identity check
#: (a login form is well under it).
ANONYMOUS_BODY_BYTES = 64 * 1024


def _header(scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value
    return None


def _body_size(scope) -> int | None:
    """The announced body size; None when it comes chunked (size unknown)."""
    raw = _header(scope, b"content-length")
    if raw is None:
        return None if _header(scope, b"transfer-encoding") else 0
    try:
        return int(raw)
    except ValueError:
        return None


def _bad_multipart(scope) -> bool:
    """A multipart/form-data POST that Django's MultiPartParser refuses at once."""
    if scope.get("method") != "POST":
        return False
    raw = (_header(scope, b"content-type") or b"").decode("latin-1")
    media, params = parse_header_parameters(raw)
    if media != "multipart/form-data":
        return False
    boundary = params.get("boundary")
    return not raw.isascii() or not boundary or not MultiPartParser.boundary_re.fullmatch(boundary)


def _cookie(scope, name: str) -> str | None:
    raw = _header(scope, b"cookie")
    if not raw:
        return None
    for part in raw.decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _identified(scope) -> bool:
    """Does the request carry a Bearer token or a session that authenticates?
    The same checks the API and the session middleware make, made early."""
    from django.contrib.auth import get_user
    from django.utils.module_loading import import_string

    from dashboard.models import ApiToken
    from dashboard.ws_auth import bearer_token

    token = bearer_token(scope)
    if token is not None and ApiToken.user_for(token) is not None:
        return True
    session_key = _cookie(scope, settings.SESSION_COOKIE_NAME)
    if session_key:
        store = import_string(settings.SESSION_ENGINE + ".SessionStore")
        user = get_user(SimpleNamespace(session=store(session_key)))
        return user.is_authenticated and user.is_active
    return False


class RequestBodyGuard:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        size = _body_size(scope)
        limit = settings.FRONTIER_MAX_REQUEST_BYTES
        if size is not None and size > limit:
            return await self._refuse(scope, send, 413, f"body: larger than {limit} bytes")
        if _bad_multipart(scope):
            return await self._refuse(scope, send, 400, "body: a multipart/form-data body needs a valid boundary")
        if (size is None or size > ANONYMOUS_BODY_BYTES) and not await sync_to_async(_identified)(scope):
            api = scope.get("path", "").startswith("/api/")
            return await self._refuse(scope, send, 401 if api else 403, "Authentication required")
        return await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(scope, send, status: int, detail: str) -> None:
        # The body is never read: the connection is closed after the answer, so
        # the client cannot send it as the next request.
        headers, body = refusal(status, detail, api=scope.get("path", "").startswith("/api/"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def refusal(status: int, detail: str, *, api: bool) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The headers and body of a refused request (here and in daphne): the API's
    one error body under /api/, one line of text elsewhere; the connection closes."""
    if api:
        field, message = split_problem(detail)
        body = json.dumps(error_body(detail, [(field, message)] if field else [])).encode()
        content_type = b"application/json"
    else:
        body, content_type = f"{status}: {detail}\n".encode(), b"text/plain; charset=utf-8"
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    return headers, body


# --- daphne ---------------------------------------------------------------------
# Three things happen inside daphne (Twisted) before any application code runs,
# measured with a 60 MB upload:
# 1. Twisted's Request parses every multipart or url-encoded POST body into
#    `request.args`, all in memory (+650 MB for 60 MB), though daphne never uses
#    `args`. The patch hides the content type from that parser only.
# 2. The body is received whatever its size (into a temporary file), then put on
#    the application's queue in memory. The patch refuses a body larger than
#    FRONTIER_MAX_REQUEST_BYTES as soon as its Content-Length is known (or, when
#    it comes chunked, once that many bytes arrived), and reads no more of it.
# 3. An anonymous body below that limit was still received whole (a 40 MB one:
#    +40 MB) before RequestBodyGuard could refuse it. The patch decides as soon
#    as the headers are in (Twisted calls gotLength right after them):
#    - no session cookie and no Authorization header: anonymous, decided from
#      the headers alone. A body announced above ANONYMOUS_BODY_BYTES is refused
#      at once; a chunked one once that many bytes arrived.
#    - a session cookie or an Authorization header, and a body that may exceed
#      ANONYMOUS_BODY_BYTES: whether it authenticates needs the database (or
#      cache), which must not block the reactor. The connection stops reading
#      (TCP back-pressure on the client) while `_identified` — the same check
#      RequestBodyGuard makes — runs in Twisted's thread pool; then the body is
#      refused (a wrong token, a stale session) or reading resumes. A body that
#      was complete before the answer waits for it before daphne hands it on.
# Refused requests get RequestBodyGuard's answers (refusal()), then the
# connection closes.


def _daphne_api_path(request) -> bool:
    """Is the request (its request line just parsed by the channel) under /api/?"""
    return urlsplit(getattr(request.channel, "_path", b"") or b"").path.startswith(b"/api/")


def _daphne_refuse(request, status: int, detail: str, *, api: bool) -> None:
    """Answer a request daphne is still receiving, and stop reading it."""
    headers, body = refusal(status, detail, api=api)
    request._frontier_refused = True
    if getattr(request, "content", None) is not None:
        request.content.close()  # a temporary file above 100 KB
    request.content = None
    # allHeadersReceived would answer "100 Continue" right after this: not any more.
    request.requestHeaders.removeHeader(b"expect")
    head = f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n".encode()
    channel, transport = request.channel, request.channel.transport
    transport.write(head + b"".join(k + b": " + v + b"\r\n" for k, v in headers) + b"\r\n" + body)
    _close_lingering(channel, transport)


#: How long a refused client may go on sending (read and dropped) before the
#: connection is cut.
LINGER_SECONDS = 5.0


def _close_lingering(channel, transport) -> None:
    """Close after the answer without resetting it away. Closing a socket with
    unread data makes the kernel answer the client's next bytes with a reset,
    which can reach a client that is still sending before it read the answer
    (it then reports a network error, not our 403/413). So: nothing more is
    parsed, the answer is followed by a FIN (half close), what the client still
    sends is read and dropped, and the connection is cut when the client
    closes or after LINGER_SECONDS — like a web server's lingering close."""
    channel.dataReceived = lambda data: None  # Twisted's own idiom for "ignore the rest"
    if not hasattr(transport, "loseWriteConnection"):
        channel.loseConnection()
        return
    transport.resumeProducing()  # it may be paused for an identity check
    transport.loseWriteConnection()
    # The channel's callLater (TimeoutMixin's: the reactor's), as Twisted's own timeouts use.
    channel.callLater(LINGER_SECONDS, lambda: transport.connected and transport.abortConnection())


def _refuse_too_large(request) -> None:
    # JSON on every path, as before: a script reading the error names the field.
    _daphne_refuse(request, 413, f"body: larger than {settings.FRONTIER_MAX_REQUEST_BYTES} bytes", api=True)


def _refuse_anonymous(request, api: bool) -> None:
    _daphne_refuse(request, 401 if api else 403, "Authentication required", api=api)


def _daphne_scope(request) -> dict:
    """The part of an ASGI scope `_identified` reads: the headers, lower-cased."""
    return {"headers": [(name.lower(), value) for name, values in request.requestHeaders.getAllRawHeaders()
                        for value in values]}


def _identified_in_thread(scope) -> bool:
    """`_identified` for a Twisted pool thread: its database connection is closed after."""
    from django.db import connections

    try:
        return _identified(scope)
    finally:
        connections.close_all()


def _check_identity_off_loop(scope):
    """A Deferred that fires with `_identified(scope)`, computed in Twisted's thread pool."""
    from twisted.internet.threads import deferToThread

    return deferToThread(_identified_in_thread, scope)


def _carries_credentials(request) -> bool:
    return bool(request.received_cookies.get(settings.SESSION_COOKIE_NAME.encode())) or \
        request.requestHeaders.hasHeader(b"authorization")


def install_daphne_body_limits() -> None:
    """Patch daphne's request class (idempotent); see the comment above."""
    try:
        from daphne.http_protocol import WebRequest
    except ImportError:  # not served by daphne
        return
    if getattr(WebRequest, "_frontier_body_limits", False):
        return
    from twisted.web import http

    process = WebRequest.process

    def gotLength(self, length):
        self._frontier_refused, self._frontier_received = False, 0
        self._frontier_anonymous = False  # decided from the headers: no credentials at all
        self._frontier_identity = None  # a Deferred while a session or token is being checked
        self._frontier_waiting = None  # requestReceived's arguments, held until the check answers
        self._frontier_api = _daphne_api_path(self)  # the channel forgets the path once the body is in
        if length is not None and length > settings.FRONTIER_MAX_REQUEST_BYTES:
            _refuse_too_large(self)
            return
        if length is None or length > ANONYMOUS_BODY_BYTES:
            if not _carries_credentials(self):
                if length is not None:
                    _refuse_anonymous(self, self._frontier_api)
                    return
                self._frontier_anonymous = True  # chunked: refused past ANONYMOUS_BODY_BYTES
            else:
                self.channel.transport.pauseProducing()
                self._frontier_identity = _check_identity_off_loop(_daphne_scope(self))
                self._frontier_identity.addCallbacks(lambda known: _identity_known(self, known),
                                                     lambda failure: _identity_known(self, None, failure))
        http.Request.gotLength(self, length)

    def _identity_known(self, identified, failure=None):
        self._frontier_identity = None
        if self._frontier_refused or self.channel is None or getattr(self, "_disconnected", False):
            return  # refused meanwhile (too large) or the client went away
        if failure is not None:  # the database is down: RequestBodyGuard asks again and Django answers
            logging.getLogger("dashboard.body_guard").warning("identity check failed: %s", failure.getErrorMessage())
        elif not identified:
            _refuse_anonymous(self, self._frontier_api)
            return
        if self._frontier_waiting is not None:  # the whole body arrived before the answer
            command, path, version = self._frontier_waiting
            self._frontier_waiting = None
            _received(self, command, path, version)
        elif not self.channel._handlingRequest:
            self.channel.transport.resumeProducing()

    def handleContentChunk(self, data):
        if getattr(self, "_frontier_refused", False):
            return  # the connection is closing; drop what is still arriving
        self._frontier_received = getattr(self, "_frontier_received", 0) + len(data)
        if self._frontier_received > settings.FRONTIER_MAX_REQUEST_BYTES:
            _refuse_too_large(self)
            return
        if getattr(self, "_frontier_anonymous", False) and self._frontier_received > ANONYMOUS_BODY_BYTES:
            _refuse_anonymous(self, self._frontier_api)
            return
        http.Request.handleContentChunk(self, data)

    def _received(self, command, path, version):
        content_type = self.requestHeaders.getRawHeaders(b"content-type")
        if content_type is not None:
            self.requestHeaders.removeHeader(b"content-type")  # Twisted parses no form args without it
            self._frontier_content_type = content_type
        http.Request.requestReceived(self, command, path, version)

    def requestReceived(self, command, path, version):
        if getattr(self, "_frontier_refused", False):
            return
        if getattr(self, "_frontier_identity", None) is not None:
            self._frontier_waiting = (command, path, version)
            return
        _received(self, command, path, version)

    def restoring_process(self):
        content_type = getattr(self, "_frontier_content_type", None)
        if content_type is not None:
            self.requestHeaders.setRawHeaders(b"content-type", content_type)
        return process(self)

    WebRequest.gotLength = gotLength
    WebRequest.handleContentChunk = handleContentChunk
    WebRequest.requestReceived = requestReceived
    WebRequest.process = restoring_process
    WebRequest._frontier_body_limits = True
