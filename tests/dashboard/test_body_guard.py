"""The ASGI body guard (dashboard/body_guard.py) in front of the real
application: large bodies are answered before they are read, anonymous ones
refused; small ones and identified ones reach Django as before."""

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
