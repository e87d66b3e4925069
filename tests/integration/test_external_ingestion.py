"""The events API on PostgreSQL, as a tracker script calls it (a real server, a
token): the schema and the columns agree on every length, so the longest text
the schema allows is stored and one more character is a 400 naming the field,
never a 500 that the tracker would retry forever."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from optimizer.models import Evaluation, Run
from tests.integration.conftest import api_token

pytestmark = pytest.mark.django_db(transaction=True)


def _post(url: str, token: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_longest_texts_the_schema_allows_are_stored_and_one_more_is_a_400(web_server, user):
    token = api_token(user)
    long = "n" * 200
    status, opened = _post(
        web_server.url + "/api/external/runs",
        token,
        {"key": "k" * 64, "name": long, "host": long, "gepa_version": "v" * 50},
    )
    assert status == 201, opened
    events_url = f"{web_server.url}/api/external/runs/{opened['id']}/events"
    seed = {
        "type": "candidate",
        "index": 0,
        "origin": "seed",
        "components": {"c" * 200: "Answer."},
        "val_score": 0.5,
        "tasks": [{"task_key": "t" * 200, "score": 0.5, "objectives": {"o" * 200: 1.0}}],
    }
    too_long = {"type": "status", "phase": "p" * 101}
    status, refused = _post(events_url, token, {"seq": 1, "events": [seed, too_long]})
    assert status == 400, refused
    assert refused["problems"][0]["field"] == "events.1.status.phase"

    fits = {"type": "status", "phase": "p" * 100}
    failure = {"type": "error", "message": "e" * 5000}
    status, applied = _post(events_url, token, {"seq": 1, "events": [seed, fits, failure]})
    assert status == 200 and applied["applied"], applied  # the refusal left nothing half-applied
    run = Run.objects.get(pk=opened["id"])
    assert (run.name, run.phase) == (long, "p" * 100)
    assert Evaluation.objects.get(candidate__run=run).task_key == "t" * 200
