"""/api/runs/{id}/scorings: re-score a finished run's stored outputs, list and read the scorings."""

from __future__ import annotations

import pytest

from dashboard.celery import app
from optimizer.models import RunStatus, Scoring
from tests.factories import POLICY, recorded_run
from verifiers_app.services import verifier_create

pytestmark = pytest.mark.django_db

WINDOW_ONLY = {
    "id": "window-only",
    "name": "Window only",
    "kind": "native",
    "checks": [{"id": "window", "type": "contains", "params": {"value": "30 days"}}],
}


@pytest.fixture
def eager(monkeypatch):
    monkeypatch.setitem(app.conf, "task_always_eager", True)


def post(client, url, body):
    return client.post(url, body, content_type="application/json")


def test_an_edited_spec_rescores_the_run_and_the_results_are_read_back(
    user, user_client, eager, django_capture_on_commit_callbacks
):
    run = recorded_run(user, candidates=6, val_tasks=4)
    with django_capture_on_commit_callbacks(execute=True):
        response = post(
            user_client, f"/api/runs/{run.pk}/scorings", {"spec": WINDOW_ONLY, "name": "window"}
        )
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "queued" and response.json()["total"] == 24

    detail = user_client.get(f"/api/runs/{run.pk}/scorings/{response.json()['id']}").json()
    assert detail["status"] == "done" and detail["done"] == 24
    assert detail["name"] == "window"
    assert [c["rank"] for c in detail["candidates"]] == list(range(1, 7))
    assert detail["summary"]["best"]["index"] == detail["candidates"][0]["index"]
    for key in ("best_vs_seed", "original_best_vs_seed"):
        assert detail["summary"][key]["seed"] == 0 and detail["summary"][key]["method"].startswith(
            "paired bootstrap"
        )
    listed = user_client.get(f"/api/runs/{run.pk}/scorings").json()
    assert [s["id"] for s in listed] == [detail["id"]]


def test_a_saved_verifier_is_named_by_id_and_version(user, user_client):
    verifier_create(owner=user, spec=WINDOW_ONLY)
    run = recorded_run(user, candidates=2, val_tasks=2)
    response = post(user_client, f"/api/runs/{run.pk}/scorings", {"verifier_id": "window-only"})
    assert response.status_code == 202, response.content
    assert response.json()["source"] == [{"id": "window-only", "version": 1}]
    assert response.json()["name"] == "window-only v1"


def test_a_bad_spec_is_a_400_naming_the_field(user, user_client):
    run = recorded_run(user, candidates=2, val_tasks=2)
    bad = {**WINDOW_ONLY, "checks": [{"id": "w", "type": "regex", "params": {"pattern": "("}}]}
    response = post(user_client, f"/api/runs/{run.pk}/scorings", {"spec": bad})
    assert response.status_code == 400
    assert response.json()["problems"][0]["field"] == "spec.checks[0].params.pattern"
    assert not Scoring.objects.exists()


def test_a_running_run_is_a_409(user, user_client):
    run = recorded_run(user, candidates=2, val_tasks=2, status=RunStatus.RUNNING)
    response = post(user_client, f"/api/runs/{run.pk}/scorings", {"spec": POLICY})
    assert response.status_code == 409
    assert "running" in response.json()["detail"]


def test_only_the_owner_rescores_and_a_sharer_reads(user, other_user, other_client):
    run = recorded_run(user, candidates=2, val_tasks=2)
    run.shared_with.add(other_user)
    assert post(other_client, f"/api/runs/{run.pk}/scorings", {"spec": POLICY}).status_code == 404
    assert other_client.get(f"/api/runs/{run.pk}/scorings").status_code == 200
