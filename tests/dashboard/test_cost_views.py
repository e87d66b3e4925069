"""Money everywhere a run is shown: a real run against a priced
fake endpoint, then every page and document a user reads it from."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from optimizer.models import Candidate, Run
from optimizer.runs.runner import execute_run
from optimizer.services import run_launch
from tests.optimizer.fake_openai import KEY_ENV, FakeOpenAIServer
from tests.optimizer.run_helpers import (
    endpoint,
    refund_task_set,
    refund_verifier,
    run_config,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("runs_dir")]


@pytest.fixture
def runs(user, monkeypatch):
    """A priced run (task calls at $1,000 per 1M input tokens) and a demo simulator run of the same set."""
    refund_verifier(user)
    task_set = refund_task_set(user, splits=["train", "val"] * 4)
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeOpenAIServer() as server:
        lm = {
            "provider": "openai",
            "model": "fake-model",
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "timeout": 5,
            "price_in_per_million": 1000.0,
            "price_out_per_million": 0,
        }
        priced = run_launch(
            owner=user,
            config=run_config(
                task_set, task_lm=endpoint("priced", lm), budget={"max_metric_calls": 12}
            ),
        )
        execute_run(priced.pk)
    demo = run_launch(owner=user, config=run_config(task_set, budget={"max_metric_calls": 12}))
    execute_run(demo.pk)
    priced.refresh_from_db()
    return priced, demo


def test_every_view_of_a_run_shows_what_it_cost_and_the_simulator_says_it_is_free(
    user_client, runs
):
    priced, demo = runs
    label = f"${priced.cost:.4f}" if priced.cost < 0.01 else f"${priced.cost:.2f}"
    assert (
        priced.cost > 0 and priced.usage["task"]["tokens_in"] == 11 * priced.usage["task"]["calls"]
    )

    page = user_client.get(reverse("runs:detail", args=[priced.pk])).content.decode()
    assert f'data-field="cost">{label}<' in page and "budget reached" in page
    assert (
        'data-field="cost">free (demo simulator)<'
        in user_client.get(reverse("runs:detail", args=[demo.pk])).content.decode()
    )

    listing = user_client.get(reverse("runs:list")).content.decode()
    assert label in listing and "free (demo simulator)" in listing
    rows = {r["id"]: r for r in user_client.get(reverse("runs:list_json")).json()["runs"]}
    assert rows[priced.pk]["cost_label"] == label and rows[demo.pk]["pricing"] == "simulator"

    snapshot = user_client.get(reverse("runs:snapshot", args=[priced.pk])).json()
    assert (
        snapshot["run"]["cost"] == priced.cost
        and snapshot["run"]["stop_reason"] == "budget reached"
    )
    seed = Candidate.objects.get(run=priced, index=0)
    assert snapshot["candidates"]["cost"][0] == seed.cost > 0
    assert all("cost" in p and "usage" in p for p in snapshot["proposals"])

    candidate_page = user_client.get(
        reverse("runs:candidate", args=[priced.pk, 0])
    ).content.decode()
    assert seed.cost == pytest.approx(
        4 * 11 * 1000 / 1e6
    )  # four val tasks, 11 input tokens each, $1,000 per 1M
    assert (
        'data-field="cost">$0.04<' in candidate_page
        and "task 4 calls, 44 in / 12 out tokens" in candidate_page
    )

    api = user_client.get(f"/api/runs/{priced.pk}").json()
    assert (api["cost"], api["pricing"], api["stop_reason"]) == (
        priced.cost,
        "priced",
        "budget reached",
    )
    assert api["usage"]["task"]["calls"] == priced.usage["task"]["calls"]
    assert (
        api["candidates"][0]["cost"] == seed.cost
        and api["candidates"][0]["usage"]["task"]["tokens_in"] == 44
    )

    compare = user_client.get(
        reverse("compare:runs"), {"a": priced.pk, "b": demo.pk}
    ).content.decode()
    assert (
        f'data-field="cost">{label}<' in compare
        and 'data-field="cost">free (demo simulator)<' in compare
    )
    assert (
        Candidate.objects.filter(run=demo).count() == 2
    )  # the simulator's first proposal was accepted
    side_by_side = user_client.get(
        reverse("compare:compare", args=[demo.pk]), {"c": [0, 1]}
    ).content.decode()
    assert (
        side_by_side.count('title="What the iteration that found it spent">free (demo simulator)<')
        == 2
    )

    exported = json.loads(
        b"".join(
            user_client.get(reverse("compare:export_json", args=[priced.pk])).streaming_content
        )
    )
    assert (
        exported["run"]["cost"] == priced.cost
        and exported["run"]["stop_reason"] == "budget reached"
    )
    assert exported["candidates"][0]["cost"] == seed.cost
    assert exported["candidates"][0]["evaluations"][0]["cost"] == pytest.approx(11 * 1000 / 1e6)


def test_an_exported_run_keeps_its_cost_when_imported(user, user_client, runs):
    from optimizer.export import run_export, run_import

    priced, _ = runs
    imported = run_import(owner=user, data=run_export(priced))
    assert (imported.cost, imported.usage, imported.stop_reason) == (
        priced.cost,
        priced.usage,
        "budget reached",
    )
    assert (
        Run.objects.get(pk=imported.pk).candidates.get(index=0).cost
        == Candidate.objects.get(run=priced, index=0).cost
    )
