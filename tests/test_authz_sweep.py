"""The access-control sweep: every URL pattern of the URLconf (resolved from it,
so a new page is swept without touching this file), every operation of the API's
OpenAPI document and both websockets, each as an anonymous visitor, as another
user and as the owner of everything the URLs point at.

Nothing the owner keeps private may reach the others: no 2xx with the owner's
data, no change to the owner's rows. The owner's objects carry MARKER in their
names and texts, so a leak in any page or JSON body is found by looking for it.
"""

from __future__ import annotations

import json
import re

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import reverse

from dashboard.account_services import api_token_create
from dashboard.api import api
from dashboard.asgi import application
from optimizer.models import Run, RunStatus
from optimizer.reviewer_notes import reviewer_note_create
from optimizer.scorings.execute import scoring_execute
from optimizer.scorings.services import scoring_create
from tests.dashboard.test_embedded_mode import session_headers
from tests.factories import recorded_run
from tests.url_patterns import argument_names, url_patterns
from verifiers_app.models import Verifier
from verifiers_app.services import verifier_create, verifier_update

MARKER = "zqxprivate"
# Not the app's pages: Django's own (the admin is swept on its own below) and the
# API's (swept through its OpenAPI document, which lists every operation).
SKIPPED_NAMESPACES = {"admin", "api"}
PUBLIC = {"login", "logout", "favicon"}  # favicon: the site icon, for pages with no login
CONTROL_ACTIONS = ["stop", "cancel", "resume", "fork"]


@pytest.fixture
def owned(user):
    """Everything the owner (alice) keeps private, each named with MARKER."""
    run = recorded_run(
        owner=user,
        candidates=3,
        val_tasks=2,
        name=f"{MARKER} run",
        component_text=f"{MARKER} prompt: answer the refund question.",
    )
    task_set = run.task_set
    task_set.name = f"{MARKER} tasks"
    task_set.save(update_fields=["name"])
    verifier = verifier_create(
        owner=user,
        spec={
            "id": f"{MARKER}-verifier",
            "name": f"{MARKER} verifier",
            "kind": "native",
            "checks": [{"id": "c", "type": "contains", "params": {"value": MARKER}}],
        },
    )
    verifier_update(
        verifier=verifier, spec={**verifier.spec, "passThreshold": 0.5}, user=user
    )  # a diff to show
    token, _ = api_token_create(user=user, name=f"{MARKER} token")
    note = reviewer_note_create(
        run=run, user=user, task_key=run.tasks_snapshot[0]["task_id"], text=f"{MARKER} note"
    )
    scoring = scoring_create(
        run=run,
        user=user,
        specs=[verifier.spec],
        source=[{"id": verifier.slug, "version": verifier.version}],
        name=f"{MARKER} scoring",
    )
    scoring_execute(scoring.pk)
    return {
        "note": note,
        "scoring": scoring,
        "run": run,
        "task_set": task_set,
        "task": task_set.tasks.first(),
        "verifier": verifier,
        "token": token,
    }


def fill(name: str, arguments: list[str], owned) -> list[dict]:
    """Every way to point this URL at the owner's objects."""
    values = {
        "run_id": owned["run"].pk,
        "index": 0,
        "slug": owned["verifier"].slug,
        "task_pk": owned["task"].pk,
        "scoring_id": owned["scoring"].pk,
        "pk": owned["token"].pk if name.startswith("account:") else owned["task_set"].pk,
    }
    kwargs = {arg: values[arg] for arg in arguments if arg != "action"}
    if "action" in arguments:
        return [dict(kwargs, action=action) for action in CONTROL_ACTIONS]
    return [kwargs]


def app_urls(owned) -> list[tuple[str, str, bool]]:
    """(view name, URL, points at an owner's object) for every page of the app."""
    urls = []
    for name, pattern in url_patterns():
        if name.split(":")[0] in SKIPPED_NAMESPACES or name in PUBLIC:
            continue
        arguments = argument_names(pattern)
        for kwargs in fill(name, arguments, owned):
            urls.append((name, reverse(name, kwargs=kwargs), bool(arguments)))
    return urls


def fingerprint() -> dict:
    """The owner's rows, as a write by someone else would change them (the others
    may create rows of their own)."""
    from dashboard.models import ApiToken
    from optimizer.models import Candidate, ReviewerNote, Scoring
    from optimizer.tasksets.models import Task, TaskSet

    return {
        "runs": list(
            Run.objects.filter(owner__username="alice")
            .order_by("pk")
            .values_list(
                "pk",
                "name",
                "status",
                "stop_requested",
                "cancel_requested",
                "budget_total",
                "chosen_candidate_id",
            )
        ),
        "verifiers": list(
            Verifier.objects.filter(owner__username="alice")
            .order_by("pk")
            .values_list("pk", "slug", "name", "spec", "shared")
        ),
        "task_sets": list(
            TaskSet.objects.filter(owner__username="alice")
            .order_by("pk")
            .values_list("pk", "name", "shared")
        ),
        "tasks": list(
            Task.objects.filter(task_set__owner__username="alice")
            .order_by("pk")
            .values_list("pk", "split", "task_id")
        ),
        "candidates": Candidate.objects.filter(run__owner__username="alice").count(),
        "reviewer_notes": list(
            ReviewerNote.objects.filter(run__owner__username="alice")
            .order_by("pk")
            .values_list("pk", "task_key", "text")
        ),
        "scorings": list(
            Scoring.objects.filter(run__owner__username="alice")
            .order_by("pk")
            .values_list("pk", "name", "status", "summary")
        ),
        "tokens": list(
            ApiToken.objects.filter(user__username="alice")
            .order_by("pk")
            .values_list("pk", "revoked_at")
        ),
    }


