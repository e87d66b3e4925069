"""The ASGI body guard (dashboard/body_guard.py) in front of the real
application: large bodies are answered before they are read, anonymous ones
refused; small ones and identified ones reach Django as before. Then the daphne
patch on a Twisted channel: the same answers as soon as the headers arrive
(tests/e2e/test_hostile_input.py measures them on a real daphne)."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator

from dashboard.account_services import api_token_create
from dashboard.asgi import application
from tests.dashboard.test_embedded_mode import session_headers

pytestmark = pytest.mark.django_db(transaction=True)


async def post(path: str, size: int, headers=()) -> tuple[int, bytes, bool]:
    """POST a body announced as `size` bytes; also says whether the application read it."""
    scope = {
        "type": "http", "http_version": "1.1", "method": "POST", "path": path, "raw_path": path.encode(),
        "root_path": "", "scheme": "http", "query_string": b"", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
        "headers": [(b"host", b"127.0.0.1"), (b"content-length", str(size).encode()), *headers],
    }
    if not any(name == b"content-type" for name, _ in headers):
        scope["headers"].append((b"content-type", b"application/json"))
    communicator = ApplicationCommunicator(application, scope)
    await communicator.send_input({"type": "http.request", "body": b"{" + b" " * (size - 2) + b"}", "more_body": False})
    start = await communicator.receive_output(10)
    body = (await communicator.receive_output(10))["body"]
    read = communicator.input_queue.empty()  # the body message was taken off the queue
    await communicator.wait(10)
    return start["status"], body, read


async def test_an_anonymous_body_above_64_kb_is_refused_unread():
    status, body, read = await post("/api/verifiers/", 100_000)
    assert (status, json.loads(body), read) == (401, {"detail": "Authentication required", "problems": []}, False)
    status, body, read = await post("/runs/import/", 100_000)
    assert (status, read) == (403, False)


async def test_a_small_anonymous_body_reaches_django_which_answers_as_before():
    status, body, read = await post("/api/verifiers/", 100)
    assert read and status == 401 and json.loads(body)["detail"].startswith("Authentication required")  # the API's own


async def test_a_large_body_with_a_valid_session_or_token_reaches_django(user):
    status, _, read = await post("/api/verifiers/lint", 100_000, await sync_to_async(session_headers)(user))
    assert read and status != 401  # Django's own answer (here CSRF: no token)
    _, token = await sync_to_async(api_token_create)(user=user, name="t")
    status, body, read = await post("/api/verifiers/lint", 100_000, [(b"authorization", f"Bearer {token}".encode())])
    assert read and status == 400  # the body reached the API, which names what "{   }" lacks
    assert json.loads(body)["problems"][0]["field"] == "spec"


async def test_a_wrong_token_or_a_stale_session_is_anonymous():
    status, _, read = await post("/api/verifiers/lint", 100_000, [(b"authorization", b"Bearer nope"),
                                                                  (b"cookie", b"sessionid=stale")])
    assert (status, read) == (401, False)


async def test_a_body_over_the_request_limit_is_a_413_for_everyone(user, settings):
    settings.FRONTIER_MAX_REQUEST_BYTES = 200_000
    status, body, read = await post("/api/verifiers/lint", 300_000, await sync_to_async(session_headers)(user))
    assert (status, read) == (413, False)
    assert json.loads(body) == {"detail": "body: larger than 200000 bytes",
                                "problems": [{"field": "body", "message": "larger than 200000 bytes"}]}


@pytest.mark.parametrize("content_type", [b"multipart/form-data", b"multipart/form-data; boundary=", b"multipart/form-data; boundary=\xff"])
async def test_a_multipart_post_without_a_valid_boundary_is_a_400_not_a_500(user, content_type):
    # Django's parser raised from the CSRF check (a 500); Twisted had refused it before we patched its form parsing out.
    scope_headers = [*await sync_to_async(session_headers)(user), (b"content-type", content_type)]
    status, body, read = await post("/api/runs/1/cancel", 10, scope_headers)
    assert (status, read) == (400, False)
    assert json.loads(body)["problems"] == [{"field": "body", "message": "a multipart/form-data body needs a valid boundary"}]


# --- the daphne patch: answers from the headers, before the body ------------------


def daphne_connection(transport=None, clock=None):
    """daphne's request class on a Twisted HTTP channel over an in-memory transport."""
    from types import SimpleNamespace

    from daphne.http_protocol import WebRequest
    from twisted.internet.testing import StringTransport
    from twisted.web.http import HTTPChannel

    from dashboard.body_guard import install_daphne_body_limits

    install_daphne_body_limits()
    channel = HTTPChannel()
    channel.timeOut = None  # no idle timer on the (not running) reactor
    channel.requestFactory = WebRequest
    channel.factory = SimpleNamespace(server=SimpleNamespace(protocol_connected=lambda request: None,
                                                             protocol_disconnected=lambda request: None))
    if clock is not None:
        channel.callLater = clock.callLater
    transport = transport or StringTransport()
    channel.makeConnection(transport)
    return channel, transport


