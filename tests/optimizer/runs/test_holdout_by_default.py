"""A run scores its seed and best on the set's holdout split when it ends, by
default; the switch (evaluate_holdout) turns it off. Those evaluations are not
metric calls: the plan lists them on their own line and budget_used leaves them out."""

from __future__ import annotations

import pytest

from optimizer.models import Evaluation, RunEvent, RunStatus
from optimizer.runs import event_types as ev
from optimizer.runs.runner import execute_run
from optimizer.services import run_dry_run, run_launch, run_plan_for
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("runs_dir")]


@pytest.fixture
def task_set(user):
    refund_verifier(user)
    # 3 train, 3 val, 2 holdout: as the import's rule leaves a set's holdout tasks.
    return refund_task_set(user, splits=["train", "val", "holdout"] * 3)


def finished(user, task_set, **overrides):
    overrides = {"budget": {"max_metric_calls": 30}} | overrides
    run = run_launch(owner=user, config=run_config(task_set, **overrides))
    assert execute_run(run.pk) == RunStatus.COMPLETED
    run.refresh_from_db()
    return run


def holdout_of(run):
    return Evaluation.objects.filter(candidate__run=run, split="holdout")


def test_a_set_with_holdout_tasks_gets_its_seed_and_best_scored_on_them_without_asking(
    user, task_set
):
    run = finished(user, task_set)
    assert run.config["splits"]["holdout"] == "holdout" and run.config["evaluate_holdout"] is True
    assert set(holdout_of(run).values_list("candidate__index", flat=True)) == {
        0,
        run.best_candidate.index,
    }
    scored = RunEvent.objects.get(run=run, type=ev.HOLDOUT_SCORED).payload
    assert scored["tasks"] == 2


def test_the_switch_off_runs_no_holdout_evaluation(user, task_set):
    run = finished(user, task_set, evaluate_holdout=False)
    assert run.config["splits"]["holdout"] is None
    assert not holdout_of(run).exists()
    assert not RunEvent.objects.filter(run=run, type=ev.HOLDOUT_SCORED).exists()


def test_held_out_evaluations_are_not_counted_in_the_budget_used(user, task_set):
    on, off = finished(user, task_set), finished(user, task_set, evaluate_holdout=False)
    assert holdout_of(on).count() >= 2 and not holdout_of(off).exists()
    assert on.budget_used == off.budget_used <= on.budget_total == off.budget_total
    # The model calls did happen: the run's usage counts them.
    assert (
        on.progress.usage["task"]["calls"]
        == off.progress.usage["task"]["calls"] + holdout_of(on).count()
    )


def test_a_named_holdout_split_with_the_switch_off_is_refused_naming_the_field(user, task_set):
    problems = run_dry_run(
        owner=user,
        config=run_config(task_set, splits={"holdout": "holdout"}, evaluate_holdout=False),
    )
    assert (
        "splits.holdout",
        'names the split "holdout" but evaluate_holdout is off: clear one of them',
    ) in problems


def test_a_set_without_holdout_tasks_plans_no_held_out_evaluation(user):
    refund_verifier(user)
    plain = refund_task_set(user, name="Plain")  # 4 train, 4 val
    plan = run_plan_for(owner=user, config=run_config(plain))
    assert plan["holdout"] is None and "holdout" not in plan["splits"]


def test_the_plan_lists_the_holdout_calls_apart_from_the_metric_call_budget(user, task_set):
    on = run_plan_for(owner=user, config=run_config(task_set))
    off = run_plan_for(owner=user, config=run_config(task_set, evaluate_holdout=False))
    assert on["splits"] == {"train": 3, "val": 3, "holdout": 2}
    assert on["holdout"]["evaluations"] == 4 and on["holdout"]["metric_calls"] == 0
    assert on["holdout"]["calls"]["task"] == [4, 4]
    assert off["holdout"] is None
    for same in ("budget", "metric_calls", "calls", "iterations"):
        assert on[same] == off[same]


def test_the_cost_cap_holds_for_the_held_out_evaluation_too(user, task_set, monkeypatch):
    """$1 a task call: the seed's 3 val tasks cost $3 and the budget buys nothing
    more, so the held-out scoring (2 more calls) would pass a $4 cap. It is cut
    short: the run keeps its stop reason (the search ended on its budget), the
    errors say the held-out evaluation was cut, and the panel that the val lift
    went unchecked."""
    from optimizer.val_vs_holdout import run_val_vs_holdout
    from tests.optimizer.fake_openai import KEY_ENV, FakeOpenAIServer
    from tests.optimizer.run_helpers import endpoint
    from tests.optimizer.runs.test_budget import fake_lm

    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeOpenAIServer() as server:
        dear = endpoint(
            "dear", fake_lm(server, price_in_per_million=1e6 / 11, price_out_per_million=0)
        )
        run = finished(user, task_set, task_lm=dear, budget={"max_metric_calls": 3, "max_cost": 4})
    assert run.cost <= 4 and run.budget_used == 3 and run.stop_reason == "budget reached"
    assert not RunEvent.objects.filter(run=run, type=ev.HOLDOUT_SCORED).exists()
    cut = RunEvent.objects.filter(run=run, type=ev.ERROR).values_list("payload", flat=True)
    assert [e["message"] for e in cut] == [
        "held-out evaluation cut short: cost cap reached; the val lift is unchecked"
    ]
    report = run_val_vs_holdout(run)
    assert report["state"] == "not_scored"
    assert report["message"] == (
        "the run ended (budget reached) without its held-out scores: its val lift is unchecked"
    )
