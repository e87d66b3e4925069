"""Per-user run limits (optimizer/runs/limits.py): budget, concurrency and active
runs are capped at launch, fork and resume, by site defaults or an admin's
per-user values, with errors that name the field."""

from __future__ import annotations

import json

import pytest

from optimizer.config import RunConfigError
from optimizer.models import Run, RunStatus, UserRunLimits
from optimizer.services import RunStateError, run_dry_run, run_launch, run_resume
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config


@pytest.fixture
def task_set(user):
    refund_verifier(user)
    return refund_task_set(user)


def problems_of(error) -> dict:
    return dict(error.value.problems)


def test_a_budget_above_the_site_default_is_refused_naming_the_field(user, task_set, settings):
    # The audit launched 9,914,443 metric calls with concurrency 64.
    with pytest.raises(RunConfigError) as error:
        run_launch(
            owner=user,
            config=run_config(task_set, budget={"max_metric_calls": 9_914_443}, concurrency=64),
        )
    assert problems_of(error) == {
        "budget.max_metric_calls": "9,914,443 metric calls is above your limit of 50,000 per run (set by an administrator)",
        "concurrency": "64 is above your limit of 16 (set by an administrator)",
    }
    assert not Run.objects.exists()


def test_an_admin_sets_other_limits_for_one_user(user, other_user, task_set):
    UserRunLimits.objects.create(user=user, max_metric_calls=100, max_concurrency=2)
    with pytest.raises(RunConfigError) as error:
        run_launch(
            owner=user, config=run_config(task_set, concurrency=4)
        )  # 120 calls, concurrency 4
    assert set(problems_of(error)) == {"budget.max_metric_calls", "concurrency"}
    assert "your limit of 100 per run" in problems_of(error)["budget.max_metric_calls"]
    UserRunLimits.objects.filter(user=user).update(
        max_metric_calls=200_000, max_concurrency=None
    )  # None: site default
    assert (
        run_launch(
            owner=user, config=run_config(task_set, budget={"max_metric_calls": 150_000})
        ).status
        == RunStatus.QUEUED
    )


def test_a_user_with_too_many_active_runs_cannot_launch_another(user, task_set, settings):
    settings.FRONTIER_MAX_ACTIVE_RUNS_PER_USER = 2
    for _ in range(2):
        run_launch(owner=user, config=run_config(task_set))
    assert run_dry_run(owner=user, config=run_config(task_set))[-1][0] == "active_runs"
    with pytest.raises(RunConfigError) as error:
        run_launch(owner=user, config=run_config(task_set))
    assert problems_of(error)["active_runs"].startswith(
        "you have 2 runs queued, running or stopping; your limit is 2"
    )
    Run.objects.filter(owner=user).update(status=RunStatus.COMPLETED)
    run_launch(owner=user, config=run_config(task_set))
    assert Run.objects.count() == 3


def test_more_budget_for_a_finished_run_stays_within_the_limit(user, task_set):
    run = run_launch(owner=user, config=run_config(task_set))
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED)
    run.refresh_from_db()
    with pytest.raises(
        RunStateError, match=r"^extra_budget: the run's budget would be 60,120 metric calls"
    ):
        run_resume(run=run, extra_budget=60_000)
    assert run_resume(run=run, extra_budget=1000).budget_total == 1120


def test_the_launch_form_and_api_answer_400_naming_the_field(user, user_client, task_set):
    config = run_config(task_set, budget={"max_metric_calls": 9_914_443})
    response = user_client.post("/runs/new/", json.dumps(config), content_type="application/json")
    assert response.status_code == 400
    assert response.json()["problems"][0]["field"] == "budget.max_metric_calls"
    response = user_client.post(
        "/api/runs/", json.dumps({"config": config}), content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["problems"] == [
        {
            "field": "budget.max_metric_calls",
            "message": "9,914,443 metric calls is above your limit of 50,000 per run (set by an administrator)",
        }
    ]


def test_an_administrator_has_no_limits_unless_given_some(admin_user):
    refund_verifier(admin_user)
    task_set = refund_task_set(admin_user)
    assert (
        run_launch(
            owner=admin_user,
            config=run_config(task_set, concurrency=64, budget={"max_metric_calls": 9_914_443}),
        ).status
        == RunStatus.QUEUED
    )
    UserRunLimits.objects.create(user=admin_user, max_concurrency=8)
    with pytest.raises(RunConfigError) as error:
        run_launch(owner=admin_user, config=run_config(task_set, concurrency=64))
    assert set(problems_of(error)) == {"concurrency"}
