"""Hostile requests against a real `manage.py serve` (daphne) process: the
server answers them quickly and its memory stays small (issue 11: one regex or
one upload used to take the whole site down)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.conftest import E2E_USERNAME


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


@pytest.fixture(scope="module")
def token(frontier_server) -> str:
    code = (
        "from django.contrib.auth import get_user_model; "
        "from dashboard.account_services import api_token_create; "
        f"print(api_token_create(user=get_user_model().objects.get(username={E2E_USERNAME!r}), name='hostile')[1])"
    )
    return frontier_server.manage("shell", "-c", code).stdout.strip().splitlines()[-1]


def request(url: str, body: bytes, headers: dict, timeout: float = 60) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_a_regex_with_a_billion_repeats_is_refused_quickly_and_the_server_stays_small(frontier_server, token):
    pid = frontier_server.process.pid
    before = rss_mb(pid)
    spec = {"id": "bomb", "checks": [{"id": "code", "type": "regex", "params": {"pattern": "a{1000000000}"}}]}
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    started = time.monotonic()
    status, body = request(frontier_server.url + "/api/verifiers/lint", json.dumps({"spec": spec}).encode(), headers)
    elapsed = time.monotonic() - started
    assert status == 200, body
    lint = json.loads(body)
    assert lint["valid"] is False
    assert lint["problems"] == ["checks[0].params.pattern: invalid regular expression: counted repeat "
                                "{1000000000} is above the limit of 1,000 repetitions at position 1"]
    # Creating it is a 400 naming the field; nesting 1,000 groups deep too (a RecursionError 500 before).
    status, body = request(frontier_server.url + "/api/verifiers/", json.dumps({"spec": spec}).encode(), headers)
    assert status == 400 and json.loads(body)["detail"].startswith("checks[0].params.pattern: invalid regular expression")
    deep = {"id": "deep", "checks": [{"type": "regex", "params": {"pattern": "(" * 1000 + ")" * 1000}}]}
    status, body = request(frontier_server.url + "/api/verifiers/", json.dumps({"spec": deep}).encode(), headers)
    assert status == 400 and "groups nested more than" in json.loads(body)["detail"]
    # Before the fix the server grew by gigabytes and took minutes (then was OOM-killed).
    # Generous bounds: the machine is shared.
    assert elapsed < 20
    assert rss_mb(pid) - before < 100
