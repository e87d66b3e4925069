"""Re-scoring a finished run's stored outputs with other verifier specs (optimizer/scorings.py)."""

from __future__ import annotations

import copy

import pytest

from dashboard.celery import app
from optimizer.models import (
    Candidate,
    Evaluation,
    Run,
    RunKind,
    RunStatus,
    Scoring,
    ScoringCandidate,
    ScoringStatus,
)
from optimizer.runs.adapter import MAX_OUTPUT_CHARS, MODEL_FAILED
from optimizer.scorings.execute import EXTERNAL_CUT_LENGTHS, output_was_cut, scoring_execute
from optimizer.scorings.services import (
    ScoringRefused,
    scoring_create,
    scoring_specs,
    scoring_verifier_spec,
)
from tests.factories import FORMAT, POLICY, REFUND_POLICY, WINDOW_ONLY, recorded_run
from verifiers_app.engine import SpecError
from verifiers_app.services import verifier_create, verifier_update

pytestmark = pytest.mark.django_db

# Scores the window phrase only: a different ranking from the run's own verifiers.


def _rescore(run, user, specs, source=None, name=""):
    scoring = scoring_create(
        run=run, user=user, specs=specs, source=source or [{"edited": True}], name=name
    )
    assert scoring_execute(scoring.pk) == "done"
    scoring.refresh_from_db()
    return scoring


def _stored(run):
    return {
        "candidates": list(
            Candidate.objects.filter(run=run)
            .order_by("index")
            .values_list("index", "val_score", "on_front", "val_task_scores")
        ),
        "evaluations": list(
            Evaluation.objects.filter(candidate__run=run)
            .order_by("pk")
            .values_list("pk", "output", "score", "verdict", "result", "feedback")
        ),
        "best": Run.objects.get(pk=run.pk).best_candidate_id,
    }


def test_the_runs_own_verifiers_give_back_every_stored_score(user):
    run = recorded_run(user, candidates=8, val_tasks=6)
    scoring = _rescore(run, user, [POLICY, FORMAT])

    assert scoring.status == ScoringStatus.DONE
    rows = {c.index: c for c in scoring.candidates.all()}
    for candidate in Candidate.objects.filter(run=run):
        stored = dict(
            Evaluation.objects.filter(candidate=candidate, split="val").values_list(
                "task_key", "score"
            )
        )
        assert rows[candidate.index].task_scores == stored
        assert rows[candidate.index].val_score == pytest.approx(candidate.val_score, abs=1e-12)
        assert rows[candidate.index].rank == rows[candidate.index].original_rank
        assert rows[candidate.index].on_front == candidate.on_front
    assert scoring.summary["changed"] == 0
    assert scoring.summary["best"]["index"] == run.best_candidate.index


def test_an_edited_spec_changes_the_ranking_and_leaves_the_original_untouched(user):
    run = recorded_run(user, candidates=12, val_tasks=6)
    before = _stored(run)

    scoring = _rescore(run, user, [WINDOW_ONLY], name="window only")

    assert _stored(run) == before
    assert scoring.name == "window only"
    assert scoring.summary["changed"] > 0
    moved = [c for c in scoring.candidates.all() if c.rank != c.original_rank]
    assert moved, "the window-only verifier ranks the candidates differently"
    assert scoring.summary["moved"][0]["rank"] != scoring.summary["moved"][0]["original_rank"]


def test_the_summary_says_how_sure_each_best_is_against_the_seed_under_its_scoring(user):
    from optimizer.confidence import paired_lift
    from optimizer.promotion import candidate_lift, seed_candidate

    run = recorded_run(user, candidates=12, val_tasks=12)
    scoring = _rescore(run, user, [WINDOW_ONLY])

    seed = seed_candidate(run)
    rows = {c.index: c.task_scores for c in scoring.candidates.all()}
    best = scoring.summary["best"]["index"]
    new = scoring.summary["best_vs_seed"]
    assert (new["seed"], new["best"]) == (seed.index, best)
    expected = paired_lift(rows[seed.index], rows[best]).as_dict()
    assert {k: new[k] for k in expected} == expected
    assert new["low"] is not None and new["tasks"] == 12  # enough tasks for an interval

    old = scoring.summary["original_best_vs_seed"]
    assert (old["seed"], old["best"]) == (seed.index, run.best_candidate.index)
    expected = candidate_lift(seed, run.best_candidate, "val").as_dict()
    assert {k: old[k] for k in expected} == expected
    assert old["text"] != new["text"]


def test_a_second_scoring_is_kept_beside_the_first(user):
    run = recorded_run(user, candidates=4, val_tasks=3)
    first = _rescore(run, user, [WINDOW_ONLY])
    second = _rescore(run, user, [POLICY, FORMAT])

    assert list(run.scorings.order_by("pk")) == [first, second]
    assert first.name != second.name
    assert ScoringCandidate.objects.filter(scoring=first).count() == 4


