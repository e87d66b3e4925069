"""What a worker writes all the time (the heartbeat every few seconds, the
budget after every evaluation, the event counter with every batch) goes to the
run's narrow progress row, never to the wide run row, and still only while the
worker holds the run."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from optimizer.models import Run, RunEvent, run_progress
from optimizer.runs import event_types as ev
from optimizer.runs.claims import ClaimLost
from optimizer.runs.recorder import RunRecorder
from optimizer.runs.runner import Heartbeat, claim
from optimizer.services import run_launch
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config

pytestmark = pytest.mark.django_db(transaction=True)


def run_row_updates(queries) -> list[str]:
    return [q["sql"] for q in queries if q["sql"].startswith('UPDATE "optimizer_run" ')]


@pytest.fixture
def held(user):
    """A launched run, claimed by this process as a worker claims it, and its recorder."""
    refund_verifier(user)
    run = run_launch(owner=user, config=run_config(refund_task_set(user)))
    run, run_claim = claim(run.pk)
    recorder = RunRecorder(
        run=run,
        adapter=None,
        valset=[],
        task_pks={},
        budget_total=run.budget_total,
        claim=run_claim,
    )
    return run, run_claim, recorder


def budget_update(recorder: RunRecorder, used: int) -> None:
    recorder.on_budget_updated(
        {
            "metric_calls_used": used,
            "frontier_usage": recorder.meter.snapshot(),
            "frontier_eta": 3.0,
        }
    )


def test_heartbeats_budget_updates_and_event_batches_never_rewrite_the_run_row(held):
    run, run_claim, recorder = held
    beat_before = run_progress(run.pk).get().heartbeat_at
    with CaptureQueriesContext(connection) as queries:
        for used in (3, 6, 9):
            Heartbeat(run_claim).beat()
            budget_update(recorder, used)
            recorder._publish()  # the batch the budget event rides with
    assert run_row_updates(queries) == []
    progress = run_progress(run.pk).get()
    assert progress.budget_used == 9 and progress.heartbeat_at > beat_before
    budgets = RunEvent.objects.filter(run=run, type=ev.RUN_BUDGET).order_by("seq")
    assert [e.payload["used"] for e in budgets] == [3, 6, 9]
    assert progress.last_seq == RunEvent.objects.filter(run=run).count()
    # The pages and the API read the same figures, from the progress row.
    shown = Run.objects.select_related("progress").get(pk=run.pk)
    assert (shown.budget_used, shown.last_seq, shown.heartbeat_at) == (
        9,
        progress.last_seq,
        progress.heartbeat_at,
    )


def test_a_worker_that_lost_its_run_writes_no_heartbeat_budget_or_event(held):
    run, run_claim, recorder = held
    budget_update(recorder, 4)
    recorder._publish()
    before = run_progress(run.pk).values("heartbeat_at", "budget_used", "last_seq").get()
    Run.objects.filter(pk=run.pk).update(
        claim="another-worker"
    )  # the watchdog gave the run to another worker

    with pytest.raises(ClaimLost):
        Heartbeat(run_claim).beat()
    budget_update(recorder, 8)  # a gepa callback: it stops quietly
    assert run_claim.lost.is_set()
    assert run_progress(run.pk).values("heartbeat_at", "budget_used", "last_seq").get() == before


def test_an_event_batch_takes_its_seqs_and_writes_the_budget_in_one_statement(held):
    """The writer commits a batch of events every ~100 ms with a fast model: its
    seqs and the progress row's budget come from one UPDATE ... RETURNING, not an
    UPDATE and a SELECT, and still only while this worker holds the run."""
    run, run_claim, recorder = held
    seq = run_progress(run.pk).values_list("last_seq", flat=True).get()
    recorder.deferring = True
    budget_update(recorder, 5)
    recorder.unpublished.append((ev.ERROR, {"where": "runner", "message": "m", "iteration": 1}))
    with CaptureQueriesContext(connection) as queries:
        recorder.publish_waiting({})
    progress_statements = [q["sql"] for q in queries if "optimizer_runprogress" in q["sql"]]
    assert len(progress_statements) == 1
    assert "RETURNING" in progress_statements[0]
    progress = run_progress(run.pk).get()
    assert (progress.budget_used, progress.last_seq) == (5, seq + 2)
    written = RunEvent.objects.filter(run=run, seq__gt=seq).order_by("seq")
    assert list(written.values_list("seq", "type")) == [
        (seq + 1, ev.RUN_BUDGET),
        (seq + 2, ev.ERROR),
    ]
    assert progress.usage == recorder.meter.totals() and progress.cost == 0.0
    Run.objects.filter(pk=run.pk).update(claim="another-worker")
    with pytest.raises(ClaimLost):
        run_claim.take_seqs(1, budget_used=6)
    assert run_progress(run.pk).values_list("budget_used", "last_seq").get() == (5, seq + 2)


def test_a_batch_turns_only_its_last_budget_reading_into_the_progress_row_and_an_event(
    held, monkeypatch
):
    """gepa reports the budget after every evaluation; a batch the writer
    commits writes only the last reading, so only that one is turned into the
    row's fields and its run.budget event, in the place the last one took."""
    run, _, recorder = held
    seq = run_progress(run.pk).values_list("last_seq", flat=True).get()
    made = []
    progress = RunRecorder._progress

    def noting(self, *args, **kwargs):
        made.append(args)
        return progress(self, *args, **kwargs)

    monkeypatch.setattr(RunRecorder, "_progress", noting)
    recorder.deferring = True
    error = (ev.ERROR, {"where": "runner", "message": "m", "iteration": 1})
    for used in (2, 4):
        budget_update(recorder, used)
    recorder.unpublished.append(error)
    budget_update(recorder, 6)
    recorder.unpublished.append(error)
    recorder.publish_waiting({})
    assert len(made) == 1
    written = RunEvent.objects.filter(run=run, seq__gt=seq).order_by("seq")
    assert [(e.type, e.payload.get("used")) for e in written] == [
        (ev.ERROR, None),
        (ev.RUN_BUDGET, 6),
        (ev.ERROR, None),
    ]
    assert run_progress(run.pk).values_list("budget_used", flat=True).get() == 6
