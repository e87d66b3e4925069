"""The dry run's plan: what the budget means for this task set,
and the calls, tokens, money and time it buys."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from optimizer.runs.runner import execute_run
from optimizer.services import run_launch, run_plan_for
from tests.optimizer.fake_openai import KEY_ENV, FakeOpenAIServer
from tests.optimizer.run_helpers import endpoint, refund_task_set, refund_verifier, run_config

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("runs_dir")]


@pytest.fixture
def task_set(user):
    refund_verifier(user)
    return refund_task_set(user, splits=["train", "val"] * 4)  # 4 train, 4 val


def test_the_plan_says_what_each_preset_means_in_metric_calls_for_this_set(user, task_set):
    plan = run_plan_for(
        owner=user, config=run_config(task_set, budget={"preset": "medium"}, minibatch_size=2)
    )
    assert plan["splits"] == {"train": 4, "val": 4}
    # V + P·(2·m + V) with V = 4, m = 2: one accepted proposal costs 8 calls.
    assert plan["presets"] == {
        "light": {"proposals": 5, "metric_calls": 44},
        "medium": {"proposals": 15, "metric_calls": 124},
        "heavy": {"proposals": 40, "metric_calls": 324},
    }
    assert plan["budget"] == {"metric_calls": 124, "max_cost": None, "iteration_cost": 8}
    assert plan["iterations"] == [15, 29]  # all accepted: 120/8; all rejected: (120 - 8)//4 + 1
    assert plan["calls"]["task"] == [124, 124] and plan["calls"]["reflection"] == [15, 29]
    assert plan["free"] is True and plan["cost"] == [0, 0]
    assert plan["warnings"] == []


def test_a_budget_that_buys_no_iteration_is_warned_about(user, task_set):
    plan = run_plan_for(
        owner=user, config=run_config(task_set, budget={"max_metric_calls": 9}, minibatch_size=2)
    )
    assert plan["iterations"] == [0, 0] and plan["metric_calls"] == [4, 4]
    assert any("nothing will be optimized" in w for w in plan["warnings"])


def test_tokens_money_and_time_come_from_the_endpoints_past_evaluations(
    user, task_set, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeOpenAIServer() as server:  # every answer: 11 prompt tokens, 3 completion tokens
        lm = {
            "provider": "openai",
            "model": "fake-model",
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "timeout": 5,
            "price_in_per_million": 1000.0,
            "price_out_per_million": 2000.0,
        }
        name = endpoint("priced", lm)
        execute_run(
            run_launch(
                owner=user,
                config=run_config(task_set, task_lm=name, budget={"max_metric_calls": 4}),
            ).pk
        )
        asked = len(server.requests)
        plan = run_plan_for(
            owner=user, config=run_config(task_set, task_lm=name, budget={"max_metric_calls": 40})
        )
        assert len(server.requests) == asked  # the history answered: no call was made
    assert plan["per_task_call"]["tokens_in"] == 11 and plan["per_task_call"]["tokens_out"] == 3
    assert plan["per_task_call"]["source"] == "past evaluations (4)"
    low_calls, high_calls = plan["calls"]["task"]
    assert plan["cost"] == [
        pytest.approx(low_calls * (11 * 1000 + 3 * 2000) / 1e6),
        pytest.approx(high_calls * 0.017),
    ]
    assert plan["tokens"][0] >= low_calls * 14 and plan["seconds"][1] >= plan["seconds"][0] >= 0


def test_the_dry_run_probes_an_endpoint_with_no_history_once_and_the_live_plan_never_does(
    user, user_client, task_set, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeOpenAIServer() as server:
        lm = {
            "provider": "openai",
            "model": "fake-model",
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "timeout": 5,
        }
        config = run_config(task_set, task_lm=endpoint("fresh", lm))
        live = user_client.post(
            reverse("runs:plan"), data=json.dumps(config), content_type="application/json"
        ).json()["plan"]
        assert [r for r in server.requests if r["body"]] == []
        assert live["per_task_call"]["source"] == "guess" and any(
            "guesses" in w for w in live["warnings"]
        )
        assert any("no price set" in w for w in live["warnings"])

        dry = user_client.post(
            reverse("runs:dry_run"), data=json.dumps(config), content_type="application/json"
        ).json()
        chat = [r for r in server.requests if r["body"]]
        assert (
            len(chat) == 1
            and chat[0]["body"]["messages"][0]["content"]
            == config["seed_components"]["instructions"]
        )
    assert dry["problems"] == [] and dry["plan"]["per_task_call"]["source"] == "probe call"
    assert dry["plan"]["per_task_call"]["tokens_in"] == 11


def test_a_cost_cap_below_the_expected_cost_is_warned_about(user, task_set, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    lm = {
        "provider": "openai",
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": KEY_ENV,
        "price_in_per_million": 100_000,
        "price_out_per_million": 0,
    }
    config = run_config(
        task_set, task_lm=endpoint("dear", lm), budget={"max_metric_calls": 40, "max_cost": 1}
    )
    plan = run_plan_for(owner=user, config=config)
    assert plan["cost"][0] > 1 and any("cost cap" in w for w in plan["warnings"])
