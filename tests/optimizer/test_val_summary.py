"""What the run page reads of each candidate is stored when the recorder records
it, and old runs get it from the data migration."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from optimizer.models import Candidate, Evaluation
from optimizer.runs import runner
from optimizer.runs.runner import execute_run
from optimizer.services import run_launch
from tests.factories import recorded_run
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config


def _from_evaluations(candidate: Candidate) -> tuple[dict, dict]:
    rows = list(Evaluation.objects.filter(candidate=candidate, split="val"))
    answered = [e for e in rows if e.tokens_in or e.tokens_out]
    n = len(answered) or 1
    verdicts = [e.verdict for e in rows]
    return {e.task_key: e.score for e in rows}, {
        "prompt_tokens": round(sum(e.tokens_in for e in answered) / n),
        "mean_output_tokens": round(sum(e.tokens_out for e in answered) / n, 1),
        "mean_latency_ms": round(sum(e.latency_ms for e in answered) / n, 1),
        "verdicts": {v: verdicts.count(v) for v in ("pass", "borderline", "fail")},
    }


@pytest.mark.django_db(transaction=True)
def test_the_recorder_stores_each_candidates_val_scores_and_summary_as_it_records_it(
    user, settings, tmp_path, monkeypatch
):
    settings.RUNS_DIR = tmp_path / "runs"
    monkeypatch.setattr(
        runner, "HEARTBEAT_SECONDS", 3600
    )  # see test_runner.py: in-memory SQLite and a second thread
    refund_verifier(user)
    task_set = refund_task_set(user, splits=["train", "val"] * 4)
    run = run_launch(owner=user, config=run_config(task_set))
    execute_run(run.pk)
    candidates = list(Candidate.objects.filter(run=run))
    assert len(candidates) >= 3
    for candidate in candidates:
        scores, summary = _from_evaluations(candidate)
        assert candidate.val_task_scores == pytest.approx(scores) and len(scores) == 4
        assert candidate.val_summary == summary


@pytest.mark.django_db
def test_the_data_migration_fills_candidates_recorded_before_the_fields_existed(user):
    run = recorded_run(owner=user, candidates=5, val_tasks=4)
    Candidate.objects.filter(run=run).update(val_task_scores=None, val_summary=None)
    backfill = importlib.import_module(
        "optimizer.migrations.0009_i16a_backfill_val_summary"
    ).backfill
    backfill(apps, None)
    for candidate in Candidate.objects.filter(run=run):
        scores, summary = _from_evaluations(candidate)
        assert candidate.val_task_scores == scores and candidate.val_summary == summary
