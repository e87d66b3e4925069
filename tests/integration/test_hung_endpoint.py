"""A model endpoint that accepts connections and never answers, with the default
timeout and retries: the run fails within a minute, naming it. It waits ~40 s
by design, so it runs in the integration stage (it needs no service: it uses
whichever database the stage has)."""

from __future__ import annotations

import time

import pytest

from optimizer.models import RunStatus
from optimizer.runs import runner
from optimizer.runs.runner import execute_run
from optimizer.services import run_launch
from tests.optimizer.fake_openai import hung_server
from tests.optimizer.run_helpers import endpoint, refund_task_set, refund_verifier, run_config

pytestmark = [pytest.mark.standalone, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def runs_dir(settings, tmp_path, monkeypatch):
    settings.RUNS_DIR = tmp_path / "runs"
    monkeypatch.setattr(
        runner, "HEARTBEAT_SECONDS", 3600
    )  # as in tests/optimizer/runs/test_runner.py


@pytest.fixture
def task_set(user):
    refund_verifier(user)
    return refund_task_set(user, splits=["train", "val"] * 4)


def launch(user, task_set, **overrides):
    return run_launch(owner=user, config=run_config(task_set, **overrides))


def test_a_hung_endpoint_with_the_default_options_fails_the_run_within_a_minute_naming_it(
    user, task_set
):
    with hung_server() as port:
        lm = {
            "provider": "openai",
            "model": "stuck-model",
            "base_url": f"http://127.0.0.1:{port}/v1",
        }  # default timeout/retries
        run = launch(user, task_set, task_lm=endpoint("stuck", lm), budget={"max_metric_calls": 40})
        started = time.monotonic()
        assert execute_run(run.pk) == RunStatus.FAILED
        elapsed = time.monotonic() - started
    run.refresh_from_db()
    assert elapsed <= 60, f"a dead endpoint took {elapsed:.0f} s to fail the run"
    assert f"127.0.0.1:{port}" in run.error and "did not answer" in run.error