def leaked(response) -> bool:
    return MARKER in response.content.decode(errors="replace").lower()


@pytest.mark.django_db
def test_the_sweep_covers_every_page_of_the_urlconf(owned):
    names = {name for name, _, _ in app_urls(owned)}
    # A sample that must be there: if URL discovery broke, the sweep would pass vacuously.
    assert {
        "runs:detail",
        "runs:control",
        "compare:export_json",
        "verifiers:edit",
        "tasksets:task",
        "account:revoke",
    } <= names
    assert len(names) >= 35


@pytest.mark.django_db
def test_an_anonymous_visitor_gets_only_the_login_page_from_every_url(owned):
    anonymous = Client()
    before = fingerprint()
    for name, url, _ in app_urls(owned):
        for method in (anonymous.get, anonymous.post):
            response = method(url)
            assert response.status_code == 302 and response["Location"].startswith(
                reverse("login")
            ), (name, url, response.status_code)
    assert fingerprint() == before


@pytest.mark.django_db
def test_the_owner_reaches_every_page_so_the_refusals_below_mean_something(owned, user_client):
    for name, url, _ in app_urls(owned):
        response = user_client.get(url)
        # 405: a POST-only action; 302: a page that redirects (e.g. the home page);
        # 400: a page that also needs a query parameter (the object itself was found).
        assert response.status_code in (200, 302, 400, 405), (name, url, response.status_code)
        if response.status_code == 200 and name in {
            "runs:detail",
            "verifiers:detail",
            "tasksets:detail",
        }:
            assert leaked(response), (name, "the owner's page should show the owner's object")


@pytest.mark.django_db
def test_another_user_gets_a_404_for_every_url_of_the_owners_objects_and_sees_them_nowhere(
    owned, other_client
):
    before = fingerprint()
    for name, url, points_at_owner in app_urls(owned):
        for method in ("get", "post"):
            response = getattr(other_client, method)(url)
            assert response.status_code < 500, (method, name, url)
            assert not leaked(response), (method, name, url, response.status_code)
            if points_at_owner:
                assert response.status_code in (403, 404, 405), (
                    method,
                    name,
                    url,
                    response.status_code,
                )
    assert fingerprint() == before


@pytest.mark.django_db
def test_a_read_only_sharer_sees_the_run_but_no_page_changes_it_or_forks_it(
    owned, other_user, other_client
):
    """Sharing lets a user see a run, not spend on it: every control (stop,
    cancel, resume, fork; a fork from the launch form too) is refused."""
    run = owned["run"]
    run.shared_with.add(other_user)
    assert other_client.get(reverse("runs:detail", args=[run.pk])).status_code == 200
    before = fingerprint()
    config = {
        "task_set_id": owned["task_set"].pk,
        "verifier_ids": [owned["verifier"].slug],
        "budget": {"max_metric_calls": 20},
    }
    controls = [
        reverse("runs:control", kwargs={"run_id": run.pk, "action": action})
        for action in CONTROL_ACTIONS
    ]
    for url in controls:
        response = other_client.post(url, {"candidate_index": 0, "extra_budget": 10})
        assert response.status_code in (403, 404), (url, response.status_code)
    fork_form = reverse("runs:new") + f"?fork={run.pk}&candidate=0"
    assert other_client.get(fork_form).status_code in (403, 404)
    response = other_client.post(fork_form, json.dumps(config), content_type="application/json")
    assert response.status_code in (403, 404), response.content[:300]
    for method, path in api_operations():
        if "{run_id}" in path and method != "GET":
            response = api_call(other_client, method, api_url(path, owned), api_body(path, owned))
            assert response.status_code in (403, 404, 405), (method, path, response.status_code)
    assert fingerprint() == before
    assert not Run.objects.filter(forked_from=run).exists()


# -- the API: every operation of the OpenAPI document -------------------------------


def api_operations() -> list[tuple[str, str]]:
    schema = api.get_openapi_schema()
    return [
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        for method in operations
    ]


def api_url(path: str, owned) -> str:
    return (
        path.replace("{run_id}", str(owned["run"].pk))
        .replace("{slug}", owned["verifier"].slug)
        .replace("{taskset_id}", str(owned["task_set"].pk))
        .replace("{index}", "0")
        .replace("{note_id}", str(owned["note"].pk))
        .replace("{scoring_id}", str(owned["scoring"].pk))
    )


