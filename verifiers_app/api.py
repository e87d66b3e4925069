"""/api/verifiers: CRUD, lint (live validation for the editor) and score (Try it)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Field, Router, Schema, Status
from pydantic import WithJsonSchema

from dashboard.lib.api_errors import ErrorOut
from verifiers_app import selectors, services
from verifiers_app.engine import (
    AGGREGATORS,
    SpecError,
    inline_json_schema,
    lint_spec,
    row_verifier_json_schema,
    score,
    spec_json_schema,
    spec_warnings,
    validate_task,
)
from verifiers_app.models import Verifier

router = Router()

MAX_OUTPUT_CHARS = 200_000

# Documented with the spec's JSON Schema; validated by the engine (validate_spec),
# whose errors name every field, so the API and the CLI refuse the same specs.
SpecJSON = Annotated[Any, WithJsonSchema(spec_json_schema())]


class Expectation(Schema):
    text: str | None = None
    anyOf: list[str] | None = None
    message: str | None = None


class Expectations(Schema):
    mustMention: list[Expectation | str] = []
    mustNotMention: list[Expectation | str] = []


class TaskMetadata(Schema):
    expectations: Expectations | None = None


class TaskIn(Schema):
    """A task row as the verifiers read it (docs/verifier-semantics.md "Row verifiers"); other metadata is kept."""

    input: str | None = None
    expected: Any = None
    params: dict[str, Any] = {}
    metadata: TaskMetadata | dict[str, Any] = {}
    verifier: Annotated[dict[str, Any] | None, WithJsonSchema(row_verifier_json_schema())] = None


class TestCase(Schema):
    """A sample output saved with the verifier, and what it expects of each judgment
    (docs/verifier-semantics.md "Passed and verdict")."""

    name: str = Field("", max_length=200)
    output: str = Field(..., max_length=services.MAX_TEST_OUTPUT_CHARS)
    task: dict[str, Any] | None = Field(None, description="A task row, or null")
    expect: services.ExpectedVerdict = Field(
        ..., description="The verdict expected under the run thresholds the editor shows, or any"
    )
    expect_passed: services.ExpectedPassed = Field(
        "any", description="What the verifiers' passed (their passThreshold) should be, or any"
    )


# Documented as TestCase; validated by services.validate_test_cases, whose errors
# name the field (`test_cases[1].expect_passed`) as the editor's page shows them.
TestCasesJSON = Annotated[
    list[Any] | None,
    WithJsonSchema(
        {"anyOf": [{"type": "array", "items": inline_json_schema(TestCase)}, {"type": "null"}]}
    ),
]


class VerifierIn(Schema):
    spec: SpecJSON = Field(
        ...,
        description="The verifier spec (docs/verifier-semantics.md); its id is the verifier's id",
    )
    shared: bool = False
    test_cases: TestCasesJSON = Field(
        None, description=f"At most {services.MAX_TEST_CASES} test cases (the editor's)"
    )


class VerifierUpdate(Schema):
    spec: SpecJSON
    shared: bool | None = None
    test_cases: TestCasesJSON = Field(None, description="Replaces the test cases; null keeps them")


class VerifierOut(Schema):
    id: str
    name: str
    kind: str
    owner: str
    shared: bool
    version: int
    updated_at: datetime
    last_used_at: datetime | None
    spec: SpecJSON
    warnings: list[str] = Field(
        ...,
        description="Valid but probably unintended, as lint says them: an unknown check "
        'type (scoring skips it), "field.path: message (did you mean …?)"',
    )

    @staticmethod
    def from_verifier(v: Verifier) -> dict:
        return {
            "id": v.slug,
            "name": v.name,
            "kind": v.kind,
            "owner": v.owner.get_username(),
            "shared": v.shared,
            "version": v.version,
            "updated_at": v.updated_at,
            "last_used_at": v.last_used_at,
            "spec": v.spec,
            "warnings": spec_warnings(v.spec),
        }


class VerifierDetailOut(VerifierOut):
    test_cases: list[TestCase] = Field(
        ..., description="Sample outputs saved with it, and what each expects"
    )

    @staticmethod
    def from_verifier(v: Verifier) -> dict:
        cases = [{"expect_passed": "any", **case} for case in v.test_cases or []]
        return {**VerifierOut.from_verifier(v), "test_cases": cases}


class LintIn(Schema):
    spec: Any = Field(
        ..., description="A verifier spec to check (anything: lint says what is wrong with it)"
    )


class LintOut(Schema):
    valid: bool
    problems: list[str] = Field(
        ..., description='Each "field.path: message", as SpecError names them'
    )
    warnings: list[str] = Field(
        ...,
        description="Valid but probably unintended, e.g. an unknown check type "
        '(scoring skips it); "field.path: message"',
    )


class ScoreIn(Schema):
    spec: SpecJSON | list[SpecJSON] = Field(..., description="A spec, or a list of specs")
    output: str = Field(..., max_length=MAX_OUTPUT_CHARS)
    task: Annotated[dict[str, Any] | None, WithJsonSchema(inline_json_schema(TaskIn))] = Field(
        None, description="A task row: metadata.expectations, expected, params, verifier"
    )
    aggregator: str | dict[str, Any] = Field(
        "weighted_average",
        description="One of " + ", ".join(AGGREGATORS) + ', or {"name": …, "params": …}',
    )
    thresholds: dict[str, Any] | None = Field(
        None, description='Verdict thresholds, e.g. {"pass": 0.8, "borderline": 0.6}'
    )


class ScoreOut(Schema):
    """The result shape (docs/verifier-semantics.md "The rules")."""

    score: float
    verdict: str
    passed: bool
    verifiers: list[dict[str, Any]] = Field(description="Per verifier: id, score, passed, checks[]")
    hits: list[str]
    misses: list[str]
    feedback: str


@router.get("/", response=list[VerifierOut])
def list_verifiers(request, q: str = "", kind: str = ""):
    """Verifiers you can see: yours, shared ones (admins: all)."""
    return [
        VerifierOut.from_verifier(v)
        for v in selectors.verifier_list(user=request.user, query=q, kind=kind)
    ]


@router.post("/", response={201: VerifierDetailOut})
def create_verifier(request, body: VerifierIn):
    verifier = services.verifier_create(
        owner=request.user, spec=body.spec, shared=body.shared, test_cases=body.test_cases
    )
    return Status(201, VerifierDetailOut.from_verifier(verifier))


@router.post("/lint", response=LintOut)
def lint(request, body: LintIn):
    """Every problem of a spec, without saving it."""
    problems = lint_spec(body.spec)
    return {"valid": not problems, "problems": problems, "warnings": spec_warnings(body.spec)}


@router.post("/score", response=ScoreOut)
def score_output(request, body: ScoreIn):
    """Score one output; the result shape of docs/verifier-semantics.md (score, verdict,
    passed, verifiers[].checks[], hits, misses, feedback)."""
    if body.task is not None:
        try:
            validate_task(body.task, require_task_id=False)
        except SpecError as exc:
            raise exc.prefixed("task.") from None
    return score(
        body.spec, body.output, body.task, aggregator=body.aggregator, thresholds=body.thresholds
    ).as_dict()


@router.get("/{slug}", response=VerifierDetailOut)
def get_verifier(request, slug: str):
    verifier = selectors.verifier_for_user(request.user, slug)
    return VerifierDetailOut.from_verifier(verifier)


@router.put("/{slug}", response=VerifierDetailOut)
def update_verifier(request, slug: str, body: VerifierUpdate):
    verifier = selectors.verifier_for_user(request.user, slug, edit=True)
    services.verifier_update(
        verifier=verifier,
        spec=body.spec,
        user=request.user,
        shared=body.shared,
        test_cases=body.test_cases,
    )
    return VerifierDetailOut.from_verifier(verifier)


@router.delete("/{slug}", response={204: None, 409: ErrorOut})
def delete_verifier(request, slug: str):
    services.verifier_delete(verifier=selectors.verifier_for_user(request.user, slug, edit=True))
    return Status(204, None)
