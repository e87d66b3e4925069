"""Reviewer notes reach a run a `celery worker` process executes (PostgreSQL,
Redis, the demo simulator): a note saved while the run runs is read by its
later reflections, with no restart."""

from django.db import transaction

from optimizer.models import Run, RunEvent, RunStatus
from optimizer.reviewer_notes import reviewer_note_create
from optimizer.services import run_cancel, run_launch
from tests.integration.test_runs_on_workers import assert_event_log_is_whole
from tests.optimizer.run_helpers import REFUND_SPEC, refund_task_set, run_config
from tests.polling import wait_until
from verifiers_app.services import verifier_create

TRAIN_KEYS = ["shoes", "laptop", "jacket", "blender"]  # refund_task_set's default train split
ASK = 'The answer should mention "tracking number".'
# A check no output meets (a regex is no phrase the simulated reflection learns): no
# minibatch is ever perfect, so gepa reflects every iteration (it skips perfect ones).
NEVER = {"id": "never", "type": "regex", "params": {"pattern": "^never$"}}


def proposals(run: Run) -> list[RunEvent]:
    return list(RunEvent.objects.filter(run=run, type="proposal").order_by("seq"))


def test_a_note_saved_while_a_worker_runs_the_run_is_read_by_its_later_reflections(
    celery_worker, user
):
    """Before the notes: no proposal read one, none proposes "tracking number".
    After: proposals on those tasks record the notes they read, and the simulated
    reflection, which only knows what its reflective dataset says, writes the ask in."""
    verifier_create(owner=user, spec={**REFUND_SPEC, "checks": [*REFUND_SPEC["checks"], NEVER]})
    task_set = refund_task_set(user)
    config = run_config(
        task_set,
        budget={"max_metric_calls": 2000},
        task_lm={"provider": "demo", "model": "demo-task", "simulated_latency_ms": 40},
    )
    run = run_launch(owner=user, config=config)
    wait_until(lambda: len(proposals(run)) >= 1, timeout=120, what="the run's first proposal")
    with transaction.atomic():  # all four at once: a reflection reads those saved when it starts
        notes = {
            key: reviewer_note_create(run=run, user=user, task_key=key, text=ASK)
            for key in TRAIN_KEYS
        }
    saved_at = RunEvent.objects.filter(run=run, type="note.saved").order_by("seq").last().seq

    def read_and_acted_on() -> bool:
        return any(
            e.seq > saved_at
            and e.payload["notes"]
            and "tracking number" in " ".join(e.payload["texts"].values())
            for e in proposals(run)
        )

    try:
        wait_until(read_and_acted_on, timeout=180, what="a later proposal that read the notes")
    except AssertionError:
        run.refresh_from_db()
        seen = [
            (
                e.seq,
                e.payload["accepted"],
                e.payload["minibatch"],
                len(e.payload["notes"]),
                e.payload["texts"],
            )
            for e in proposals(run)
        ]
        raise AssertionError(
            f"run {run.status} ({run.stop_reason}), notes at {saved_at}: {seen}"
        ) from None
    run_cancel(run=run)
    wait_until(
        lambda: Run.objects.filter(pk=run.pk, status__in=RunStatus.finished()).exists(),
        timeout=60,
        what="the run to end",
    )
    before = [e for e in proposals(run) if e.seq < saved_at]
    assert before and all(e.payload["notes"] == [] for e in before)
    assert not any("tracking number" in " ".join(e.payload["texts"].values()) for e in before)
    # Proposals whose datasets were built before the notes may be written after them (the
    # recorder writes on its own thread, behind the engine); from the first that read
    # them on, every proposal reads those on its minibatch.
    after = [e for e in proposals(run) if e.seq > saved_at]
    first = next(n for n, e in enumerate(after) if e.payload["notes"])
    for e in after[first:]:
        assert [(n["task_key"], n["id"]) for n in e.payload["notes"]] == [
            (key, notes[key].pk) for key in e.payload["minibatch"]
        ]
    assert_event_log_is_whole(run)
