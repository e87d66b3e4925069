"""A real gepa run with the demo simulator, executed by optimizer.runs.runner, reads
the reviewer notes saved while it runs: the proposals it records say which."""

from __future__ import annotations

import pytest

from dashboard.lib.db_retry import retry_db
from optimizer.models import RunEvent, RunStatus
from optimizer.reviewer_notes import reviewer_note_create
from optimizer.runs import event_types as ev
from optimizer.runs.adapter import FrontierAdapter
from optimizer.runs.recording_thread import RecorderThread
from optimizer.runs.runner import execute_run
from tests.optimizer.runs.test_runner import launch, task_set  # noqa: F401 - the fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("runs_dir")]

TRAIN_KEYS = ["shoes", "jacket", "gift", "sofa"]  # refund_task_set with splits train, val, …


def test_a_note_saved_while_the_run_runs_reaches_the_later_reflections_on_its_task(
    user, task_set, monkeypatch
):
    """Notes on every train task, saved once candidate 1 is accepted: no proposal
    before read one, every later proposal reads the notes on its minibatch's tasks
    (and only those), and the reflective dataset gepa handed the proposer held them."""
    run = launch(user, task_set, budget={"max_metric_calls": 120})
    accepted = RecorderThread.on_candidate_accepted
    saved: dict[str, int] = {}

    def note_at_candidate_one(self, event):
        accepted(self, event)
        if event["new_candidate_idx"] == 1 and not saved:
            for key in TRAIN_KEYS:
                note = retry_db(
                    lambda key=key: reviewer_note_create(
                        run=run, user=user, task_key=key, text=f'should mention "note-{key}"'
                    ),
                    what="note",
                )
                saved[key] = note.pk

    datasets: list[list[dict]] = []
    build = FrontierAdapter.make_reflective_dataset

    def keep(self, candidate, eval_batch, components):
        dataset = build(self, candidate, eval_batch, components)
        datasets.append(next(iter(dataset.values())))
        return dataset

    monkeypatch.setattr(RecorderThread, "on_candidate_accepted", note_at_candidate_one)
    monkeypatch.setattr(FrontierAdapter, "make_reflective_dataset", keep)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    assert saved, "the run never accepted candidate 1"
    proposals = [
        e.payload for e in RunEvent.objects.filter(run=run, type=ev.PROPOSAL).order_by("seq")
    ]
    first = next(n for n, p in enumerate(proposals) if p["candidate"] == 1)
    assert all(p["notes"] == [] for p in proposals[: first + 1])
    later = proposals[first + 1 :]
    assert later, "no proposal after the notes were saved"
    for p in later:
        assert [(n["task_key"], n["id"]) for n in p["notes"]] == [
            (key, saved[key]) for key in p["minibatch"]
        ]
        assert all(n["author"] == "alice" for n in p["notes"])
    noted = [
        record["Reviewer note (from alice)"]
        for dataset in datasets
        for record in dataset
        if "Reviewer note (from alice)" in record
    ]
    assert len(noted) >= sum(len(p["notes"]) for p in later) > 0
