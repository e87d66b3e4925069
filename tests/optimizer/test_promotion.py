import json

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from django.utils.html import escape

from optimizer.confidence import MIN_PAIRS, paired_lift
from optimizer.export import run_export, run_import
from optimizer.models import Evaluation, RunStatus
from optimizer.promotion import promotion_report, run_promote
from optimizer.runs import event_types as ev
from tests.factories import recorded_run
from tests.optimizer.run_helpers import run_demo_with_holdout

pytestmark = pytest.mark.django_db


HOLDOUT = 12  # above MIN_PAIRS: enough tasks for an interval


@pytest.fixture
def run(user):
    return recorded_run(
        user,
        candidates=3,
        val_tasks=3,
        holdout_tasks=HOLDOUT,
        name="Refund policy run",
        task_prefix="val-",
    )


def _set_holdout(run, index, scores):
    for i, score in enumerate(scores):
        Evaluation.objects.filter(
            candidate__run=run, candidate__index=index, task_key=f"hold-{i:03d}"
        ).update(score=score)


def _report(run, margin=0.02):
    return promotion_report(
        seed=run.candidates.get(index=0), candidate=run.candidates.get(index=2), margin=margin
    )


def test_a_lift_whose_holdout_interval_lies_above_zero_and_meets_the_margin_is_promoted(run):
    seed = [0.5] * HOLDOUT
    best = [0.6] * 8 + [0.55, 0.55, 0.5, 0.45]
    _set_holdout(run, 0, seed)
    _set_holdout(run, 2, best)
    report = _report(run)
    keys = [f"hold-{i:03d}" for i in range(HOLDOUT)]
    assert report.lift == paired_lift(dict(zip(keys, seed)), dict(zip(keys, best)))
    assert report.improvement == pytest.approx(0.85 / 12)
    assert report.lift.low > 0 and report.confirmed and report.promote
    assert (report.improved, report.regressed, report.unchanged) == (10, 1, 1)
    assert report.reason.startswith("Promote: the lift is confirmed")


def test_a_positive_mean_lift_whose_interval_spans_zero_is_not_confirmed_nor_promoted(run):
    _set_holdout(run, 0, [0.5] * HOLDOUT)
    _set_holdout(run, 2, [1.0, 1.0, 0.9] + [0.4] * 9)  # +0.042 on the mean: three big wins
    report = _report(run)
    assert report.improvement == pytest.approx(0.5 / 12) and report.beats_margin
    assert report.lift.low < 0 < report.lift.high
    assert not report.confirmed and not report.promote
    assert "not confirmed" in report.reason


def test_below_ten_holdout_tasks_the_report_says_too_few_tasks_to_tell(user):
    run = recorded_run(user, candidates=3, val_tasks=3, holdout_tasks=MIN_PAIRS - 1)
    _set_holdout(run, 0, [0.2] * (MIN_PAIRS - 1))
    _set_holdout(run, 2, [0.9] * (MIN_PAIRS - 1))  # every task up by 0.7
    report = _report(run)
    assert report.improvement == pytest.approx(0.7) and report.beats_margin
    assert not report.enough and report.lift.low is None
    assert not report.confirmed and not report.promote
    assert "too few tasks to tell" in report.reason


def test_a_confirmed_lift_below_the_margin_is_not_promoted(run):
    _set_holdout(run, 0, [0.5] * HOLDOUT)
    _set_holdout(run, 2, [0.51] * HOLDOUT)  # +0.01 on every task
    report = _report(run)
    assert report.confirmed and not report.beats_margin and not report.promote
    assert "below the margin" in report.reason
    assert _report(run, margin=0.01).promote  # exactly at a lower margin counts


def test_more_regressions_than_improvements_do_not_block_a_confirmed_lift(run):
    """Five tasks gain 0.5, seven lose 0.01: the interval weighs how far each moved."""
    _set_holdout(run, 0, [0.5] * HOLDOUT)
    _set_holdout(run, 2, [1.0] * 5 + [0.49] * 7)
    report = _report(run)
    assert (report.improved, report.regressed) == (5, 7)
    assert report.lift.low > 0 and report.promote


def test_there_is_no_report_without_holdout_evaluations(user):
    run = recorded_run(
        user, candidates=2, holdout_tasks=0, name="no holdout", val_tasks=6, task_prefix="val-"
    )
    assert (
        promotion_report(seed=run.candidates.get(index=0), candidate=run.candidates.get(index=1))
        is None
    )


def test_the_owner_promotes_a_finished_run_s_candidate(run, user):
    run_promote(run=run, candidate=run.candidates.get(index=1), user=user)
    run.refresh_from_db()
    assert run.chosen_candidate.index == 1


def test_promotion_is_refused_to_others_for_other_runs_candidates_and_while_running(
    run, user, other_user
):
    with pytest.raises(PermissionDenied):
        run_promote(run=run, candidate=run.candidates.get(index=1), user=other_user)
    elsewhere = recorded_run(
        user, name="elsewhere", candidates=4, val_tasks=6, holdout_tasks=4, task_prefix="val-"
    ).candidates.get(index=1)
    with pytest.raises(ValueError, match="^candidate:"):
        run_promote(run=run, candidate=elsewhere, user=user)
    run.status = RunStatus.RUNNING
    run.save()
    with pytest.raises(ValueError, match="^run:"):
        run_promote(run=run, candidate=run.candidates.get(index=1), user=user)
    run.refresh_from_db()
    assert run.chosen_candidate is None


@pytest.mark.django_db(transaction=True)
def test_the_report_on_a_real_run_matches_the_runner_s_holdout_scores_and_survives_an_export(
    user, other_user, user_client, settings, tmp_path, monkeypatch
):
    from optimizer.runs import runner

    settings.RUNS_DIR = tmp_path / "runs"
    monkeypatch.setattr(
        runner, "HEARTBEAT_SECONDS", 3600
    )  # see tests/optimizer/runs/test_runner.py
    run = run_demo_with_holdout(user)
    scored = run.events.get(type=ev.HOLDOUT_SCORED).payload
    seed, best = run.candidates.get(index=0), run.best_candidate
    assert best.index != seed.index  # the simulator improves on the seed

    report = promotion_report(seed=seed, candidate=best)

    assert len(report.rows) == scored["tasks"]
    assert report.seed_mean == pytest.approx(scored["seed_score"]) and report.mean == pytest.approx(
        scored["best_score"]
    )
    html = user_client.get(reverse("compare:promotion", args=[run.pk])).content.decode()
    assert f'data-verdict="{"promote" if report.promote else "keep"}"' in html
    assert escape(report.reason) in html and escape(report.lift.describe()) in html
    for row in report.rows:
        assert f"<td>{row.task_key}</td>" in html

    copy = run_import(owner=other_user, data=json.loads(json.dumps(run_export(run))))
    again = promotion_report(seed=copy.candidates.get(index=0), candidate=copy.best_candidate)
    assert [(r.task_key, r.seed_score, r.score) for r in again.rows] == [
        (r.task_key, r.seed_score, r.score) for r in report.rows
    ]
    assert again.promote == report.promote

    user_client.post(reverse("compare:promotion", args=[run.pk]), {"candidate": best.index})
    run.refresh_from_db()
    assert run.chosen_candidate == best
