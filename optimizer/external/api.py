"""/api/external: where the frontier_tracker client reports a GEPA run that
executes in its owner's own process (optimizer/external/services.py has the rules).

- `POST /api/external/runs` opens (or finds, by the tracker's `key`) a run;
- `POST /api/external/runs/{id}/events` applies one numbered batch of events;
- `GET /api/external/runs/{id}/control` tells the stopper whether Stop was pressed.

Only the token's user writes into their runs; anyone else gets a 404. Every
problem is a JSON {"detail", "problems": [{"field", "message"}]}.
"""

from __future__ import annotations

from django.http import Http404, HttpResponse
from ninja import Router, Schema, Status

from dashboard.lib.api_errors import ErrorOut, error_body
from dashboard.lib.authenticated import AuthenticatedHttpRequest
from optimizer.api import RunOut
from optimizer.external import services as external
from optimizer.external.services import EventBatch, ExternalRunOpen
from optimizer.models import Run
from optimizer.runs.summary import RUN_JOINS
from verifiers_app.engine.json_types import JSONObject

router = Router()


class BatchOut(Schema):
    applied: bool
    duplicate: bool
    last_batch: int
    stop: bool


class ControlOut(Schema):
    stop: bool
    status: str


class OpenOut(RunOut):
    last_batch: int


def _problems(error: external.ExternalRunError) -> JSONObject:
    return error_body(str(error), error.problems)


def _run(request: AuthenticatedHttpRequest, run_id: int) -> Run:
    run = external.external_run_for(owner=request.user, run_id=run_id)
    if run is None:
        raise Http404("No such external run of yours")
    return run


@router.post("/runs", response={200: OpenOut, 201: OpenOut, 400: ErrorOut})
def open_run(request: AuthenticatedHttpRequest, body: ExternalRunOpen) -> Status[JSONObject]:
    """Open an external run: `key` (the tracker's id of it), name, host, gepa_version, budget_total, task_set_id."""
    try:
        run, created = external.external_run_open(owner=request.user, data=body)
    except external.ExternalRunError as error:
        return Status(400, _problems(error))
    run = Run.objects.select_related(*RUN_JOINS).get(pk=run.pk)
    return Status(201 if created else 200, {**RunOut.of(run), "last_batch": run.external_batch})


@router.post(
    "/runs/{run_id}/events",
    response={200: BatchOut, 400: ErrorOut, 409: ErrorOut, 429: ErrorOut},
)
def post_events(
    request: AuthenticatedHttpRequest, run_id: int, body: EventBatch, response: HttpResponse
) -> Status[JSONObject]:
    """Apply batch `seq` (1, 2, …) of events; a batch already applied is acknowledged and ignored.
    429 (with Retry-After) when the user's events per minute are used up."""
    run = _run(request, run_id)
    try:
        external.count_against_rate(request.user.pk, len(body.events))
        return Status(200, external.external_events_apply(run=run, data=body))
    except external.RateLimited as error:
        response["Retry-After"] = str(error.retry_after)
        return Status(429, _problems(error))
    except external.ExternalRunError as error:
        return Status(409 if error.conflict else 400, _problems(error))


@router.get("/runs/{run_id}/control", response=ControlOut)
def control(request: AuthenticatedHttpRequest, run_id: int) -> JSONObject:
    """Whether the owner pressed Stop (the tracker's stopper polls this; it is also its heartbeat)."""
    return external.external_run_control(run=_run(request, run_id))
