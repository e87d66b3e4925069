"""Distributed mode for real: a task executed by a `celery worker` process
reaches a websocket client of a web process through Redis."""

import json
import re
import time
import urllib.request

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from dashboard.celery_tasks import worker_ping
from optimizer.models import Run
from tests.integration.conftest import checkout_served_url, session_cookie, start_web


def ws_url(server, run_id: int, after: int = 0) -> str:
    return server.url.replace("http://", "ws://") + f"/ws/runs/{run_id}/?after={after}"


def test_the_test_process_itself_runs_on_postgresql_and_redis(settings):
    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    assert settings.CELERY_BROKER_URL.startswith("redis://")


def test_a_task_in_a_worker_process_reaches_a_websocket_client_through_redis(
    web_server, celery_worker, user
):
    run = Run.objects.create(owner=user, name="distributed")
    with connect(
        ws_url(web_server, run.pk),
        additional_headers={"Cookie": session_cookie(user)},
        origin=web_server.url,
        open_timeout=10,
    ) as ws:
        sent_at = time.monotonic()
        worker_ping.apply_async(args=[run.pk, "through redis"], queue=celery_worker.queue)
        message = json.loads(ws.recv(timeout=30))
    assert message["type"] == "worker.ping"
    assert message["data"]["note"] == "through redis"
    assert message["seq"] == 1
    assert time.monotonic() - sent_at < 30
    assert run.events.get(seq=1).type == "worker.ping"


def test_a_reconnecting_client_receives_what_it_missed_from_the_database(
    web_server, celery_worker, user
):
    run = Run.objects.create(owner=user, name="replay")
    for note in ("one", "two", "three"):
        worker_ping.apply_async(args=[run.pk, note], queue=celery_worker.queue)
    deadline = time.monotonic() + 30
    while run.events.count() < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    with connect(
        ws_url(web_server, run.pk, after=1),
        additional_headers={"Cookie": session_cookie(user)},
        origin=web_server.url,
    ) as ws:
        missed = [json.loads(ws.recv(timeout=10)) for _ in range(2)]
    # The worker takes the three tasks in any order: the log says which note got which seq.
    assert [(m["seq"], m["type"], m["data"]) for m in missed] == [
        (e.seq, e.type, e.payload) for e in run.events.filter(seq__gt=1).order_by("seq")
    ]
    assert [m["seq"] for m in missed] == [2, 3]


def test_the_web_process_refuses_an_anonymous_websocket(web_server, user):
    run = Run.objects.create(owner=user)
    with (
        pytest.raises(InvalidStatus) as refused,
        connect(ws_url(web_server, run.pk), origin=web_server.url, open_timeout=10),
    ):
        pass
    assert refused.value.response.status_code == 403


def test_the_web_process_serves_static_files_hashed_compressed_and_cached_with_debug_off(
    web_server,
):
    with urllib.request.urlopen(web_server.url + "/login/", timeout=10) as response:
        page = response.read().decode()
    css = re.search(r'href="(/static/css/frontier\.[0-9a-f]{12}\.css)"', page).group(1)
    for path in (css, "/static/js/nav.js"):
        request = urllib.request.Request(web_server.url + path, headers={"Accept-Encoding": "br"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200 and len(response.read()) > 100
            if path == css:
                assert response.headers["Content-Encoding"] == "br"
                assert response.headers["Cache-Control"] == "max-age=31536000, public, immutable"
            else:  # a plain name (no page links one) is not cached for long
                assert response.headers["Cache-Control"] == "max-age=60, public"


def test_a_web_process_of_the_tests_leaves_the_checkouts_served_address_alone(
    services_env, tmp_path
):
    """`manage.py serve` records the address it listens on in its data
    directory, where the CLI of that directory reads it (dashboard/lib/site_url.py).
    A test's web process records it in a directory of the test's own: the
    checkout's var/served-url, a `make demo`'s, is what it was."""
    before = checkout_served_url()
    web = start_web(services_env, tmp_path / "web.log")
    web.stop()
    assert checkout_served_url() == before
    assert (tmp_path / "data" / "served-url").read_text() == web.url + "/\n"


def test_a_session_is_checked_on_postgresql_before_a_large_body_is_read(web_server, user):
    # The session is looked up (in a thread, not on the event loop) before the body
    # is read; a valid one gets its body read, a stale one a 403 at once.
    import http.client
    import urllib.parse

    def post(cookie: str, send_body: bool) -> int:
        parsed = urllib.parse.urlsplit(web_server.url)
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
        body = b"{" + b" " * 200_000 + b"}"
        conn.putrequest("POST", "/runs/import/")
        for name, value in (
            ("Cookie", cookie),
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
        ):
            conn.putheader(name, value)
        conn.endheaders()
        if send_body:
            conn.send(body)
        status = conn.getresponse().status
        conn.close()
        return status

    assert post("sessionid=stale", send_body=False) == 403  # answered without the body
    assert (
        post(session_cookie(user), send_body=True) == 403
    )  # read, then Django's CSRF check (no token sent)
    assert "identity check failed" not in web_server.log()


def test_a_group_send_to_many_viewers_of_one_web_process_is_one_redis_message(settings):
    # What keeps fan-out cheap (docs/benchmarks.md "bench/fanout.py"):
    # channels-redis queues a group message once per web process, with the list
    # of that process's member channels, and the process decodes it once for
    # all of them.
    import asyncio
    import uuid

    import redis
    from channels.layers import get_channel_layer

    group = f"run-fanout-{uuid.uuid4().hex[:8]}"
    message = {"type": "run.events", "events": [[1, '{"seq": 1}']]}

    async def scenario():
        layer = get_channel_layer()
        channels = [await layer.new_channel() for _ in range(50)]
        for channel in channels:
            await layer.group_add(group, channel)
        try:
            await layer.group_send(group, message)
            store = redis.Redis.from_url(settings.REDIS_URL)
            queued = [
                store.zcard(key)
                for key in store.scan_iter(f"{layer.prefix}specific.{layer.client_prefix}!*")
            ]
            received = [await asyncio.wait_for(layer.receive(channel), 5) for channel in channels]
        finally:
            for channel in channels:
                await layer.group_discard(group, channel)
        return queued, received

    queued, received = asyncio.run(scenario())
    assert queued == [1]
    assert received == [message] * 50
