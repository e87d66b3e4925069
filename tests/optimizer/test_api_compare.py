"""/api/runs/<id>/compare and /promotion: lifts with their paired interval."""

from __future__ import annotations

import pytest

from optimizer.confidence import paired_lift
from optimizer.models import Evaluation
from optimizer.promotion import promotion_report
from tests.factories import recorded_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(user):
    return recorded_run(user, candidates=4, val_tasks=12, holdout_tasks=10, task_prefix="val-")


def _scores(run, index, split):
    return dict(
        Evaluation.objects.filter(
            candidate__run=run, candidate__index=index, split=split
        ).values_list("task_key", "score")
    )


def test_comparing_two_candidates_gives_each_split_s_lift_with_its_interval(user_client, run):
    response = user_client.get(f"/api/runs/{run.pk}/compare?a=1&b=3")
    assert response.status_code == 200, response.content
    body = response.json()
    for split in ("val", "holdout"):
        expected = paired_lift(_scores(run, 1, split), _scores(run, 3, split))
        assert body[split] == expected.as_dict()
        assert body[split]["low"] is not None
    assert body["url"].endswith(f"/runs/{run.pk}/compare/?c=1&c=3")


def test_a_split_the_two_share_no_task_of_is_null_and_a_missing_candidate_is_404(user_client, run):
    Evaluation.objects.filter(candidate__run=run, candidate__index=3, split="holdout").delete()
    body = user_client.get(f"/api/runs/{run.pk}/compare?a=0&b=3").json()
    assert body["holdout"] is None and body["val"]["tasks"] == 12
    missing = user_client.get(f"/api/runs/{run.pk}/compare?a=0&b=9")
    assert missing.status_code == 404 and "no candidate 9" in missing.json()["detail"]
    unnamed = user_client.get(f"/api/runs/{run.pk}/compare?a=0")
    assert unnamed.status_code == 400 and unnamed.json()["detail"].startswith("a, b:")


def test_another_user_s_run_cannot_be_compared(other_client, run):
    assert other_client.get(f"/api/runs/{run.pk}/compare?a=0&b=1").status_code == 404


def test_the_promotion_report_in_the_api_is_the_page_s_report(user_client, run):
    body = user_client.get(f"/api/runs/{run.pk}/promotion?margin=0.05").json()
    report = promotion_report(
        seed=run.candidates.get(index=0), candidate=run.best_candidate, margin=0.05
    )
    assert body["lift"] == report.lift.as_dict() and body["promote"] == report.promote
    assert body["reason"] == report.reason and len(body["tasks"]) == 10
    assert body["candidate_index"] == run.best_candidate.index


def test_a_run_without_holdout_evaluations_has_no_promotion_report(user, user_client):
    run = recorded_run(user, candidates=3, val_tasks=4, holdout_tasks=0)
    response = user_client.get(f"/api/runs/{run.pk}/promotion")
    assert response.status_code == 409 and "no holdout evaluations" in response.json()["detail"]
