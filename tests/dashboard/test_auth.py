"""Every page, API endpoint and websocket requires a logged-in user."""

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.urls import reverse

from dashboard.asgi import application
from optimizer.models import Run
from tests.dashboard.test_embedded_mode import session_headers

PAGES = ["runs:list", "verifiers:list", "tasksets:list", "account:tokens", "admin:index"]


@pytest.mark.django_db
@pytest.mark.parametrize("name", PAGES)
def test_an_anonymous_visitor_is_redirected_to_the_login_page(client, name):
    url = reverse(name)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(
        reverse("login") if name != "admin:index" else "/admin/login/"
    )


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["runs:list", "verifiers:list", "tasksets:list", "account:tokens"])
def test_a_logged_in_user_sees_the_page_with_the_navigation(user_client, name):
    response = user_client.get(reverse(name))
    assert response.status_code == 200
    html = response.content.decode()
    for label in ("Runs", "Verifiers", "Task sets"):
        assert f">{label}</a>" in html


@pytest.mark.django_db
def test_the_root_leads_to_the_runs_list_when_nothing_is_running(user_client, user):
    Run.objects.create(owner=user, status="completed")
    response = user_client.get("/")
    assert response.status_code == 302
    assert response["Location"] == reverse("runs:list")


@pytest.mark.django_db
def test_the_root_opens_the_newest_live_run_the_user_can_see(user_client, user, other_user):
    older = Run.objects.create(owner=user, status="running")
    newer = Run.objects.create(owner=user, status="queued")
    Run.objects.create(owner=other_user, status="running")  # not visible to alice
    response = user_client.get("/")
    assert response["Location"] == reverse("runs:detail", kwargs={"run_id": newer.pk})
    newer.status = "completed"
    newer.save()
    assert user_client.get("/")["Location"] == reverse("runs:detail", kwargs={"run_id": older.pk})


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/me", "/api/openapi.json"])
def test_the_api_answers_401_json_to_an_anonymous_caller(client, path):
    response = client.get(path)
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")


@pytest.mark.django_db
def test_the_api_and_its_openapi_document_work_with_a_session(user_client):
    assert user_client.get("/api/me").json() == {"username": "alice", "is_admin": False}
    document = user_client.get("/api/openapi.json").json()
    assert document["info"]["title"] == "Frontier API"


@pytest.mark.django_db
def test_the_api_accepts_a_bearer_token_and_refuses_a_revoked_one(client, user):
    from django.utils import timezone

    from dashboard.models import ApiToken

    token = ApiToken.generate()
    api_token = ApiToken.objects.create(
        user=user, name="script", prefix=token[:8], digest=ApiToken.hash(token)
    )
    assert client.get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}").json()["username"] == "alice"
    api_token.refresh_from_db()
    assert api_token.last_used_at is not None
    api_token.revoked_at = timezone.now()
    api_token.save()
    assert client.get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401
    assert client.get("/api/me", HTTP_AUTHORIZATION="Bearer ft_not-a-token").status_code == 401


def test_every_model_is_registered_in_the_admin():
    from django.apps import apps
    from django.contrib import admin

    ours = [
        m
        for app in ("dashboard", "verifiers_app", "optimizer")
        for m in apps.get_app_config(app).get_models()
    ]
    assert ours
    missing = [m.__name__ for m in ours if not admin.site.is_registered(m)]
    assert missing == []


@pytest.mark.django_db(transaction=True)
async def test_the_run_websocket_refuses_an_anonymous_client(user):
    run = await database_sync_to_async(Run.objects.create)(owner=user)
    communicator = WebsocketCommunicator(
        application, f"/ws/runs/{run.pk}/", headers=[(b"origin", b"http://127.0.0.1")]
    )
    connected, _ = await communicator.connect()
    assert not connected


@pytest.mark.django_db(transaction=True)
async def test_the_run_websocket_refuses_a_user_who_cannot_see_the_run(user, other_user):
    run = await database_sync_to_async(Run.objects.create)(owner=user)
    headers = await sync_to_async(session_headers)(other_user)
    communicator = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/", headers=headers)
    connected, _ = await communicator.connect()
    assert not connected


@pytest.mark.django_db(transaction=True)
async def test_the_run_websocket_refuses_a_foreign_origin(user):
    run = await database_sync_to_async(Run.objects.create)(owner=user)
    headers = [h for h in await sync_to_async(session_headers)(user) if h[0] != b"origin"]
    communicator = WebsocketCommunicator(
        application, f"/ws/runs/{run.pk}/", headers=[*headers, (b"origin", b"https://evil.example")]
    )
    connected, _ = await communicator.connect()
    assert not connected


@pytest.mark.django_db(transaction=True)
async def test_a_reconnecting_client_gets_exactly_the_events_after_its_last_seq(user):
    from optimizer.runs.events import publish_run_event

    run = await database_sync_to_async(Run.objects.create)(owner=user)
    for i in range(5):
        await database_sync_to_async(publish_run_event)(
            run.pk, "worker.ping", {"host": "h", "note": str(i)}
        )
    headers = await sync_to_async(session_headers)(user)
    communicator = WebsocketCommunicator(
        application, f"/ws/runs/{run.pk}/?after=3", headers=headers
    )
    connected, _ = await communicator.connect()
    assert connected
    replayed = [await communicator.receive_json_from(timeout=5) for _ in range(2)]
    assert [m["seq"] for m in replayed] == [4, 5]
    await database_sync_to_async(publish_run_event)(
        run.pk, "worker.ping", {"host": "h", "note": "live"}
    )
    live = await communicator.receive_json_from(timeout=5)
    assert (live["seq"], live["data"]["note"]) == (6, "live")
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()
