"""schemathesis fuzzes a live server from its own /api/openapi.json, once with
a token and once with a browser session and its CSRF token: no 5xx, no status
code, content type, header or body the document does not declare.

Bounded for CI: a handful of examples per operation and a time cap per run.
A finished demo run and a task set exist, so some generated ids reach them.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.e2e.conftest import E2E_USERNAME, session_login

pytestmark = pytest.mark.e2e

CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    ]
)
SECONDS_PER_RUN = 75

SEED = """
from django.contrib.auth import get_user_model
from tests.factories import recorded_run
recorded_run(owner=get_user_model().objects.get(username={username!r}), candidates=4, val_tasks=3)
"""


@pytest.fixture(scope="module")
def seeded(frontier_server):
    frontier_server.manage("shell", "-c", SEED.format(username=E2E_USERNAME))
    return frontier_server


def schemathesis(url: str, *headers: str) -> subprocess.CompletedProcess:
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--no-color",
        "run",
        f"{url}/api/openapi.json",
        "--checks",
        CHECKS,
        "--phases",
        "coverage,fuzzing",
        "--max-examples",
        "5",
        "--seed",
        "7",
        "--max-time",
        str(SECONDS_PER_RUN),
        "--request-timeout",
        "30",
        "--warnings",
        "off",
    ]
    for header in headers:
        command += ["--header", header]
    # In a directory of its own: schemathesis keeps a cache (.schemathesis/) in its working directory.
    with tempfile.TemporaryDirectory(prefix="schemathesis-") as cwd:
        return subprocess.run(
            command, capture_output=True, text=True, timeout=SECONDS_PER_RUN + 120, cwd=cwd
        )


def test_the_api_conforms_to_its_document_for_a_token_client(seeded):
    result = schemathesis(seeded.url, f"Authorization: Bearer {seeded.new_token()}")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "generated" in result.stdout and " failed" not in result.stdout.split("SUMMARY")[-1]


def test_the_api_conforms_to_its_document_for_a_browser_session_with_csrf(seeded):
    browser = session_login(seeded.url)
    cookies = f"sessionid={browser.cookie('sessionid')}; csrftoken={browser.cookie('csrftoken')}"
    result = schemathesis(
        seeded.url, f"Cookie: {cookies}", f"X-CSRFToken: {browser.cookie('csrftoken')}"
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "generated" in result.stdout
