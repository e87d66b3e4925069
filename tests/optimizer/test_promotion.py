import json

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from optimizer.export import run_export, run_import
from optimizer.models import Evaluation, RunStatus
from optimizer.promotion import promotion_report, run_promote
from optimizer.runs import event_types as ev
from tests.factories import recorded_run
from tests.optimizer.run_helpers import run_demo_with_holdout

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(user):
    return recorded_run(
        user,
        candidates=3,
        val_tasks=3,
        holdout_tasks=4,
        name="Refund policy run",
        task_prefix="val-",
    )


def _set_holdout(run, index, scores):
    for key, score in zip(["hold-000", "hold-001", "hold-002", "hold-003"], scores):
        Evaluation.objects.filter(candidate__run=run, candidate__index=index, task_key=key).update(
            score=score
        )


def _report(run, margin=0.02):
    return promotion_report(
        seed=run.candidates.get(index=0), candidate=run.candidates.get(index=2), margin=margin
    )


def test_a_candidate_that_beats_the_seed_by_the_margin_without_net_regressions_is_promoted(run):
    _set_holdout(run, 0, [0.5, 0.5, 0.5, 0.5])
    _set_holdout(run, 2, [0.6, 0.6, 0.5, 0.45])
    report = _report(run)
    assert report.improvement == pytest.approx(0.0375)
    assert (report.improved, report.regressed) == (2, 1)
    assert report.promote


def test_an_improvement_below_the_margin_is_not_promoted(run):
    _set_holdout(run, 0, [0.5, 0.5, 0.5, 0.5])
    _set_holdout(run, 2, [0.54, 0.5, 0.5, 0.5])  # +0.01 on the mean
    report = _report(run)
    assert report.few_regressions and not report.beats_margin and not report.promote
    assert _report(run, margin=0.01).promote  # exactly at a lower margin counts


def test_more_regressions_than_improvements_blocks_promotion_even_with_a_big_mean_gain(run):
    _set_holdout(run, 0, [0.2, 0.6, 0.6, 0.6])
    _set_holdout(run, 2, [1.0, 0.55, 0.55, 0.6])
    report = _report(run)
    assert report.beats_margin and (report.improved, report.regressed) == (1, 2)
    assert not report.promote


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
