"""/api/verifiers: CRUD, lint (live validation for the editor) and score (Try it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import Http404
from ninja import Field, Router, Schema, Status

from verifiers_app import selectors, services
from verifiers_app.engine import SpecError, lint_spec, score, spec_warnings, validate_task
from verifiers_app.models import Verifier

router = Router()

MAX_OUTPUT_CHARS = 200_000


class VerifierIn(Schema):
    spec: Any = Field(..., description="The verifier spec (seed 000); its id is the verifier's id")
    shared: bool = False


class VerifierUpdate(Schema):
    spec: Any
    shared: bool | None = None


class VerifierOut(Schema):
    id: str
    name: str
    kind: str
    owner: str
    shared: bool
    version: int
    updated_at: datetime
    last_used_at: datetime | None
    spec: Any

    @staticmethod
    def from_verifier(v: Verifier) -> dict:
        return {"id": v.slug, "name": v.name, "kind": v.kind, "owner": v.owner.get_username(), "shared": v.shared,
                "version": v.version, "updated_at": v.updated_at, "last_used_at": v.last_used_at, "spec": v.spec}


class LintIn(Schema):
    spec: Any


class LintOut(Schema):
    valid: bool
    problems: list[str] = Field(..., description='Each "field.path: message", as SpecError names them')
    warnings: list[str] = Field(..., description='Valid but probably unintended, e.g. an unknown check type '
                                                 '(scoring skips it); "field.path: message"')


class ScoreIn(Schema):
    spec: Any = Field(..., description="A spec, or a list of specs")
    output: str = Field(..., max_length=MAX_OUTPUT_CHARS)
    task: dict[str, Any] | None = Field(None, description="A task row: metadata.expectations, expected, params, verifier")
    aggregator: Any = "weighted_average"
    thresholds: Any = Field(None, description='Verdict thresholds, e.g. {"pass": 0.8, "borderline": 0.6}')


def _get(request, verifiers, slug: str) -> Verifier:
    if "\x00" in slug:  # no id holds one, and PostgreSQL would refuse the query (a 500)
        raise Http404("No verifier has this id")
    verifier = verifiers.select_related("owner").lookup(request.user, slug)
    if verifier is None:
        raise Http404("No verifier has this id")
    return verifier


def _editable(request, slug: str) -> Verifier:
    return _get(request, Verifier.objects.editable_by(request.user), slug)


@router.get("/", response=list[VerifierOut])
def list_verifiers(request, q: str = "", kind: str = ""):
    """Verifiers you can see: yours, shared ones (admins: all)."""
    return [VerifierOut.from_verifier(v) for v in selectors.verifier_list(user=request.user, query=q, kind=kind)]


@router.post("/", response={201: VerifierOut})
def create_verifier(request, body: VerifierIn):
    verifier = services.verifier_create(owner=request.user, spec=body.spec, shared=body.shared)
    return Status(201, VerifierOut.from_verifier(verifier))


@router.post("/lint", response=LintOut)
def lint(request, body: LintIn):
    """Every problem of a spec, without saving it."""
    problems = lint_spec(body.spec)
    return {"valid": not problems, "problems": problems, "warnings": spec_warnings(body.spec)}


@router.post("/score")
def score_output(request, body: ScoreIn):
    """Score one output; the result shape of ARCHITECTURE.md (score, verdict,
    passed, verifiers[].checks[], hits, misses, feedback)."""
    if body.task is not None:
        try:
            validate_task(body.task, require_task_id=False)
        except SpecError as exc:
            raise exc.prefixed("task.") from None
    return score(body.spec, body.output, body.task, aggregator=body.aggregator, thresholds=body.thresholds).as_dict()


@router.get("/{slug}", response=VerifierOut)
def get_verifier(request, slug: str):
    verifier = _get(request, Verifier.objects.visible_to(request.user), slug)
    return VerifierOut.from_verifier(verifier)


@router.put("/{slug}", response=VerifierOut)
def update_verifier(request, slug: str, body: VerifierUpdate):
    verifier = _editable(request, slug)
    services.verifier_update(verifier=verifier, spec=body.spec, user=request.user, shared=body.shared)
    return VerifierOut.from_verifier(verifier)


@router.delete("/{slug}", response={204: None})
def delete_verifier(request, slug: str):
    services.verifier_delete(verifier=_editable(request, slug))
    return Status(204, None)