@pytest.mark.parametrize("path, answer", [("/runs/import/", b"HTTP/1.1 403 Forbidden\r\n"),
                                          ("/api/tasksets/import", b"HTTP/1.1 401 Unauthorized\r\n")])
def test_daphne_refuses_an_anonymous_40_mb_body_from_its_headers_alone(path, answer):
    channel, transport = daphne_connection()
    channel.dataReceived(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {40 * 1024 * 1024}\r\n"
                         "Expect: 100-continue\r\n\r\n".encode())
    head, _, body = transport.value().partition(b"\r\n\r\n")
    assert head.startswith(answer) and b"connection: close" in head.lower()
    assert b"100 Continue" not in body  # the client is not invited to send the body
    assert transport.disconnecting
    if path.startswith("/api/"):
        assert json.loads(body) == {"detail": "Authentication required", "problems": []}


def test_daphne_refuses_an_anonymous_chunked_body_once_64_kb_arrived():
    channel, transport = daphne_connection()
    channel.dataReceived(b"POST /runs/import/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    channel.dataReceived(b"%x\r\n" % (32 * 1024) + b" " * (32 * 1024) + b"\r\n")
    assert transport.value() == b""  # 32 KB: still reading
    channel.dataReceived(b"%x\r\n" % (40 * 1024) + b" " * (40 * 1024) + b"\r\n")
    assert transport.value().startswith(b"HTTP/1.1 403 Forbidden\r\n") and transport.disconnecting


@pytest.mark.parametrize("identified", [True, False])
def test_daphne_stops_reading_a_large_body_with_credentials_until_they_are_checked(monkeypatch, identified):
    from twisted.internet.defer import Deferred

    from dashboard import body_guard

    checks = []
    monkeypatch.setattr(body_guard, "_check_identity_off_loop", lambda scope: checks.append((scope, Deferred())) or checks[-1][1])
    channel, transport = daphne_connection()
    channel.dataReceived(f"POST /runs/import/ HTTP/1.1\r\nHost: x\r\nCookie: sessionid=abc\r\n"
                         f"Content-Length: {40 * 1024 * 1024}\r\n\r\n".encode())
    assert transport.producerState == "paused" and transport.value() == b""
    (scope, check), = checks
    assert (b"cookie", b"sessionid=abc") in scope["headers"]  # what _identified reads
    check.callback(identified)
    if identified:
        assert transport.producerState == "producing" and transport.value() == b""  # reading on
        channel.connectionLost(None)
    else:  # a stale session: refused, the body never read
        assert transport.value().startswith(b"HTTP/1.1 403 Forbidden\r\n") and transport.disconnecting


def test_daphne_reads_a_small_anonymous_body_as_before():
    channel, transport = daphne_connection()
    channel.dataReceived(b"POST /login/ HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n")
    assert transport.producerState == "producing" and transport.value() == b""
    channel.connectionLost(None)


def test_daphne_answers_a_refused_client_then_drops_what_it_still_sends_and_cuts_it_after_a_while():
    # Closing with unread data would answer the client's next bytes with a reset,
    # which can reach it before it read the answer: a half close, reading on, instead.
    from twisted.internet.task import Clock
    from twisted.internet.testing import StringTransport

    from dashboard.body_guard import LINGER_SECONDS

    class HalfClosingTransport(StringTransport):
        connected, write_closed, aborted = True, False, False

        def loseWriteConnection(self):
            self.write_closed = True

        def abortConnection(self):
            self.aborted, self.connected = True, False

    clock = Clock()
    channel, transport = daphne_connection(HalfClosingTransport(), clock)
    channel.dataReceived(f"POST /runs/import/ HTTP/1.1\r\nHost: x\r\nContent-Length: {40 * 1024 * 1024}\r\n\r\n".encode())
    answer = transport.value()
    assert answer.startswith(b"HTTP/1.1 403 Forbidden\r\n") and transport.write_closed
    assert transport.producerState == "producing" and not transport.disconnecting  # still reading
    channel.dataReceived(b" " * (8 * 1024 * 1024))  # the body goes on arriving: dropped, not stored
    assert transport.value() == answer
    clock.advance(LINGER_SECONDS)
    assert transport.aborted
