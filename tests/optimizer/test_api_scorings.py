"""/api/runs/{id}/scorings: re-score a finished run's stored outputs, list and read the scorings."""

from __future__ import annotations

import pytest

from dashboard.celery import app
from optimizer.models import RunStatus, Scoring
from tests.factories import POLICY, WINDOW_ONLY, recorded_run
from verifiers_app.services import verifier_create

pytestmark = pytest.mark.django_db


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


def test_the_candidates_come_in_pages_best_first_and_task_scores_only_when_asked(
    user, user_client, monkeypatch
):
    from optimizer.scorings import reads
    from optimizer.scorings.execute import scoring_execute

    run = recorded_run(user, candidates=7, val_tasks=3)
    response = post(user_client, f"/api/runs/{run.pk}/scorings", {"spec": WINDOW_ONLY})
    scoring_execute(response.json()["id"])
    url = f"/api/runs/{run.pk}/scorings/{response.json()['id']}"

    first = user_client.get(url, {"limit": 3}).json()
    assert (first["candidates_total"], first["limit"], first["offset"]) == (7, 3, 0)
    assert [c["rank"] for c in first["candidates"]] == [1, 2, 3]
    assert all(c["task_scores"] is None for c in first["candidates"])
    rest = user_client.get(url, {"limit": 3, "offset": 3}).json()["candidates"]
    last = user_client.get(url, {"limit": 3, "offset": 6}).json()["candidates"]
    assert [c["rank"] for c in rest + last] == [4, 5, 6, 7]

    with_tasks = user_client.get(url, {"limit": 2, "tasks": "true"}).json()["candidates"]
    stored = {c.index: c.task_scores for c in Scoring.objects.get().candidates.all()}
    assert [c["task_scores"] for c in with_tasks] == [stored[c["index"]] for c in with_tasks]
    assert len(with_tasks[0]["task_scores"]) == 3

    monkeypatch.setattr(reads, "API_CANDIDATES_WITH_TASKS", 4)
    capped = user_client.get(url, {"limit": 100, "tasks": "true"}).json()
    assert capped["limit"] == 4 and len(capped["candidates"]) == 4
    bad = user_client.get(url, {"offset": -1})
    assert bad.status_code == 400 and "offset" in bad.json()["detail"]