def test_cut_outputs_are_scored_as_stored_and_flagged(user):
    run = recorded_run(user, candidates=3, val_tasks=3)
    evaluation = Evaluation.objects.filter(candidate__run=run, candidate__index=1).first()
    evaluation.output = ("30 days " * MAX_OUTPUT_CHARS)[:MAX_OUTPUT_CHARS]
    evaluation.save()

    scoring = _rescore(run, user, [WINDOW_ONLY])

    row = scoring.candidates.get(index=1)
    assert row.cut_tasks == [evaluation.task_key]
    assert row.task_scores[evaluation.task_key] == 1.0
    assert scoring.summary["cut"] == 1
    assert scoring.candidates.get(index=0).cut_tasks == []


def test_an_output_the_model_never_gave_keeps_its_original_score(user):
    run = recorded_run(user, candidates=3, val_tasks=3)
    failed = Evaluation.objects.filter(candidate__run=run, candidate__index=2).first()
    failed.output, failed.score, failed.feedback = "", 0.0, f"{MODEL_FAILED}timeout"
    failed.save()

    scoring = _rescore(run, user, [WINDOW_ONLY])

    row = scoring.candidates.get(index=2)
    assert row.task_scores[failed.task_key] == 0.0
    assert row.kept == 1
    assert scoring.summary["kept"] == 1


def test_a_bad_spec_is_refused_naming_the_field():
    bad = copy.deepcopy(WINDOW_ONLY)
    bad["checks"][0]["params"]["pattern"] = "(unclosed"
    with pytest.raises(SpecError) as error:
        scoring_specs(bad)
    assert error.value.problems[0].startswith("spec.checks[0].params.pattern")

    with pytest.raises(SpecError) as error:
        scoring_specs([WINDOW_ONLY, {"id": "x", "checks": "no"}])
    assert error.value.problems[0].startswith("spec[1].")


def test_nothing_is_written_for_a_refused_scoring(user):
    run = recorded_run(user, candidates=2, val_tasks=2, status=RunStatus.RUNNING)
    with pytest.raises(ScoringRefused, match="running"):
        scoring_create(run=run, user=user, specs=[WINDOW_ONLY], source=[{"edited": True}])
    assert not Scoring.objects.exists()


def test_a_saved_verifier_is_taken_at_the_version_asked_for(user):
    verifier = verifier_create(owner=user, spec=REFUND_POLICY)
    edited = {**REFUND_POLICY, "checks": REFUND_POLICY["checks"][:1]}
    verifier_update(verifier=verifier, spec=edited, user=user)

    spec, source = scoring_verifier_spec(user=user, verifier_id="refund-policy", version=1)
    assert spec == REFUND_POLICY and source == {"id": "refund-policy", "version": 1}
    spec, source = scoring_verifier_spec(user=user, verifier_id="refund-policy")
    assert spec == edited and source["version"] == 2
    with pytest.raises(SpecError, match="^version: "):
        scoring_verifier_spec(user=user, verifier_id="refund-policy", version=9)


def test_an_external_run_with_outputs_is_rescored(user):
    run = recorded_run(user, candidates=4, val_tasks=3)
    Run.objects.filter(pk=run.pk).update(kind=RunKind.EXTERNAL, config={})
    run.refresh_from_db()
    cut = Evaluation.objects.filter(candidate__run=run, candidate__index=0).first()
    cut.output = "x" * 3999 + "…"
    cut.save()

    scoring = _rescore(run, user, [WINDOW_ONLY])

    assert scoring.status == ScoringStatus.DONE
    assert scoring.candidates.get(index=0).cut_tasks == [cut.task_key]


def test_it_calls_no_model(user, monkeypatch):
    import optimizer.lm
    from optimizer.lm.openai_provider import _OpenAI
    from optimizer.lm.simulator import DemoLanguageModel

    def refuse(*args, **kwargs):
        raise AssertionError("a model was called")

    monkeypatch.setattr(DemoLanguageModel, "complete", refuse)
    monkeypatch.setattr(_OpenAI, "__init__", refuse)
    monkeypatch.setattr(optimizer.lm, "build_lm", refuse)
    run = recorded_run(user, candidates=3, val_tasks=3)
    assert _rescore(run, user, [WINDOW_ONLY]).status == ScoringStatus.DONE


def test_a_scoring_is_queued_for_the_workers_after_commit(
    user, django_capture_on_commit_callbacks, monkeypatch
):
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    run = recorded_run(user, candidates=3, val_tasks=3)
    with django_capture_on_commit_callbacks(execute=True):
        scoring = scoring_create(run=run, user=user, specs=[WINDOW_ONLY], source=[])
    scoring.refresh_from_db()
    assert scoring.status == ScoringStatus.DONE
    assert scoring.done == scoring.total == 9


