"""A verifier's test cases: sample outputs saved with it from the editor."""

import json

import pytest

from verifiers_app.models import Verifier
from verifiers_app.services import verifier_create

pytestmark = pytest.mark.django_db

SPEC = {
    "id": "tone",
    "name": "Tone",
    "checks": [{"id": "polite", "type": "contains", "params": {"value": "please"}}],
}
CASES = [
    {
        "name": "polite",
        "output": "Yes, please wait.",
        "task": None,
        "expect": "pass",
        "expect_passed": "passed",
    },
    {
        "name": "rude",
        "output": "No.",
        "task": {"metadata": {}},
        "expect": "any",
        "expect_passed": "failed",
    },
]


def test_test_cases_posted_with_a_new_verifier_are_stored_with_it(user_client):
    response = user_client.post(
        "/verifiers/new/", {"spec": json.dumps(SPEC), "test_cases": json.dumps(CASES)}
    )
    assert response.status_code == 302
    assert Verifier.objects.get().test_cases == CASES


def test_editing_only_the_test_cases_saves_them_without_a_new_version(user, user_client):
    verifier = verifier_create(owner=user, spec=SPEC)
    user_client.post(
        "/verifiers/tone/edit/", {"spec": json.dumps(SPEC), "test_cases": json.dumps(CASES[:1])}
    )
    verifier.refresh_from_db()
    assert verifier.test_cases == CASES[:1] and verifier.version == 1
    page = user_client.get("/verifiers/tone/edit/").content.decode()
    assert "Yes, please wait." in page  # the editor reloads them


def test_a_test_case_with_an_unknown_verdict_is_refused_naming_it_and_nothing_is_saved(
    user, user_client
):
    verifier_create(owner=user, spec=SPEC)
    bad = [CASES[0], dict(CASES[1], expect="maybe")]
    response = user_client.post(
        "/verifiers/tone/edit/",
        {"spec": json.dumps(dict(SPEC, name="Renamed")), "test_cases": json.dumps(bad)},
    )
    assert response.status_code == 400
    assert (
        "test_cases[1].expect: must be one of pass, borderline, fail, any"
        in response.content.decode()
    )
    verifier = Verifier.objects.get()
    assert verifier.test_cases == [] and verifier.name == "Tone"


def test_a_test_case_expecting_neither_passed_nor_failed_is_refused_naming_the_field(
    user, user_client
):
    """`expect_passed` is what a case expects of the verifier's passed / failed
    (docs/verifier-semantics.md "Passed and verdict"): passed, failed or any."""
    verifier_create(owner=user, spec=SPEC)
    bad = [CASES[0], dict(CASES[1], expect_passed="pass")]
    response = user_client.post(
        "/verifiers/tone/edit/", {"spec": json.dumps(SPEC), "test_cases": json.dumps(bad)}
    )
    assert response.status_code == 400
    assert (
        "test_cases[1].expect_passed: must be one of passed, failed, any"
        in response.content.decode()
    )
    assert Verifier.objects.get().test_cases == []


def test_a_test_case_saved_before_expect_passed_existed_loads_expecting_any(user, user_client):
    """Cases stored with only a verdict expectation still load, and saving them
    again stores `expect_passed: any` (nothing was expected of passed)."""
    old = {"name": "old", "output": "Yes, please.", "task": None, "expect": "pass"}
    verifier = verifier_create(owner=user, spec=SPEC)
    Verifier.objects.filter(pk=verifier.pk).update(test_cases=[old])
    page = user_client.get("/verifiers/tone/edit/").content.decode()
    assert "Yes, please." in page
    user_client.post(
        "/verifiers/tone/edit/", {"spec": json.dumps(SPEC), "test_cases": json.dumps([old])}
    )
    verifier.refresh_from_db()
    assert verifier.test_cases == [dict(old, expect_passed="any")]


def test_too_many_or_too_long_test_cases_are_refused(user_client):
    many = [dict(CASES[0], name=f"c{i}") for i in range(31)]
    response = user_client.post(
        "/verifiers/new/", {"spec": json.dumps(SPEC), "test_cases": json.dumps(many)}
    )
    assert "test_cases: at most 30 test cases, got 31" in response.content.decode()
    long = [dict(CASES[0], output="x" * 20_001)]
    response = user_client.post(
        "/verifiers/new/", {"spec": json.dumps(SPEC), "test_cases": json.dumps(long)}
    )
    assert (
        "test_cases[0].output: must be text of at most 20000 characters"
        in response.content.decode()
    )
    assert not Verifier.objects.exists()


def test_the_editor_of_a_saved_verifier_knows_its_fixed_id(user, user_client):
    verifier_create(owner=user, spec=SPEC)
    assert 'data-saved-id="tone"' in user_client.get("/verifiers/tone/edit/").content.decode()
    assert 'data-saved-id=""' in user_client.get("/verifiers/new/").content.decode()
