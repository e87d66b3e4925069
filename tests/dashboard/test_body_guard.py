"""The ASGI body guard (dashboard/body_guard.py) in front of the real
application: large bodies are answered before they are read, anonymous ones
refused; small ones and identified ones reach Django as before
(tests/e2e/test_hostile_input.py measures the same on a real server)."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator

from dashboard.account_services import api_token_create
from dashboard.asgi import application
from tests.dashboard.test_embedded_mode import session_headers

pytestmark = pytest.mark.django_db(transaction=True)


def scope_of(path: str, headers) -> dict:
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "scheme": "http",
        "query_string": b"",
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "headers": [(b"host", b"127.0.0.1"), *headers],
    }
    if not any(name == b"content-type" for name, _ in headers):
        scope["headers"].append((b"content-type", b"application/json"))
    return scope


async def answer_of(communicator) -> tuple[int, bytes]:
    start = await communicator.receive_output(10)
    body = b""
    while True:
        message = await communicator.receive_output(10)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await communicator.wait(10)
    return start["status"], body


async def post(path: str, size: int, headers=()) -> tuple[int, bytes, bool]:
    """POST a body announced as `size` bytes; also says whether the answer waited
    for the body (False: answered from the headers, before any byte of it was sent)."""
    communicator = ApplicationCommunicator(
        application, scope_of(path, [(b"content-length", str(size).encode()), *headers])
    )
    waited = await communicator.receive_nothing(timeout=0.5)
    await communicator.send_input(
        {"type": "http.request", "body": b"{" + b" " * (size - 2) + b"}", "more_body": False}
    )
    status, body = await answer_of(communicator)
    return status, body, waited


async def test_an_anonymous_body_above_64_kb_is_refused_unread():
    status, body, waited = await post("/api/verifiers/", 100_000)
    assert (status, json.loads(body), waited) == (
        401,
        {"detail": "Authentication required", "problems": []},
        False,
    )
    status, body, waited = await post("/runs/import/", 100_000)
    assert (status, waited) == (403, False)


async def test_a_small_anonymous_body_reaches_django_which_answers_as_before():
    status, body, waited = await post("/api/verifiers/", 100)
    assert (
        waited
        and status == 401
        and json.loads(body)["detail"].startswith("Authentication required")
    )  # the API's own


async def test_a_large_body_with_a_valid_session_or_token_reaches_django(user):
    status, _, waited = await post(
        "/api/verifiers/lint", 100_000, await sync_to_async(session_headers)(user)
    )
    assert waited and status != 401  # Django's own answer (here CSRF: no token)
    _, token = await sync_to_async(api_token_create)(user=user, name="t")
    status, body, waited = await post(
        "/api/verifiers/lint", 100_000, [(b"authorization", f"Bearer {token}".encode())]
    )
    assert waited and status == 400  # the body reached the API, which names what "{   }" lacks
    assert json.loads(body)["problems"][0]["field"] == "spec"


async def test_a_wrong_token_or_a_stale_session_is_anonymous():
    status, _, waited = await post(
        "/api/verifiers/lint",
        100_000,
        [(b"authorization", b"Bearer nope"), (b"cookie", b"sessionid=stale")],
    )
    assert (status, waited) == (401, False)


async def test_a_body_over_the_request_limit_is_a_413_for_everyone(user, settings):
    settings.FRONTIER_MAX_REQUEST_BYTES = 200_000
    status, body, waited = await post(
        "/api/verifiers/lint", 300_000, await sync_to_async(session_headers)(user)
    )
    assert (status, waited) == (413, False)
    assert json.loads(body) == {
        "detail": "body: larger than 200000 bytes",
        "problems": [{"field": "body", "message": "larger than 200000 bytes"}],
    }


@pytest.mark.parametrize(
    "content_type",
    [
        b"multipart/form-data",
        b"multipart/form-data; boundary=",
        b"multipart/form-data; boundary=\xff",
    ],
)
async def test_a_multipart_post_without_a_valid_boundary_is_a_400_not_a_500(user, content_type):
    # Django's parser raised from the CSRF check (a 500); Twisted had refused it before we patched its form parsing out.
    scope_headers = [*await sync_to_async(session_headers)(user), (b"content-type", content_type)]
    status, body, waited = await post("/api/runs/1/cancel", 10, scope_headers)
    assert (status, waited) == (400, False)
    assert json.loads(body)["problems"] == [
        {"field": "body", "message": "a multipart/form-data body needs a valid boundary"}
    ]


async def test_an_anonymous_chunked_body_is_read_up_to_64_kb_then_refused():
    communicator = ApplicationCommunicator(
        application, scope_of("/runs/import/", [(b"transfer-encoding", b"chunked")])
    )
    await communicator.send_input(
        {"type": "http.request", "body": b" " * 32 * 1024, "more_body": True}
    )
    assert await communicator.receive_nothing(timeout=0.5)  # 32 KB: reading on
    await communicator.send_input(
        {"type": "http.request", "body": b" " * 40 * 1024, "more_body": True}
    )
    start = await communicator.receive_output(10)
    assert start["status"] == 403 and (b"connection", b"close") in start["headers"]
    await communicator.send_input(
        {"type": "http.request", "body": b" " * 1024, "more_body": False}
    )  # dropped
    assert (await communicator.receive_output(10))["body"].startswith(b"403")
    assert (await communicator.receive_output(10)) == {
        "type": "http.response.body",
        "body": b"",
        "more_body": False,
    }
    await communicator.wait(10)


async def test_a_chunked_body_with_a_valid_token_is_refused_once_past_the_request_limit(
    user, settings
):
    settings.FRONTIER_MAX_REQUEST_BYTES = 200_000
    _, token = await sync_to_async(api_token_create)(user=user, name="t")
    communicator = ApplicationCommunicator(
        application,
        scope_of(
            "/api/verifiers/lint",
            [(b"transfer-encoding", b"chunked"), (b"authorization", f"Bearer {token}".encode())],
        ),
    )
    for _ in range(3):
        await communicator.send_input(
            {"type": "http.request", "body": b" " * 100_000, "more_body": True}
        )
    await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
    status, body = await answer_of(communicator)
    assert status == 413 and json.loads(body)["detail"] == "body: larger than 200000 bytes"


async def test_a_refused_client_that_keeps_sending_is_cut_off_after_the_linger_time(monkeypatch):
    from dashboard import body_guard

    monkeypatch.setattr(body_guard, "LINGER_SECONDS", 0.3)
    communicator = ApplicationCommunicator(
        application, scope_of("/runs/import/", [(b"content-length", b"40000000")])
    )
    start = await communicator.receive_output(10)
    assert start["status"] == 403
    await communicator.send_input(
        {"type": "http.request", "body": b" " * 1024, "more_body": True}
    )  # and never the rest
    assert (await communicator.receive_output(10))["body"].startswith(b"403")
    assert (await communicator.receive_output(2))[
        "more_body"
    ] is False  # the response ends: the server closes