def test_the_cut_rule_knows_each_writer():
    assert output_was_cut("a" * MAX_OUTPUT_CHARS, external=False)
    assert not output_was_cut("a" * 300, external=False)
    assert output_was_cut("a" * 3999 + "…", external=True)
    assert not output_was_cut("a" * 3999 + "…", external=False)
    assert not output_was_cut("short…", external=True)


def test_the_cut_lengths_are_the_external_writers_own():
    import inspect

    from frontier_tracker import FrontierTracker
    from optimizer.external.replay import OUTPUT_CHARS

    default = inspect.signature(FrontierTracker.__init__).parameters["max_output_chars"].default
    assert {OUTPUT_CHARS, default, MAX_OUTPUT_CHARS} == set(EXTERNAL_CUT_LENGTHS)


def test_the_run_export_carries_its_scorings_and_an_import_keeps_them(user, other_user):
    from optimizer.export import RunDocument, run_export, run_import

    run = recorded_run(user, candidates=4, val_tasks=3)
    scoring = _rescore(run, user, [WINDOW_ONLY], name="window")
    document = run_export(run)
    RunDocument.model_validate(document)
    assert [s["name"] for s in document["scorings"]] == ["window"]
    assert len(document["scorings"][0]["candidates"]) == 4
    assert document["scorings"][0]["summary"]["best_vs_seed"] == scoring.summary["best_vs_seed"]

    copy_ = run_import(owner=other_user, data=document)

    imported = copy_.scorings.get()
    assert imported.name == "window" and imported.summary == scoring.summary
    assert {c.index: c.task_scores for c in imported.candidates.all()} == {
        c.index: c.task_scores for c in scoring.candidates.all()
    }


def test_a_server_starting_sends_again_the_scorings_the_last_one_left(user, monkeypatch):
    from optimizer.celery_tasks import requeue_interrupted_scorings

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    run = recorded_run(user, candidates=3, val_tasks=2)
    left = scoring_create(run=run, user=user, specs=[WINDOW_ONLY], source=[])
    Scoring.objects.filter(pk=left.pk).update(status=ScoringStatus.RUNNING, done=2)

    assert requeue_interrupted_scorings() == [left.pk]
    left.refresh_from_db()
    assert left.status == ScoringStatus.DONE and left.done == 6


def test_a_scoring_whose_worker_died_is_sent_again_by_the_watchdog_and_finished(user, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from optimizer.celery_tasks import requeue_stale_scorings
    from optimizer.runs.runner import STALE_AFTER

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    run = recorded_run(user, candidates=3, val_tasks=2)
    left = scoring_create(run=run, user=user, specs=[WINDOW_ONLY], source=[])
    silent_since = timezone.now() - STALE_AFTER - timedelta(seconds=1)
    Scoring.objects.filter(pk=left.pk).update(
        status=ScoringStatus.RUNNING, done=2, heartbeat_at=silent_since
    )

    assert requeue_stale_scorings() == [left.pk]
    left.refresh_from_db()
    assert left.status == ScoringStatus.DONE and left.done == 6
    assert left.candidates.count() == 3
    assert requeue_stale_scorings() == []


def test_a_scoring_with_a_live_worker_is_left_to_it(user):
    from django.utils import timezone

    from optimizer.celery_tasks import requeue_stale_scorings

    run = recorded_run(user, candidates=3, val_tasks=2)
    busy = scoring_create(run=run, user=user, specs=[WINDOW_ONLY], source=[])
    Scoring.objects.filter(pk=busy.pk).update(
        status=ScoringStatus.RUNNING, done=2, heartbeat_at=timezone.now()
    )

    assert requeue_stale_scorings() == []
    assert scoring_execute(busy.pk) == "skipped"  # the same message delivered twice
    busy.refresh_from_db()
    assert busy.status == ScoringStatus.RUNNING and busy.done == 2


def test_a_scoring_left_running_with_the_broker_down_fails_with_a_sentence(user, monkeypatch):
    from optimizer import celery_tasks

    def unreachable(*_args, **_kwargs):
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379")

    monkeypatch.setattr(celery_tasks.rescore_run, "delay", unreachable)
    run = recorded_run(user, candidates=2, val_tasks=2)
    left = scoring_create(run=run, user=user, specs=[WINDOW_ONLY], source=[])
    Scoring.objects.filter(pk=left.pk).update(status=ScoringStatus.RUNNING, heartbeat_at=None)

    assert celery_tasks.requeue_stale_scorings() == []
    left.refresh_from_db()
    assert left.status == ScoringStatus.FAILED
    assert (
        left.error.startswith("the workers could not be reached") and "re-score again" in left.error
    )
