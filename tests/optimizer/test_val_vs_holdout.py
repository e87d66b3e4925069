"""Val vs held-out: the seed and the best side by side on each split, the lift
on each with its paired bootstrap interval, and the flag when held-out does not
confirm the val lift — in the read model, the API's run detail and the run page."""

import pytest
from django.urls import reverse

from optimizer.models import Evaluation, RunStatus
from optimizer.val_vs_holdout import run_val_vs_holdout
from tests.factories import recorded_run

pytestmark = pytest.mark.django_db


def held_out(run, index):
    return Evaluation.objects.filter(candidate__run=run, candidate__index=index, split="holdout")


def set_held_out(run, index, score):
    held_out(run, index).update(score=score)


@pytest.fixture
def run(user):
    run = recorded_run(user, candidates=6, val_tasks=12, holdout_tasks=12, climbing=True)
    assert run.best_candidate.index != 0
    return run


def test_it_puts_the_seed_and_the_best_side_by_side_on_val_and_held_out(run):
    report = run_val_vs_holdout(run)
    best = run.best_candidate.index
    assert report["state"] == "scored" and report["best_index"] == best
    seed_scores = list(held_out(run, 0).values_list("score", flat=True))
    best_scores = list(held_out(run, best).values_list("score", flat=True))
    assert report["holdout"]["tasks"] == 12 and report["val"]["tasks"] == 12
    assert report["holdout"]["seed_mean"] == pytest.approx(sum(seed_scores) / 12)
    assert report["holdout"]["best_mean"] == pytest.approx(sum(best_scores) / 12)
    assert report["val"]["best_mean"] == pytest.approx(run.best_candidate.val_score)
    for side in ("val", "holdout"):
        assert "(95% interval, 12 tasks)" in report[side]["lift"]["text"]
    assert report["evaluations"] == report["planned_evaluations"] == 24


def test_a_val_lift_the_held_out_tasks_do_not_bear_out_is_flagged(run):
    set_held_out(run, 0, 0.5)
    set_held_out(run, run.best_candidate.index, 0.5)
    report = run_val_vs_holdout(run)
    assert report["val"]["lift"]["difference"] > 0
    assert report["verdict"] == "not_confirmed"
    assert report["message"] == (
        "val lift not confirmed on held-out: the best does no better than the seed "
        "on the held-out tasks"
    )


def test_a_held_out_lift_whose_interval_lies_above_zero_confirms_the_val_lift(run):
    set_held_out(run, 0, 0.2)
    set_held_out(run, run.best_candidate.index, 0.9)
    report = run_val_vs_holdout(run)
    assert report["verdict"] == "confirmed" and report["holdout"]["lift"]["confirmed"] is True
    assert report["holdout"]["lift"]["low"] > 0


def test_fewer_than_ten_held_out_tasks_say_they_cannot_confirm_anything(user):
    run = recorded_run(user, candidates=6, val_tasks=12, holdout_tasks=3, climbing=True)
    set_held_out(run, 0, 0.2)
    set_held_out(run, run.best_candidate.index, 0.9)
    report = run_val_vs_holdout(run)
    assert report["verdict"] == "not_confirmed"
    assert "too few held-out tasks to tell (3; at least 10 are needed)" in report["message"]
    assert "too few tasks to tell" in report["holdout"]["lift"]["text"]


def test_a_run_without_a_holdout_split_says_its_val_lift_is_unchecked(user):
    report = run_val_vs_holdout(recorded_run(user, val_tasks=4))
    assert report["state"] == "none" and report["holdout"] is None
    assert report["message"].startswith("this run has no held-out split: its val lift is unchecked")


def test_a_run_still_going_says_when_its_held_out_tasks_will_be_scored(user):
    run = recorded_run(user, val_tasks=4, holdout_tasks=3, status=RunStatus.RUNNING)
    report = run_val_vs_holdout(run)
    assert report["state"] == "pending" and report["verdict"] is None
    assert (
        report["message"]
        == "the seed and the best are scored on 3 held-out tasks when the run ends"
    )


def test_the_api_run_detail_carries_the_val_vs_holdout_block(run, user_client):
    set_held_out(run, 0, 0.5)
    set_held_out(run, run.best_candidate.index, 0.5)
    detail = user_client.get(f"/api/runs/{run.pk}").json()
    assert detail["holdout"]["verdict"] == "not_confirmed"
    assert detail["holdout"]["holdout"]["lift"]["difference"] == 0
    assert detail["best_candidate"] == run.best_candidate.index  # the contract's fields stay


def test_the_run_page_shows_the_panel_and_the_flag_and_its_json_is_the_same_report(
    run, user_client
):
    set_held_out(run, 0, 0.5)
    set_held_out(run, run.best_candidate.index, 0.5)
    page = user_client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "Val vs held-out" in page
    assert "Val lift not confirmed on held-out: the best does no better" in page
    assert 'data-verdict="not_confirmed"' in page
    assert "24 of 24 evaluations" in page and "not metric calls" in page
    answer = user_client.get(reverse("runs:val_vs_holdout", args=[run.pk])).json()
    assert answer["verdict"] == "not_confirmed" and answer["holdout"]["tasks"] == 12
