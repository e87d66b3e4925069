"""The run's progress row on PostgreSQL: a worker's heartbeats, budget updates
and event batches leave the wide run row's version as it was (no new row
version: the runs table does not grow with them), and a takeover still waits
for a progress write in flight, after which the old worker writes nothing."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction
from django.utils import timezone

from optimizer.models import Run, run_progress
from optimizer.runs import event_types as ev
from optimizer.runs.claims import ClaimLost
from optimizer.runs.events import publish_run_event
from optimizer.runs.recorder import RunRecorder
from optimizer.runs.runner import Heartbeat, claim
from optimizer.services import run_launch
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("runs_dir")]


@pytest.fixture
def held(user):
    refund_verifier(user)
    run = run_launch(owner=user, config=run_config(refund_task_set(user)))
    return claim(run.pk)


def row_version(run_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text FROM optimizer_run WHERE id = %s", [run_id])
        return cursor.fetchone()[0]


def test_heartbeats_budget_updates_and_event_batches_leave_the_run_row_version_as_it_was(held):
    run, run_claim = held
    recorder = RunRecorder(
        run=run,
        adapter=None,
        valset=[],
        task_pks={},
        budget_total=run.budget_total,
        claim=run_claim,
    )
    version = row_version(run.pk)
    for used in range(1, 11):
        Heartbeat(run_claim).beat()
        recorder.on_budget_updated(
            {
                "metric_calls_used": used,
                "frontier_usage": recorder.meter.snapshot(),
                "frontier_eta": 1.0,
            }
        )
        recorder._publish()
    assert row_version(run.pk) == version
    assert run_progress(run.pk).get().budget_used == 10


def test_a_takeover_waits_for_a_progress_write_in_flight_and_the_old_worker_then_writes_nothing(
    held,
):
    run, run_claim = held
    written, release, took_over = threading.Event(), threading.Event(), threading.Event()

    def old_worker():
        try:
            with transaction.atomic():
                run_claim.update(
                    heartbeat_at=timezone.now()
                )  # locks the run row until this commits
                written.set()
                release.wait(10)
        finally:
            connection.close()

    def watchdog_takeover():
        try:
            with transaction.atomic():
                Run.objects.select_for_update().filter(pk=run.pk).update(claim="another-worker")
            took_over.set()
        finally:
            connection.close()

    first = threading.Thread(target=old_worker)
    first.start()
    assert written.wait(10)
    second = threading.Thread(target=watchdog_takeover)
    second.start()
    time.sleep(0.5)
    assert not took_over.is_set()  # the takeover waits for the write in flight
    release.set()
    first.join()
    second.join()
    assert took_over.is_set()

    before = run_progress(run.pk).values("heartbeat_at", "last_seq").get()
    with pytest.raises(ClaimLost):
        Heartbeat(run_claim).beat()
    with pytest.raises(ClaimLost):
        publish_run_event(
            run.pk, ev.RUN_STATUS, {"status": "running", "phase": "late"}, claim=run_claim
        )
    assert run_progress(run.pk).values("heartbeat_at", "last_seq").get() == before
