"""The run event catalogue: one pydantic model per event type, checked when an
event is published (FRONTIER_VALIDATE_EVENTS, on in every test), and
docs/websockets.md's catalogue written from the same models (its staleness
check: tests/dashboard/test_reference_docs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.models import Evaluation, RunEvent, RunStatus
from optimizer.runs import event_types as ev
from optimizer.runs.events import publish_run_event
from tests.factories import recorded_run
from tests.optimizer.run_helpers import run_demo_with_holdout

WEBSOCKETS_PAGE = Path(__file__).resolve().parents[3] / "docs" / "websockets.md"


@pytest.mark.django_db
def test_a_payload_that_does_not_match_its_model_is_refused_naming_the_field_and_nothing_is_written(
    user,
):
    run = recorded_run(owner=user, candidates=1, val_tasks=1, status=RunStatus.RUNNING)
    before = RunEvent.objects.filter(run=run).count()
    with pytest.raises(
        ev.EventPayloadError, match=r"run.budget event: data.used: Input should be a valid integer"
    ):
        publish_run_event(run.pk, ev.RUN_BUDGET, {"used": "12", "total": 50})
    with pytest.raises(ev.EventPayloadError, match=r"trials event: data.items.0.verdict"):
        publish_run_event(
            run.pk,
            ev.TRIALS,
            {
                "candidate": 0,
                "split": "val",
                "items": [
                    {"task_key": "t", "score": 1.0, "verdict": "great", "output": "", "reasons": []}
                ],
            },
        )
    with pytest.raises(
        ev.EventPayloadError, match=r"error event: data.severity: Extra inputs are not permitted"
    ):
        publish_run_event(
            run.pk, ev.ERROR, {"where": "runner", "message": "x", "iteration": None, "severity": 3}
        )
    assert RunEvent.objects.filter(run=run).count() == before


@pytest.mark.django_db
def test_an_event_type_outside_the_catalogue_is_refused(user):
    run = recorded_run(owner=user, candidates=1, val_tasks=1, status=RunStatus.RUNNING)
    with pytest.raises(ev.EventPayloadError, match="'run.stats' is not an event type"):
        publish_run_event(run.pk, "run.stats", {})


@pytest.mark.django_db
def test_with_validation_off_a_payload_is_stored_as_given(user, settings):
    settings.FRONTIER_VALIDATE_EVENTS = False
    run = recorded_run(owner=user, candidates=1, val_tasks=1, status=RunStatus.RUNNING)
    assert publish_run_event(run.pk, ev.WORKER_PING, {"note": "no host"}).payload == {
        "note": "no host"
    }


@pytest.mark.django_db(transaction=True)
def test_every_event_of_a_real_run_with_a_holdout_matches_its_model(user, settings, tmp_path):
    # Validation is on: a mismatch would already have failed the run; this also
    # shows which types a native run uses.
    settings.RUNS_DIR = tmp_path / "runs"
    run = run_demo_with_holdout(user)
    stored = list(RunEvent.objects.filter(run=run).values_list("type", "payload"))
    for type, payload in stored:
        ev.validate_payload(type, payload)
    assert {type for type, _ in stored} >= {
        ev.RUN_STATUS,
        ev.RUN_BUDGET,
        ev.CANDIDATE_NEW,
        ev.FRONT_UPDATED,
        ev.PROPOSAL,
        ev.TRIALS,
        ev.RUN_FINISHED,
        ev.HOLDOUT_SCORED,
    }


@pytest.mark.django_db
def test_a_native_runs_trials_say_whether_every_verifier_passed_as_its_evaluations_do(
    user, settings, tmp_path
):
    """Each trials item carries `passed` beside the verdict (docs/verifier-semantics.md
    "Passed and verdict"), the same as the Evaluation row stored for it."""
    settings.RUNS_DIR = tmp_path / "runs"
    run = run_demo_with_holdout(user)
    stored = {
        (index, split, key): passed
        for index, split, key, passed in Evaluation.objects.filter(candidate__run=run).values_list(
            "candidate__index", "split", "task_key", "passed"
        )
    }
    checked = 0
    for payload in RunEvent.objects.filter(run=run, type=ev.TRIALS).values_list(
        "payload", flat=True
    ):
        for item in payload["items"]:
            assert isinstance(item["passed"], bool), item
            key = (payload["candidate"], payload["split"], item["task_key"])
            if key in stored:
                assert item["passed"] == stored[key], key
                checked += 1
    assert checked


@pytest.mark.django_db
def test_the_run_factory_writes_events_in_the_catalogue_shapes(user):
    # It writes RunEvents directly (no publish): checked here instead.
    run = recorded_run(
        owner=user, candidates=8, val_tasks=3, holdout_tasks=2, status=RunStatus.COMPLETED
    )
    stored = list(RunEvent.objects.filter(run=run).values_list("type", "payload"))
    for type, payload in stored:
        ev.validate_payload(type, payload)
    # The shape it promises: merges, rejected proposals, a holdout scored, one front delta per candidate.
    assert run.candidates.filter(origin="merge").exists()
    assert any(type == ev.PROPOSAL and not payload["accepted"] for type, payload in stored)
    assert [type for type, _ in stored].count(ev.FRONT_UPDATED) == 8 and ev.HOLDOUT_SCORED in {
        t for t, _ in stored
    }
    assert run.candidates.get(index=0).evaluations.filter(split="holdout").count() == 2


def test_the_websockets_page_lists_every_event_type():
    page = WEBSOCKETS_PAGE.read_text()
    for type in ev.CATALOGUE:
        assert f"- **`{type}`**" in page


def test_the_catalogue_names_each_model_under_its_own_type():
    assert ev.CATALOGUE == (
        ev.RUN_STATUS,
        ev.RUN_BUDGET,
        ev.CANDIDATE_NEW,
        ev.CANDIDATE_INJECTED,
        ev.FRONT_UPDATED,
        ev.PROPOSAL,
        ev.TRIALS,
        ev.ERROR,
        ev.RUN_FINISHED,
        ev.RUN_PAUSED,
        ev.HOLDOUT_SCORED,
        ev.WORKER_PING,
        ev.NOTE_SAVED,
        ev.NOTE_DELETED,
    )
    assert all(ev.PAYLOADS[type].type == type for type in ev.CATALOGUE)
