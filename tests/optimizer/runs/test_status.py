"""The one status writer: services pass the locked Run, the runner its claim."""

import pytest

from optimizer.models import Run, RunEvent, RunStatus, run_progress
from optimizer.runs import event_types as ev
from optimizer.runs.claims import ClaimLost, RunClaim
from optimizer.runs.status import run_set_status

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(user):
    return Run.objects.create(owner=user, name="r", status=RunStatus.RUNNING, claim="mine")


def test_a_status_write_updates_the_row_the_instance_and_the_event_log(run):
    run_set_status(run, RunStatus.STOPPING, "stopping after this iteration", stop_requested=True)
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.phase, stored.stop_requested) == (
        RunStatus.STOPPING,
        "stopping after this iteration",
        True,
    )
    assert (run.status, run.stop_requested) == (RunStatus.STOPPING, True)
    event = RunEvent.objects.get(run=run, type=ev.RUN_STATUS)
    assert event.payload == {"status": RunStatus.STOPPING, "phase": "stopping after this iteration"}


def test_a_finished_status_stamps_the_finish_time_and_clears_the_heartbeat(run):
    from django.utils import timezone

    run_progress(run.pk).update(heartbeat_at=timezone.now())
    run_set_status(RunClaim(run.pk, "mine"), RunStatus.FAILED, "failed", error="boom")
    stored = Run.objects.get(pk=run.pk)
    assert stored.finished_at is not None and stored.heartbeat_at is None and stored.error == "boom"
    assert RunEvent.objects.get(run=run, type=ev.RUN_STATUS).payload["error"] == "boom"


def test_a_worker_that_lost_its_claim_writes_neither_the_status_nor_the_event(run):
    with pytest.raises(ClaimLost):
        run_set_status(RunClaim(run.pk, "someone-else"), RunStatus.COMPLETED, "done")
    stored = Run.objects.get(pk=run.pk)
    assert stored.status == RunStatus.RUNNING and stored.finished_at is None
    assert not RunEvent.objects.filter(run=run).exists()
