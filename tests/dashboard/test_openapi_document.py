"""The OpenAPI document is a typed contract: every body is a pydantic model
with its enums, defaults and descriptions, and every error has one shape.
Session writes stay CSRF-protected while token writes are never CSRF-checked."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from dashboard.account_services import api_token_create
from dashboard.api import COMMON_ERRORS, api

pytestmark = pytest.mark.django_db

SPEC = {"id": "csrf-check", "checks": [{"type": "contains", "params": {"value": "refund"}}]}


@pytest.fixture(scope="module")
def document():
    return api.get_openapi_schema(path_prefix="/api/")


def _resolve(document, schema):
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def test_every_request_and_success_body_is_a_named_model(document):
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            body = (
                operation.get("requestBody", {})
                .get("content", {})
                .get("application/json", {})
                .get("schema")
            )
            if body is not None:
                assert "$ref" in body, f"{method.upper()} {path}: untyped request body"
            for status, response in operation["responses"].items():
                schema = response.get("content", {}).get("application/json", {}).get("schema")
                if int(status) < 300 and schema is not None:
                    schema = schema.get("items", schema)
                    assert "$ref" in schema, f"{method.upper()} {path} {status}: untyped response"


def test_every_operation_documents_the_common_errors_with_the_one_error_body(document):
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status in COMMON_ERRORS:
                response = operation["responses"].get(status) or operation["responses"][str(status)]
                assert response["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/ErrorOut"
                }, f"{method.upper()} {path} {status}"
    error = document["components"]["schemas"]["ErrorOut"]
    assert set(error["properties"]) == {"detail", "problems"}


def test_the_run_config_is_typed_with_enums_defaults_and_descriptions(document):
    launch = document["paths"]["/api/runs/"]["post"]["requestBody"]["content"]["application/json"][
        "schema"
    ]
    config = _resolve(document, _resolve(document, launch)["properties"]["config"])
    fields = config["properties"]
    assert config["required"] == ["task_set_id"]
    assert (
        fields["task_lm"]["default"] == "demo" and "simulator" in fields["task_lm"]["description"]
    )
    assert fields["candidate_selection"]["enum"] == [
        "pareto",
        "current_best",
        "epsilon_greedy",
        "top_k_pareto",
    ]
    assert _resolve(document, fields["budget"]["allOf"][0])["properties"]["preset"]["anyOf"][0][
        "enum"
    ] == ["light", "medium", "heavy"]
    assert (
        fields["splits"]["allOf"][0]["$ref"].endswith("/Splits")
        and fields["concurrency"]["maximum"] == 64
    )


def test_verifier_specs_task_rows_runs_candidates_evaluations_and_events_are_typed(document):
    schemas = document["components"]["schemas"]
    spec = schemas["VerifierIn"]["properties"]["spec"]
    assert [kind["title"] for kind in spec["anyOf"]] == [
        "NativeVerifierSpec",
        "InProcessVerifierSpec",
        "ClassVerifierSpec",
    ]
    assert "checks" in spec["anyOf"][0]["required"]
    task = schemas["ScoreIn"]["properties"]["task"]
    assert {"input", "expected", "metadata", "verifier"} <= set(task["properties"])
    assert schemas["RunOut"]["properties"]["status"]["$ref"].endswith("/RunStatus")
    assert set(schemas["RunStatus"]["enum"]) == {
        "queued",
        "running",
        "stopping",
        "stopped",
        "completed",
        "failed",
        "abandoned",
        "paused",
    }
    assert schemas["CandidateOut"]["properties"]["origin"]["$ref"].endswith("/Origin")
    assert {"score", "verdict", "output", "feedback", "tokens_in"} <= set(
        schemas["EvaluationOut"]["properties"]
    )
    assert "run.finished" in schemas["EventOut"]["properties"]["type"]["description"]


def test_a_session_write_without_the_csrf_token_is_refused_and_with_it_accepted(user):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    refused = browser.post(
        "/api/verifiers/lint", json.dumps({"spec": SPEC}), content_type="application/json"
    )
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    browser.get("/runs/new/")  # a page sets the CSRF cookie
    token = browser.cookies["csrftoken"].value
    accepted = browser.post(
        "/api/verifiers/lint",
        json.dumps({"spec": SPEC}),
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert accepted.status_code == 200 and accepted.json()["valid"] is True


def test_a_token_write_is_never_csrf_checked_even_with_a_session_cookie_present(user):
    _, raw = api_token_create(user=user, name="script")
    script = Client(enforce_csrf_checks=True)
    script.force_login(user)  # a stray session cookie must not pull the request onto the CSRF path
    response = script.post(
        "/api/verifiers/",
        json.dumps({"spec": SPEC}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
    )
    assert response.status_code == 201, response.content


def test_a_wrong_token_without_a_session_is_a_401_not_a_csrf_failure():
    response = Client(enforce_csrf_checks=True).post(
        "/api/verifiers/lint",
        json.dumps({"spec": SPEC}),
        content_type="application/json",
        headers={"Authorization": "Bearer ft_wrong"},
    )
    assert response.status_code == 401 and response.json()["problems"] == []
