"""A fast run's trials on PostgreSQL, where the recorder's writer commits what
gepa reports every ~100 ms: the minibatch evaluations of one candidate written
together go out as one trials event, and every item is still there, in order."""

from __future__ import annotations

import pytest

from optimizer.models import RunEvent, RunStatus
from optimizer.runs import event_types as ev
from optimizer.runs import recording_thread
from optimizer.runs.recorder import MAX_TRIAL_ITEMS, RunRecorder
from optimizer.runs.runner import execute_run
from optimizer.services import run_launch
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("runs_dir")]


def test_a_fast_run_writes_one_trials_event_for_a_candidates_minibatches_in_a_row(
    user, monkeypatch
):
    """With a model that answers at once gepa evaluates the same candidate many
    times between two of the writer's commits. Those minibatches share one
    trials event (at most MAX_TRIAL_ITEMS items), so the event log holds every
    item the recorder made, in the order it made them, in far fewer rows. The
    rules of joining: test_recording_thread.py."""
    made: list[tuple[int | None, list[dict]]] = []
    add_trials = RunRecorder._add_trials

    def noting(self, index, items):
        made.append((index, items))
        add_trials(self, index, items)

    monkeypatch.setattr(RunRecorder, "_add_trials", noting)
    monkeypatch.setattr(
        recording_thread, "GATHER_SECONDS", 0.5
    )  # batches whatever the machine's pace
    refund_verifier(user)
    task_set = refund_task_set(user, splits=["train", "val"] * 4)
    lm = {"provider": "demo", "model": "demo-task", "simulated_latency_ms": 0}
    run = run_launch(
        owner=user,
        config=run_config(task_set, task_lm=lm, budget={"max_metric_calls": 600}),
    )
    assert execute_run(run.pk) == RunStatus.COMPLETED

    written = [
        payload
        for payload in RunEvent.objects.filter(run=run, type=ev.TRIALS)
        .order_by("seq")
        .values_list("payload", flat=True)
        if payload["split"] == "train"
    ]
    assert len(made) > 50
    assert len(written) < len(made) / 5
    assert max(len(p["items"]) for p in written) <= MAX_TRIAL_ITEMS
    assert [(p["candidate"], item) for p in written for item in p["items"]] == [
        (index, item) for index, items in made for item in items
    ]
