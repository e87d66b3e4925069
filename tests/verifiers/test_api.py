import json

import pytest

from dashboard.models import ApiToken
from optimizer.models import Run, RunStatus
from verifiers_app.models import Verifier
from verifiers_app.services import verifier_create

pytestmark = pytest.mark.django_db

SPEC = {
    "id": "tone",
    "name": "Tone",
    "passThreshold": 0.5,
    "checks": [
        {"id": "polite", "type": "contains", "weight": 3, "params": {"value": "please"}},
        {"id": "short", "type": "max_length", "params": {"value": 20}},
    ],
}


def post(client, url, body, **headers):
    return client.post(url, json.dumps(body), content_type="application/json", **headers)


def test_it_creates_reads_updates_and_deletes_a_verifier(user_client):
    assert post(user_client, "/api/verifiers/", {"spec": SPEC}).status_code == 201
    assert user_client.get("/api/verifiers/tone").json()["spec"]["checks"][0]["id"] == "polite"
    response = user_client.put(
        "/api/verifiers/tone",
        json.dumps({"spec": {**SPEC, "name": "Tone v2"}}),
        content_type="application/json",
    )
    assert response.json()["version"] == 2
    assert [v["id"] for v in user_client.get("/api/verifiers/").json()] == ["tone"]
    assert user_client.delete("/api/verifiers/tone").status_code == 204
    assert not Verifier.objects.exists()


def test_an_invalid_spec_is_a_400_naming_the_field_never_a_500(user_client):
    bad = {"id": "r", "checks": [{"type": "regex", "params": {"pattern": "(unclosed"}}]}
    response = post(user_client, "/api/verifiers/", {"spec": bad})
    assert response.status_code == 400
    assert response.json()["detail"].startswith(
        "checks[0].params.pattern: invalid regular expression"
    )


def test_lint_lists_every_problem_without_saving(user_client):
    bad = {"id": "r", "passThreshold": 2, "checks": [{"type": "json_keys", "params": {}}]}
    body = post(user_client, "/api/verifiers/lint", {"spec": bad}).json()
    assert body["valid"] is False
    assert any(p.startswith("passThreshold:") for p in body["problems"])
    assert any(p.startswith("checks[0].params.requiredKeys:") for p in body["problems"])
    assert post(user_client, "/api/verifiers/lint", {"spec": SPEC}).json() == {
        "valid": True,
        "problems": [],
        "warnings": [],
    }
    assert not Verifier.objects.exists()


def test_lint_warns_about_an_unknown_check_type_but_calls_the_spec_valid(user_client):
    spec = {"id": "typo", "checks": [{"type": "json_valdi"}]}
    body = post(user_client, "/api/verifiers/lint", {"spec": spec}).json()
    assert body["valid"] is True and body["problems"] == []
    assert body["warnings"] == [
        'checks[0].type: unknown check type "json_valdi" (did you mean "json_valid"? '
        "scoring skips this check)"
    ]


def test_score_returns_the_breakdown_and_feedback(user_client):
    result = post(
        user_client,
        "/api/verifiers/score",
        {"spec": SPEC, "output": "Do it now, this is a long reply"},
    ).json()
    checks = {c["id"]: c for c in result["verifiers"][0]["checks"]}
    assert result["score"] == 0.0 and result["passed"] is False
    assert (
        checks["polite"]["weight"] == 3
        and 'does not contain "please"' in checks["polite"]["reason"]
    )
    assert "too long" in checks["short"]["reason"]
    assert "tone/polite" in result["feedback"]


def test_score_reads_the_task_expectations(user_client):
    spec = {"id": "refund", "checks": [{"type": "task_expectations"}]}
    task = {
        "metadata": {
            "expectations": {
                "mustMention": [{"anyOf": ["refund"], "message": "offer a refund"}],
                "mustNotMention": [{"text": "gift card", "message": "no gift cards"}],
            }
        }
    }
    result = post(
        user_client,
        "/api/verifiers/score",
        {"spec": spec, "output": "Here is a gift card", "task": task},
    ).json()
    assert result["score"] == 0.0
    assert "offer a refund" in result["feedback"] and "no gift cards" in result["feedback"]


