"""`make demo` is quick and quiet.

- It installs only what running needs: `make -n demo` (the commands make would
  run, none run) installs the project's runtime dependencies and nothing of the
  dev extra (pytest, Playwright …), and builds nothing (no `pip install -e`,
  whose build printed setuptools' deprecation banner).
- What it then runs — `migrate`, `demo_setup`, `serve` — in a fresh data dir,
  with the environment a user's shell has: the demo login works in a real
  browser and the live demo run draws its charts; Ctrl-C (SIGINT) stops the
  server with exit status 0; nothing printed on the way holds a traceback or a
  warning banner. The whole transcript is kept under test-artifacts/."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from tests.e2e.conftest import ARTIFACTS, ROOT, _free_port, login, wait_for_js
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

# What a banner or a crash looks like on a terminal.
NOISE = re.compile(r"Traceback|Exception ignored|\w*Warning\b|deprecat", re.IGNORECASE)


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=~!; ]", requirement, maxsplit=1)[0].lower()


def test_make_demo_installs_the_runtime_dependencies_only_and_builds_nothing():
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    with tempfile.TemporaryDirectory(prefix="frontier-novenv-") as venv:
        plan = subprocess.run(
            ["make", "-n", "demo", f"VENV={venv}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    installs = [line for line in plan.splitlines() if "pip install" in line]
    assert installs and all(
        "-r " in line and "runtime-requirements.txt" in line for line in installs
    ), plan
    assert "pip install -e" not in plan and "[dev" not in plan, plan
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_name(r) for r in project["dependencies"]}
    dev_only = {_name(r) for r in project["optional-dependencies"]["dev"]} - runtime
    assert {"pytest", "playwright"} <= dev_only
    assert not runtime & {
        "pytest",
        "playwright",
        "pytest-django",
        "schemathesis",
        "ruff",
        "hypothesis",
    }, runtime


def _user_env(data_dir: str) -> dict:
    """A user's shell: no DEBUG, DATABASE_URL or REDIS_URL set (embedded mode), no PYTHONWARNINGS."""
    drop = {
        "DATABASE_URL",
        "REDIS_URL",
        "SECRET_KEY",
        "DEBUG",
        "PYTHONWARNINGS",
        "DJANGO_SETTINGS_MODULE",
    }
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return dict(env, FRONTIER_DATA_DIR=data_dir, PYTHONUNBUFFERED="1")


def test_the_demo_serves_a_live_run_and_ctrl_c_stops_it_with_no_traceback_or_warning(browser):
    transcript = []
    with tempfile.TemporaryDirectory(prefix="frontier-demo-") as data_dir:
        env = _user_env(data_dir)
        for command in (["migrate", "--noinput", "-v", "0"], ["demo_setup"]):
            step = subprocess.run(
                [sys.executable, "manage.py", *command],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            transcript.append(f"$ manage.py {' '.join(command)}\n{step.stdout}{step.stderr}")
            assert step.returncode == 0, transcript[-1]
        assert "Demo login: username demo · password frontier-demo" in transcript[-1]
        run_id = int(re.search(r"\(run (\d+)", transcript[-1]).group(1))

        port, log_path = _free_port(), Path(data_dir) / "serve.log"
        started = time.monotonic()
        with open(log_path, "w") as log:
            server = subprocess.Popen(
                [sys.executable, "manage.py", "serve", "--port", str(port)],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            context = browser.new_context(
                base_url=f"http://127.0.0.1:{port}", viewport={"width": 1280, "height": 900}
            )
            context.set_default_timeout(20_000)
            page = context.new_page()
            wait_until(
                lambda: _answers(page, "/login/"),
                timeout=60,
                interval=0.3,
                what="the demo server to answer",
            )
            serving_after = time.monotonic() - started
            login(page, "demo", "frontier-demo")
            page.goto(f"/runs/{run_id}/")
            expect(page.locator("[data-field=status]")).to_have_text("running", timeout=60_000)
            wait_for_js(
                page,
                "document.querySelectorAll('#chart-score .scatterlayer .point').length > 0",
                timeout=90,
                what="the demo run's first candidate on the chart",
            )
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "make-demo-live-run.png"), full_page=False)
            context.close()

            server.send_signal(signal.SIGINT)  # what Ctrl-C in the terminal sends
            assert server.wait(timeout=60) == 0
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        transcript.append(
            f"$ manage.py serve --port {port}   (answered after {serving_after:.1f} s; then Ctrl-C)\n"
            + log_path.read_text(errors="replace")
        )
    text = "\n".join(transcript)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "make-demo-transcript.txt").write_text(text)
    assert "Serving Frontier at" in text and "Stopped." in text, text
    noise = [line for line in text.splitlines() if NOISE.search(line)]
    assert noise == [], text


def _answers(page, path: str) -> bool:
    try:
        return page.request.get(path, timeout=2_000).status == 200
    except PlaywrightError:  # not listening yet
        return False
