"""The one writer of a run's status: the row's status, phase and companion fields
and the `run.status` event, in one transaction.

Two callers hold the run differently. The services (stop, cancel, pause, resume) hold
the row lock (SELECT ... FOR UPDATE) and pass the Run. The runner passes its
RunClaim: the UPDATE is then conditional on this worker still holding the run
(optimizer/runs/claims.py), and a worker that lost it raises ClaimLost and writes
nothing, neither the row nor the event.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from optimizer.models import PROGRESS_FIELDS, Run, RunStatus, run_progress
from optimizer.runs import event_types as ev
from optimizer.runs.claims import RunClaim
from optimizer.runs.events import publish_run_event, publish_run_events
from optimizer.runs.injections import refuse_pending


def run_set_status(
    holder: Run | RunClaim, status: str, phase: str, *, error: str | None = None, **fields: Any
) -> None:
    """Write `status`, `phase` and `fields`, and publish `run.status` (with the
    error when there is one). `error=None` leaves the error text alone. A
    finished status also stamps `finished_at` (unless given) and clears the
    heartbeat, and refuses the run's pending injections in the same transaction
    (optimizer/runs/injections.py: one submitted before this commit is refused
    here, one after it finds the run ended). A Run instance passed in is updated
    in memory too."""
    fields = {"status": status, "phase": phase, **fields}
    payload = {"status": status, "phase": phase}
    if error is not None:
        fields["error"] = error
        if error:
            payload["error"] = error
    if status in RunStatus.finished():
        fields.setdefault("finished_at", timezone.now())
        fields.setdefault("heartbeat_at", None)
    finished = status in RunStatus.finished()
    with transaction.atomic():
        if isinstance(holder, RunClaim):
            holder.update(**fields)
            refused = refuse_pending(holder.run_id) if finished else []
            publish_run_events(holder.run_id, [(ev.RUN_STATUS, payload), *refused], claim=holder)
        else:
            progress = {name: fields.pop(name) for name in list(fields) if name in PROGRESS_FIELDS}
            Run.objects.filter(pk=holder.pk).update(**fields)
            if progress:
                run_progress(holder.pk).update(**progress)
            for name, value in fields.items():
                setattr(holder, name, value)
            if Run.progress.is_cached(holder):
                for name, value in progress.items():
                    setattr(holder.progress, name, value)
            refused = refuse_pending(holder.pk) if finished else []
            publish_run_events(holder.pk, [(ev.RUN_STATUS, payload), *refused])


def pause_phase(by: str) -> str:
    """A paused run's phase: who paused it (no one named: the command line)."""
    return f"paused by {by}" if by else "paused"


def run_set_paused(holder: Run | RunClaim, *, iteration: int | None) -> None:
    """Pause the run: publish `run.paused`, then `run.status` paused, clear the
    pause request and the heartbeat and release the run (no claim), in one
    transaction. The caller holds the run: the row lock (a Run) or its claim
    (the runner, whose writes raise ClaimLost if another worker took the run).
    Nothing is finished: the run keeps its checkpoint, a resume continues it."""
    run_id = holder.pk if isinstance(holder, Run) else holder.run_id
    with transaction.atomic():
        if isinstance(holder, RunClaim):
            holder.hold()
        by, used = (
            Run.objects.filter(pk=run_id)
            .values_list("paused_by__username", "progress__budget_used")
            .get()
        )
        by = by or ""
        claim = holder if isinstance(holder, RunClaim) else None
        publish_run_event(
            run_id,
            ev.RUN_PAUSED,
            {"by": by, "iteration": iteration, "metric_calls": used},
            claim=claim,
        )
        run_set_status(
            holder, RunStatus.PAUSED, pause_phase(by), pause_requested=False, heartbeat_at=None
        )
        if claim is not None:
            claim.update(claim="")  # the last write of this worker: the run is nobody's now
        else:
            Run.objects.filter(pk=run_id).update(claim="")
