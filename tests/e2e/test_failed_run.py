"""A run whose task model never answers (its endpoint refuses every
connection), as a newcomer with a wrong endpoint URL meets it: the run fails
after scoring the seed's seven val tasks as failed calls and one more call.
What the API with a token, `manage.py optimize status`, the run page and the
runs list then say about its budget and its best score."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import ARTIFACTS, Api
from tests.optimizer.fake_openai import free_port
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

VAL_TASKS = 7
BUDGET = 120
DOWN_ENDPOINT = """
from optimizer.models import ModelEndpoint
ModelEndpoint.objects.create(name="down", provider="openai", model="m",
    base_url="http://127.0.0.1:{port}/v1", options={{"max_retries": 0, "timeout": 5}})
"""


@pytest.fixture(scope="module")
def failed_run(frontier_server) -> tuple[Api, int]:
    """A run on an endpoint nothing listens on, launched with a token and failed."""
    frontier_server.manage("shell", "-c", DOWN_ENDPOINT.format(port=free_port()))
    api = Api(frontier_server.url, frontier_server.new_token())
    spec = {"id": "down-refund", "checks": [{"type": "contains", "params": {"value": "refund"}}]}
    assert api.call("POST", "/api/verifiers/", {"spec": spec})[0] == 201
    rows = [
        {"task_id": f"t{i}", "input": f"Can I get a refund for order {i}?", "split": "val"}
        for i in range(VAL_TASKS)
    ] + [{"task_id": "train", "input": "Where is my refund?", "split": "train"}]
    status, task_set, _ = api.call(
        "POST",
        "/api/tasksets/import",
        {
            "name": "down tasks",
            "filename": "t.jsonl",
            "content": "".join(json.dumps(r) + "\n" for r in rows),
        },
    )
    assert status == 201, task_set
    config = {
        "task_set_id": task_set["id"],
        "verifier_ids": ["down-refund"],
        "task_lm": "down",
        "budget": {"max_metric_calls": BUDGET},
    }
    status, run, _ = api.call("POST", "/api/runs/", {"config": config})
    assert status == 201, run
    wait_until(
        lambda: api.call("GET", f"/api/runs/{run['id']}")[1]["status"] == "failed",
        timeout=90,
        what="the run to fail",
    )
    return api, run["id"]


def test_a_run_that_failed_after_scoring_its_seed_reports_the_metric_calls_it_spent(
    failed_run, frontier_server, page
):
    """The seed's valset is spent before gepa's first budget event; a run failing in
    its first minibatch said budget 0 / 120 with seven evaluations stored."""
    api, run_id = failed_run
    detail = api.call("GET", f"/api/runs/{run_id}")[1]
    seed = api.call("GET", f"/api/runs/{run_id}/candidates/0")[1]
    assert len(seed["evaluations"]) == VAL_TASKS
    assert detail["budget_used"] == VAL_TASKS, detail
    status = json.loads(frontier_server.manage("optimize", "status", str(run_id)).stdout)
    assert status["metric_calls"] == VAL_TASKS, status
    page.goto(f"/runs/{run_id}/")
    expect(page.locator("[data-field=budget]")).to_have_text(f"{VAL_TASKS} / {BUDGET}")
    page.goto("/runs/")
    expect(page.get_by_role("row", name="down tasks")).to_contain_text(f"{VAL_TASKS} / {BUDGET}")


def test_a_run_whose_model_answered_nothing_has_no_best_score(failed_run, frontier_server, page):
    """Every val task of the seed was a failed call: its mean (0.0) measures the
    endpoint, not the prompt, so the run has no seed or best score (null), as a
    run that failed before its seed was scored; the page says "–", not 0.000."""
    api, run_id = failed_run
    detail = api.call("GET", f"/api/runs/{run_id}")[1]
    assert (detail["best_score"], detail["seed_score"], detail["best_candidate"]) == (
        None,
        None,
        None,
    ), detail
    status = json.loads(frontier_server.manage("optimize", "status", str(run_id)).stdout)
    assert (status["best_score"], status["seed_score"]) == (None, None), status
    page.goto(f"/runs/{run_id}/")
    expect(page.locator("[data-field=status]")).to_have_text("failed")
    expect(page.locator("[data-field=best]")).to_have_text("–")
    expect(page.locator("#run-explainer [data-field=no-best]")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "run-failed-model-never-answered.png"), full_page=True)