def test_score_behind_the_editors_try_it_accepts_plain_phrase_expectations(user_client):
    spec = {"id": "refund", "checks": [{"type": "task_expectations"}]}
    task = {"metadata": {"expectations": {"mustMention": ["refund"]}}}
    result = post(
        user_client, "/api/verifiers/score", {"spec": spec, "output": "Sorry.", "task": task}
    ).json()
    assert (
        result["feedback"]
        == 'refund/task_expectations: output is missing an expected phrase (expected: "refund")'
    )


def test_a_bad_task_in_score_is_a_400_naming_the_task_field(user_client):
    task = {"metadata": {"expectations": {"mustMention": "refund"}}}
    response = post(
        user_client, "/api/verifiers/score", {"spec": SPEC, "output": "x", "task": task}
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith("task.metadata.expectations.mustMention")


def test_other_users_cannot_see_or_change_a_private_verifier(user, other_client):
    verifier_create(owner=user, spec=SPEC)
    assert other_client.get("/api/verifiers/tone").status_code == 404
    assert other_client.delete("/api/verifiers/tone").status_code == 404
    assert other_client.get("/api/verifiers/").json() == []


def test_delete_of_a_verifier_in_an_active_run_is_a_409(user, user_client):
    verifier = verifier_create(owner=user, spec=SPEC)
    Run.objects.create(owner=user, status=RunStatus.QUEUED).verifiers.add(verifier)
    response = user_client.delete("/api/verifiers/tone")
    assert response.status_code == 409 and "stop the run first" in response.json()["detail"]


def test_scripts_authenticate_with_a_bearer_token_and_anonymous_calls_get_401(client, user):
    token = ApiToken.generate()
    ApiToken.objects.create(user=user, name="ci", prefix=token[:8], digest=ApiToken.hash(token))
    assert client.get("/api/verifiers/").status_code == 401
    response = post(client, "/api/verifiers/", {"spec": SPEC}, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 201
    assert Verifier.objects.get().owner == user


def test_the_openapi_document_lists_the_verifier_and_taskset_routes(user_client):
    paths = user_client.get("/api/openapi.json").json()["paths"]
    assert {
        "/api/verifiers/lint",
        "/api/verifiers/score",
        "/api/tasksets/import",
        "/api/tasksets/{taskset_id}",
    } <= set(paths)


def test_a_body_over_the_upload_limit_is_a_413_json_error(user_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = post(user_client, "/api/verifiers/lint", {"spec": {"id": "x" * 2000}})
    assert response.status_code == 413
    assert response.json() == {
        "detail": "body: larger than 1000 bytes",
        "problems": [{"field": "body", "message": "larger than 1000 bytes"}],
    }


def test_values_the_database_cannot_store_are_a_400_naming_the_field(user_client):
    nul = {"id": "nul", "checks": [{"type": "contains", "params": {"value": "a\u0000b"}}]}
    response = post(user_client, "/api/verifiers/", {"spec": nul})
    assert response.status_code == 400
    assert (
        response.json()["detail"]
        == "checks[0].params.value: contains a NUL character (U+0000), which cannot be stored"
    )
    nan = '{"spec": {"id": "nan", "kind": "in_process", "fn_name": "exact_match", "expected": NaN}}'
    response = user_client.post("/api/verifiers/", nan, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"] == "expected: nan is not a JSON number; use a finite number"
    assert not Verifier.objects.exists()


GOOD = {"id": "t", "checks": [{"type": "contains", "params": {"value": "x"}}]}
HOSTILE_BODIES = [
    ("/api/verifiers/", "[]"),
    ("/api/verifiers/", "not json"),
    ("/api/verifiers/", '{"spec": ' + "[" * 50_000 + "]" * 50_000 + "}"),
    ("/api/verifiers/", json.dumps({"spec": {"id": "a", "checks": [{"type": ["x"]}]}})),
    ("/api/verifiers/", json.dumps({"spec": {"id": "a", "kind": ["x"]}})),
    (
        "/api/verifiers/",
        json.dumps(
            {
                "spec": {
                    "id": "a",
                    "checks": [{"type": "regex", "params": {"pattern": "a{99999999999}"}}],
                }
            }
        ),
    ),
    (
        "/api/verifiers/",
        '{"spec": {"id": "a", "weight": 1e999, "checks": [{"type": "json_valid"}]}}',
    ),
    ("/api/verifiers/score", json.dumps({"spec": GOOD, "output": None})),
    ("/api/verifiers/score", json.dumps({"spec": GOOD, "output": "x", "aggregator": [1]})),
    (
        "/api/verifiers/score",
        json.dumps({"spec": GOOD, "output": "x", "thresholds": {"pass": "high"}}),
    ),
    (
        "/api/verifiers/score",
        json.dumps(
            {
                "spec": GOOD,
                "output": "x",
                "task": {"metadata": {"expectations": {"mustMention": "x"}}},
            }
        ),
    ),
    (
        "/api/tasksets/import",
        json.dumps({"name": "n", "filename": "a.jsonl", "content": "[" * 50_000 + "]" * 50_000}),
    ),
    (
        "/api/tasksets/import",
        json.dumps(
            {
                "name": "n",
                "filename": "a.yaml",
                "content": "- {task_id: a, input: x, expected: 2020-01-01}",
            }
        ),
    ),
    (
        "/api/tasksets/import",
        json.dumps(
            {
                "name": "n",
                "filename": "a.yaml",
                "content": "- {task_id: a, input: x, expected: !!binary aGk=}",
            }
        ),
    ),
    (
        "/api/tasksets/import",
        json.dumps(
            {
                "name": "n",
                "filename": "a.jsonl",
                "content": '{"task_id": "a", "input": "x", "expected": NaN}',
            }
        ),
    ),
    (
        "/api/tasksets/import",
        json.dumps(
            {"name": "n", "filename": "a.jsonl", "content": '{"task_id": "a\\u0000", "input": "x"}'}
        ),
    ),
    (
        "/api/tasksets/import",
        json.dumps({"name": "n", "filename": "a.csv", "content": "a,b\n" + "x" * 200_000 + ",2\n"}),
    ),
]


@pytest.mark.parametrize(
    ("url", "body"), HOSTILE_BODIES, ids=[f"{u} {b[:40]}" for u, b in HOSTILE_BODIES]
)
def test_hostile_request_bodies_get_a_4xx_json_error_and_save_nothing(user_client, url, body):
    from optimizer.tasksets.models import TaskSet

    response = user_client.post(url, body, content_type="application/json")
    assert 400 <= response.status_code < 500
    assert response.json()["detail"]
    assert not Verifier.objects.exists() and not TaskSet.objects.exists()


def test_a_verifier_id_with_a_nul_character_is_a_json_404(user, user_client):
    verifier_create(owner=user, spec=SPEC)
    response = user_client.get("/api/verifiers/to%00ne")
    assert response.status_code == 404 and response.json() == {
        "detail": "No verifier has this id",
        "problems": [],
    }
    assert user_client.get("/api/verifiers/", {"q": "to\x00ne"}).json()[0]["id"] == "tone"


def test_a_body_nested_deeper_than_the_cap_is_a_400_and_saves_nothing(user_client):
    deep = "x"
    for _ in range(150):  # json.loads reads it; storing and rendering it is what must not happen
        deep = [deep]
    spec = {"id": "deep", "kind": "in_process", "fn_name": "exact_match", "expected": deep}
    response = post(user_client, "/api/verifiers/", {"spec": spec})
    assert response.status_code == 400
    assert response.json()["problems"] == [
        {"field": "spec.expected[0]", "message": "nested more than 100 levels deep"}
    ]
    # Past Python's recursion limit, with or without a JSON content type.
    for content_type in ("application/json", "text/plain"):
        response = user_client.post(
            "/api/verifiers/", "[" * 10_000 + "]" * 10_000, content_type=content_type
        )
        assert response.status_code == 400
        assert response.json()["problems"] == [
            {"field": "body", "message": "nested more than 100 levels deep"}
        ]
    assert not Verifier.objects.exists()
