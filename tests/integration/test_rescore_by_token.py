"""Re-scoring as a script does it: a real web process and a `celery worker`
process (PostgreSQL, Redis), a plain HTTP client and only a token. The script
asks for a scoring with an edited spec, follows its progress to the end, reads
the new ranking, and finds the run's own scores unchanged."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from optimizer.models import Candidate
from tests.factories import WINDOW_ONLY, recorded_run
from tests.integration.conftest import api_token
from tests.polling import wait_until


def call(url: str, token: str, method: str = "GET", body: dict | None = None):
    request = urllib.request.Request(
        url,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def test_a_script_with_a_token_rescores_a_finished_run_on_the_workers(
    web_server, celery_worker, user
):
    run = recorded_run(user, candidates=10, val_tasks=6)
    before = list(Candidate.objects.filter(run=run).values_list("index", "val_score", "on_front"))
    token = api_token(user)
    base = f"{web_server.url}/api/runs/{run.pk}/scorings"

    status, bad = call(base, token, "POST", {"spec": {**WINDOW_ONLY, "checks": "none"}})
    assert status == 400 and bad["problems"][0]["field"].startswith("spec.checks")

    status, asked = call(base, token, "POST", {"spec": WINDOW_ONLY, "name": "window only"})
    assert status == 202, asked
    assert asked["status"] == "queued" and asked["total"] == 60

    def done() -> dict | None:
        body = call(f"{base}/{asked['id']}", token)[1]
        return body if body["status"] in ("done", "failed") else None

    result = wait_until(done, timeout=120, what="the worker to finish the scoring")
    assert result["status"] == "done", result["error"]
    assert result["done"] == result["total"] == 60
    ranks = {c["index"]: (c["original_rank"], c["rank"]) for c in result["candidates"]}
    assert any(old != new for old, new in ranks.values()), "the edited spec reorders the ranking"
    assert result["summary"]["changed"] > 0
    assert [s["name"] for s in call(base, token)[1]] == ["window only"]
    assert (
        list(Candidate.objects.filter(run=run).values_list("index", "val_score", "on_front"))
        == before
    )
