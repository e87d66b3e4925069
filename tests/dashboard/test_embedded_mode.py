"""The embedded default, end to end: a Celery task executed by the worker that
lives inside this process writes an event that a websocket client receives."""

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from dashboard.asgi import application
from dashboard.celery_tasks import worker_ping
from dashboard.embedded import ensure_worker, stop_worker
from optimizer.models import Run, RunEvent, RunStatus


def session_headers(user) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    return [(b"cookie", cookie.encode()), (b"origin", b"http://127.0.0.1")]


@pytest.fixture
def embedded_worker():
    from dashboard.celery import app

    # Earlier tests in this process may have queued tasks on the in-memory broker
    # (launches committed in transactional tests); they are not this test's.
    app.control.purge()
    worker = ensure_worker(concurrency=2)
    yield worker
    stop_worker()


def test_the_default_settings_are_the_embedded_mode():
    assert settings.EMBEDDED
    assert settings.CELERY_BROKER_URL.startswith("memory://")
    assert (
        settings.CHANNEL_LAYERS["default"]["BACKEND"]
        == "dashboard.channel_layer.ThreadSafeInMemoryChannelLayer"
    )
    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    assert "journal_mode=WAL" in settings.DATABASES["default"]["OPTIONS"]["init_command"]


@pytest.mark.django_db(transaction=True)
async def test_a_task_run_by_the_embedded_worker_reaches_a_connected_websocket_client(
    user, embedded_worker
):
    # A finished run: a queued one would (rightly) be picked up by the worker as a run to execute.
    run = await database_sync_to_async(Run.objects.create)(
        owner=user, name="embedded", status=RunStatus.COMPLETED
    )
    headers = await sync_to_async(session_headers)(user)
    communicator = WebsocketCommunicator(
        application, f"/ws/runs/{run.pk}/?after=0", headers=headers
    )
    connected, _ = await communicator.connect()
    assert connected

    await sync_to_async(worker_ping.delay)(run.pk, "hello from the embedded worker")
    message = await communicator.receive_json_from(timeout=10)  # how fast: bench/suite_timings.py

    assert message["type"] == "worker.ping"
    assert message["seq"] == 1
    assert message["data"]["note"] == "hello from the embedded worker"
    assert await database_sync_to_async(RunEvent.objects.filter(run=run, seq=1).exists)()
    await communicator.disconnect()
