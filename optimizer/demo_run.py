"""The demo run `make demo` starts (via `manage.py demo_setup`): the offline
simulator optimizing the refund-tickets example, slowed per call (about as slow
as a small hosted model) so that the run lasts a few minutes and a newcomer
watches its charts move. Idempotent: one demo run per example set."""

from __future__ import annotations

from django.conf import settings

from optimizer.models import Run, RunStatus
from optimizer.runs.queued import server_is_alive
from optimizer.services import run_launch
from optimizer.tasksets.models import TaskSet

DEMO_TASK_SET = "Refund tickets"
DEMO_VERIFIER = "refund-policy-quality"
DEMO_RUN_NAME = "Demo: refund replies (simulator)"


def demo_config(task_set: TaskSet) -> dict:
    return {
        "name": DEMO_RUN_NAME,
        "task_set_id": task_set.pk,
        "splits": {"train": "train", "val": "val", "holdout": "holdout"},
        "verifier_ids": [DEMO_VERIFIER],
        "seed_components": {
            "instructions": "You are a customer support agent for an electronics shop. Reply to the customer."
        },
        "task_lm": {"provider": "demo", "model": "demo-task", "simulated_latency_ms": 1200},
        "reflection_lm": {
            "provider": "demo",
            "model": "demo-reflection",
            "simulated_latency_ms": 2500,
        },
        "budget": {"preset": "heavy"},
        "minibatch_size": 3,
        "concurrency": 4,
    }


def launch_demo_run(*, user, launch_run: bool = True, stdout=None) -> Run | None:
    """Launch the demo run unless one already ran (or runs) on the example set."""
    if not launch_run:
        return None
    task_set = TaskSet.objects.filter(name=DEMO_TASK_SET, owner=user).first()
    if task_set is None:
        if stdout is not None:
            stdout.write(f"No demo run: the example task set {DEMO_TASK_SET!r} is not loaded")
        return None
    existing = (
        Run.objects.filter(task_set=task_set, name=DEMO_RUN_NAME)
        .exclude(status=RunStatus.FAILED)
        .first()
    )
    if existing is not None:
        if stdout is not None:
            stdout.write(f"The demo run (run {existing.pk}) {_what_happens(existing)}.")
        return existing
    run = run_launch(owner=user, config=demo_config(task_set))
    if stdout is not None:
        stdout.write(
            f"Launched the demo run (run {run.pk}, the offline simulator): it {_what_happens(run)}."
        )
    return run


def _what_happens(run: Run) -> str:
    """What becomes of the demo run, in the words of someone who just typed
    `make demo`. In embedded mode with no server up (`make demo` runs this just
    before `serve`), a running run is one the last server left when it was
    stopped: the next one resumes it."""
    if run.status in RunStatus.finished():
        return f"is {run.status}"
    if settings.EMBEDDED and not server_is_alive():
        return (
            "starts when the server starts"
            if run.status == RunStatus.QUEUED
            else "resumes when the server starts"
        )
    if run.status != RunStatus.QUEUED:
        return f"is {run.status}"
    return "starts now, on the running server" if settings.EMBEDDED else "waits for a worker"
