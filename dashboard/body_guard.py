"""ASGI middleware that decides about a request body before anything reads it.

Django reads a whole body (spooling it to a temporary file) before any
middleware runs, and the CSRF check then parses a multipart body to look for
its token. The server (uvicorn, dashboard/server.py) reads no more than 64 KB
of a body until the application asks for it, so this guard answers from the
headers, before the body is read:

- a body larger than ``FRONTIER_MAX_REQUEST_BYTES`` is refused with 413, from
  anyone (the run import, the largest upload, takes up to 50 MB); a chunked
  body (size unknown) is counted as it is read and refused once it passes
  the limit;
- a multipart POST whose boundary Django's parser would refuse is a 400 (it
  would raise from the CSRF check: a 500);
- a body larger than :data:`ANONYMOUS_BODY_BYTES` (or chunked, once it passes
  that size) is refused with 401 (API) or 403 (pages) unless the request
  carries a session or Bearer token that authenticates. Smaller anonymous
  bodies (a login form) go on to Django, which answers them.

A refused request gets its whole answer at once; what the client still sends
is then read and dropped for at most :data:`LINGER_SECONDS` before the
connection closes, so the client reads the answer instead of a reset.
docs/benchmarks.md ("bench/anonymous_upload.py") has the measured numbers.
"""

from __future__ import annotations

import asyncio
import json

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http.multipartparser import MultiPartParser
from django.utils.http import parse_header_parameters

from dashboard.lib.api_errors import error_body, split_problem

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
    from django.http import HttpRequest
    from django.utils.module_loading import import_string

    from dashboard.models import ApiToken
    from dashboard.ws_auth import bearer_token

    token = bearer_token(scope)
    if token is not None and ApiToken.user_for(token) is not None:
        return True
    session_key = _cookie(scope, settings.SESSION_COOKIE_NAME)
    if session_key:
        store = import_string(settings.SESSION_ENGINE + ".SessionStore")
        request = HttpRequest()  # get_user reads only its session
        request.session = store(session_key)
        user = get_user(request)
        return user.is_authenticated and user.is_active
    return False


#: How long a refused client may go on sending (read and dropped) before the
#: connection closes, and how much of it is read at most.
LINGER_SECONDS = 5.0
LINGER_BYTES = 64 * 1024 * 1024


class RequestBodyGuard:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        api = scope.get("path", "").startswith("/api/")
        size = _body_size(scope)
        limit = settings.FRONTIER_MAX_REQUEST_BYTES
        if size is not None and size > limit:
            return await _refuse(receive, send, 413, f"body: larger than {limit} bytes", api=True)
        if _bad_multipart(scope):
            return await _refuse(
                receive,
                send,
                400,
                "body: a multipart/form-data body needs a valid boundary",
                api=api,
            )
        anonymous = (size is None or size > ANONYMOUS_BODY_BYTES) and not await sync_to_async(
            _identified
        )(scope)
        if anonymous and size is not None:
            return await _refuse(
                receive, send, 401 if api else 403, "Authentication required", api=api
            )
        if size is None:  # chunked: counted as the application reads it
            receive, send = _CountedBody(receive, send, anonymous=anonymous, api=api).channels()
        return await self.app(scope, receive, send)


class _CountedBody:
    """The receive and send of a chunked request: past its limit (the anonymous
    one, or the request limit) the request is refused and the application is
    told the client went away; whatever it sends after that is dropped."""

    def __init__(self, receive, send, *, anonymous: bool, api: bool):
        self._receive, self._send = receive, send
        self.anonymous, self.api = anonymous, api
        self.received = 0
        self.refused = False

    def channels(self):
        return self.receive, self.send

    async def receive(self):
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            limit = settings.FRONTIER_MAX_REQUEST_BYTES
            if self.received > limit:
                await self._refuse(413, f"body: larger than {limit} bytes", api=True)
            elif self.anonymous and self.received > ANONYMOUS_BODY_BYTES:
                await self._refuse(
                    401 if self.api else 403, "Authentication required", api=self.api
                )
            if self.refused:
                return {"type": "http.disconnect"}
        return message

    async def send(self, message):
        if not self.refused:
            await self._send(message)

    async def _refuse(self, status: int, detail: str, *, api: bool) -> None:
        self.refused = True
        await _refuse(self._receive, self._send, status, detail, api=api)


async def _refuse(receive, send, status: int, detail: str, *, api: bool) -> None:
    """Answer in full, then read and drop what the client still sends (bounded
    by LINGER_SECONDS and LINGER_BYTES) before the response ends and the
    server closes the connection: closing a socket with unread data makes the
    kernel answer with a reset, which can reach a client still sending before
    it has read the answer."""
    headers, body = refusal(status, detail, api=api)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": True})
    dropped = 0
    try:
        async with asyncio.timeout(LINGER_SECONDS):
            while dropped < LINGER_BYTES:
                message = await receive()
                if message["type"] != "http.request":
                    break
                dropped += len(message.get("body", b""))
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        pass
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def refusal(status: int, detail: str, *, api: bool) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The headers and body of a refused request: the API's
    one error body under /api/, one line of text elsewhere; the connection closes."""
    if api:
        field, message = split_problem(detail)
        body = json.dumps(error_body(detail, [(field, message)] if field else [])).encode()
        content_type = b"application/json"
    else:
        body, content_type = f"{status}: {detail}\n".encode(), b"text/plain; charset=utf-8"
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    return headers, body