def api_body(path: str, owned) -> dict:
    """A body that points at the owner's objects by number, as an attacker would
    (never by MARKER: an error echoing the caller's own input is no leak)."""
    if path.startswith("/api/runs"):
        return {
            "config": {"task_set_id": owned["task_set"].pk, "budget": {"max_metric_calls": 20}},
            "candidate_index": 0,
            "extra_budget": 10,
            "components": {"instructions": "probe"},  # an edited candidate (POST …/candidates)
            "task_key": owned["note"].task_key,
            "text": "x",
        }
    if path.endswith("/events"):  # a well-formed batch aimed at the owner's run
        return {"seq": 1, "events": [{"type": "budget", "used": 1}]}
    if path.startswith("/api/external"):  # open a tracked run on the owner's task set
        return {"key": "probe-key-0001", "task_set_id": owned["task_set"].pk}
    if path.startswith("/api/verifiers"):
        return {
            "spec": {
                "id": "probe",
                "name": "probe",
                "kind": "native",
                "checks": [{"id": "c", "type": "min_length", "params": {"value": 1}}],
            },
            "output": "x",
        }
    return {"name": "x", "content": "{}", "format": "jsonl", "task_set_id": owned["task_set"].pk}


def api_call(client, method: str, url: str, body: dict, **headers):
    if method == "GET":
        return client.get(url, **headers)
    return client.generic(method, url, json.dumps(body), content_type="application/json", **headers)


@pytest.mark.django_db
def test_the_api_sweep_covers_every_documented_operation():
    operations = api_operations()
    assert ("POST", "/api/runs/{run_id}/fork") in operations and (
        "DELETE",
        "/api/verifiers/{slug}",
    ) in operations
    assert len(operations) >= 15


@pytest.mark.django_db
def test_an_anonymous_caller_gets_401_from_every_api_operation(owned):
    before = fingerprint()
    for method, path in api_operations():
        response = api_call(Client(), method, api_url(path, owned), api_body(path, owned))
        assert response.status_code == 401, (method, path, response.status_code)
        assert not leaked(response)
    assert fingerprint() == before


@pytest.mark.django_db
def test_another_users_token_and_session_reach_nothing_of_the_owner_through_the_api(
    owned, other_user, other_client
):
    _, token = api_token_create(user=other_user, name="bob's script")
    callers = [(Client(), {"HTTP_AUTHORIZATION": f"Bearer {token}"}), (other_client, {})]
    before = fingerprint()
    for client, headers in callers:
        for method, path in api_operations():
            response = api_call(
                client, method, api_url(path, owned), api_body(path, owned), **headers
            )
            assert response.status_code < 500, (
                method,
                path,
                response.status_code,
                response.content[:300],
            )
            assert not leaked(response), (
                method,
                path,
                response.status_code,
                response.content[:300],
            )
            if re.search(r"\{(run_id|slug|taskset_id|index|note_id)\}", path):
                assert response.status_code in (403, 404), (method, path, response.status_code)
    assert fingerprint() == before
    assert not Run.objects.filter(owner=other_user).exists()  # no run on the owner's task set


@pytest.mark.django_db
def test_another_user_can_take_an_id_the_owner_uses_so_its_existence_does_not_leak(
    owned, other_client
):
    spec = {**owned["verifier"].spec, "name": "bob's own"}
    response = other_client.post("/api/verifiers/", {"spec": spec}, content_type="application/json")
    assert response.status_code == 201 and response.json()["owner"] == "bob"
    assert (
        other_client.get(f"/api/verifiers/{owned['verifier'].slug}").json()["name"] == "bob's own"
    )
    owned["verifier"].refresh_from_db()
    assert owned["verifier"].name == f"{MARKER} verifier"


# -- the sockets ------------------------------------------------------------------------


async def socket_for(user, path):
    headers = [] if user is None else await sync_to_async(session_headers)(user)
    if user is None:
        headers = [(b"origin", b"http://127.0.0.1")]
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect()
    return communicator, connected, code


@pytest.mark.django_db(transaction=True)
async def test_both_sockets_refuse_the_anonymous_and_the_run_socket_refuses_another_user(
    user, other_user
):
    run = await database_sync_to_async(Run.objects.create)(
        owner=user, name=f"{MARKER} run", status=RunStatus.RUNNING
    )
    for path in (f"/ws/runs/{run.pk}/", "/ws/runs/"):
        communicator, connected, code = await socket_for(None, path)
        assert not connected and code == 4401, path
    communicator, connected, code = await socket_for(other_user, f"/ws/runs/{run.pk}/?after=0")
    assert not connected and code == 4403
    owner, connected, _ = await socket_for(user, f"/ws/runs/{run.pk}/?after=0")
    assert connected
    await owner.disconnect()
