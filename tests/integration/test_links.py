"""The links Frontier prints and returns name the address it serves at: the CLI
of a data directory links to the port its server listens on (it was always
8000), and FRONTIER_BASE_URL, when set, wins everywhere."""

import json
import subprocess
import sys

import pytest

from tests.e2e.conftest import ROOT, _free_port
from tests.integration.test_serve_command import _answers, _env, _manage
from tests.polling import wait_until

# Spawns `manage.py serve` on a data directory of its own: needs no service.
pytestmark = pytest.mark.standalone


def _status_url(env: dict) -> str:
    return json.loads(_manage(env, "optimize", "status", "1"))["run_url"]


def test_the_clis_run_link_names_the_port_its_server_serves_at(tmp_path):
    env = _env(str(tmp_path))
    _manage(env, "migrate", "--noinput", "-v", "0")
    _manage(env, "demo_setup")
    assert _status_url(env) == "http://127.0.0.1:8000/runs/1/"  # no server yet: the default

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--no-worker"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(
            lambda: _answers(f"http://127.0.0.1:{port}/login/"),
            timeout=300,
            what="the server to answer",
        )
        assert _status_url(env) == f"http://127.0.0.1:{port}/runs/1/"
        behind_a_proxy = dict(env, FRONTIER_BASE_URL="https://frontier.example.com/")
        assert _status_url(behind_a_proxy) == "https://frontier.example.com/runs/1/"
    finally:
        server.terminate()
        server.wait(timeout=60)
