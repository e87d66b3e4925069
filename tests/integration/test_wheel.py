"""Frontier as a user installs it: both wheels built from this checkout, installed
into a fresh virtual environment outside it (with constraints.txt, from the
package index; pip's cache keeps it quick), then `frontier serve` with a fresh
data directory serving a page, a hashed static file and a websocket, and the
README's external-run example sending a run to it with nothing but FRONTIER_URL
and FRONTIER_TOKEN set. One venv and one server for the module (each test reads
what it needs from them). Needs no service: `standalone`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from websockets.sync.client import connect

from tests.integration.conftest import ROOT, Process, free_port, wait_until_serving

pytestmark = [pytest.mark.standalone, pytest.mark.timeout(1200)]


def _run(args: list, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{args} failed ({result.returncode}):\n{result.stderr}"
    return result


def _user_env(home: Path) -> dict:
    """The environment of a user's shell: none of the test run's Frontier or
    Django settings, no PYTHONPATH pointing into this checkout."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("FRONTIER_", "DJANGO_", "DATABASE_", "REDIS_", "PYTHON"))
        and name not in ("SECRET_KEY", "VIRTUAL_ENV")
    }
    return dict(env, HOME=str(home), XDG_DATA_HOME=str(home / "xdg-data"))


class Installed:
    """The fresh venv (both wheels installed) and a `frontier serve` from it."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.venv = directory / "venv"
        self.home = directory / "home"
        self.home.mkdir()
        self.env = dict(_user_env(self.home), FRONTIER_DATA_DIR=str(directory / "data"))
        self.timings: dict[str, float] = {}
        self.server: Process | None = None
        self.url = ""
        self.token = ""

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def frontier(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return _run([self.bin("frontier"), *args], cwd=self.dir, env=dict(self.env, **env))

    def install(self) -> None:
        started = time.monotonic()
        dist = self.dir / "dist"
        for source in (ROOT, ROOT / "clients" / "python"):
            _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, source])
        self.timings["build both wheels"] = time.monotonic() - started
        started = time.monotonic()
        _run([sys.executable, "-m", "venv", self.venv])
        wheels = sorted(str(path) for path in dist.glob("*.whl"))
        _run(
            [
                self.bin("python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--no-compile",  # no .pyc for every file of plotly and Django: minutes saved
                "-c",
                ROOT / "constraints.txt",
                *wheels,
            ],
            cwd=self.dir,
            # The user's own HOME: pip's cache saves downloading every time.
            env=dict(self.env, HOME=os.environ.get("HOME", ""), PIP_DISABLE_PIP_VERSION_CHECK="1"),
        )
        self.timings["install into a fresh venv"] = time.monotonic() - started

    def serve(self) -> None:
        started = time.monotonic()
        port = free_port()
        self.server = Process(
            [self.bin("frontier"), "serve", "--port", str(port)],
            self.env,
            self.dir / "serve.log",
            cwd=self.dir,
        )
        self.url = f"http://127.0.0.1:{port}"
        wait_until_serving(self.server, self.url + "/login/", name="frontier serve", seconds=300)
        self.timings["first frontier serve"] = time.monotonic() - started


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    directory = tmp_path_factory.mktemp("frontier-wheel")
    assert not directory.resolve().is_relative_to(ROOT)
    frontier = Installed(directory)
    # A tracker silent for 6 s abandons its run (the watchdog looks every 2 s).
    frontier.env.update(FRONTIER_EXTERNAL_SILENT_SECONDS="6", FRONTIER_RUN_STALE_SECONDS="4")
    frontier.install()
    frontier.serve()
    frontier.frontier(
        "createsuperuser",
        "--noinput",
        "--username",
        "ada",
        "--email",
        "ada@example.com",
        DJANGO_SUPERUSER_PASSWORD="a-long-password",
    )
    frontier.token = frontier.frontier("token", "create", "--user", "ada").stdout.strip()
    yield frontier
    frontier.server.stop()
    print(
        "\nwheel test timings: " + ", ".join(f"{k} {v:.0f} s" for k, v in frontier.timings.items())
    )


def test_the_installed_wheel_serves_a_page_a_static_file_and_a_websocket(installed):
    """`pip install` + `frontier serve` is all it takes: the fresh data directory
    is migrated by serve, the pages come from the package's own copy of the
    templates and static files (there is no checkout around it), and the two
    export lines a script needs are printed."""
    where = _run(
        [installed.bin("python"), "-c", "import dashboard; print(dashboard.__file__)"],
        cwd=installed.dir,
        env=installed.env,
    ).stdout
    assert str(installed.venv) in where
    # Every served file the checkout tracks is in the package (the plotly build
    # recipe is not served: collectstatic ignores it).
    tracked = _run(["git", "ls-files", "templates", "static", "examples"], cwd=ROOT).stdout.split()
    site = Path(where.strip()).parent / "site"
    packaged = {
        path.relative_to(site).as_posix()
        for path in site.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert {p for p in tracked if "plotly-build/" not in p} == packaged
    assert "Start worker instance" in installed.frontier("worker", "--help").stdout  # celery's
    log = installed.server.log()
    assert "Migrating the database" in log
    assert f"export FRONTIER_URL={installed.url}" in log
    assert "export FRONTIER_TOKEN=$(frontier token create --user NAME)" in log

    page = urllib.request.urlopen(installed.url + "/login/", timeout=10).read().decode()
    assert "<form" in page
    hashed = re.findall(r"/static/[\w/.-]+\.[0-9a-f]{12}\.(?:css|js)", page)
    assert hashed, page[:2000]
    with urllib.request.urlopen(installed.url + hashed[0], timeout=10) as static:
        assert static.status == 200 and len(static.read()) > 100

    with connect(
        installed.url.replace("http://", "ws://") + "/ws/runs/",
        additional_headers={"Authorization": f"Bearer {installed.token}"},
        open_timeout=10,
    ) as socket:
        assert socket.ping().wait(10)  # authenticated (else closed with 4401) and live


def test_the_readme_example_reports_a_run_configured_by_the_environment_alone(installed):
    """README.md's external-run example, verbatim, in the fresh venv with only
    FRONTIER_URL and FRONTIER_TOKEN set. The names it leaves to the user's own
    code (the valset, an adapter, a reflection model) come from the installed
    plain-gepa example, examples/external/track_gepa_run.py (offline stand-ins)."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    example = next(block for block in blocks if "FrontierTracker(" in block)
    example = "\n".join(line.removeprefix("   ") for line in example.splitlines())
    assert "FrontierTracker(name=" in example  # no URL, no token in the code
    prelude = (
        "import sys, dashboard.lib.site_files as site\n"
        "sys.path.insert(0, str(site.EXAMPLES_DIR / 'external'))\n"
        "from track_gepa_run import TASKS as trainset, TASKS as valset, PhraseAdapter, reflection_lm\n"
        "adapter = PhraseAdapter()\n"
        "seed = {'instructions': 'Answer the customer.'}\n"
    )
    token = installed.token
    script = installed.dir / "readme_example.py"
    script.write_text(prelude + example)
    _run(
        [installed.bin("python"), script],
        cwd=installed.dir,
        env=dict(_user_env(installed.home), FRONTIER_URL=installed.url, FRONTIER_TOKEN=token),
        timeout=300,
    )
    request = urllib.request.Request(
        installed.url + "/api/runs/", headers={"Authorization": f"Bearer {token}"}
    )
    runs = json.loads(urllib.request.urlopen(request, timeout=10).read())
    mine = [run for run in runs if run["name"] == "my run"]
    assert mine and mine[0]["external"] and mine[0]["status"] == "completed", runs


def test_without_frontier_data_dir_the_data_goes_to_the_users_data_directory(installed):
    """Outside a checkout the embedded mode keeps its database in the platform's
    user data directory (XDG on Linux), not in the current directory."""
    env = {k: v for k, v in installed.env.items() if k != "FRONTIER_DATA_DIR"}
    _run([installed.bin("frontier"), "migrate", "-v", "0"], cwd=installed.dir, env=env)
    assert (installed.home / "xdg-data" / "frontier" / "frontier.sqlite3").is_file()
    assert not list(installed.dir.glob("*.sqlite3"))


def _tracked_run(installed, name: str) -> subprocess.Popen:
    """The installed plain-gepa example (a real gepa.optimize), its tracker
    configured by FRONTIER_URL and FRONTIER_TOKEN alone, slow enough to watch."""
    script = _run(
        [
            installed.bin("python"),
            "-c",
            "import dashboard.lib.site_files as s; print(s.EXAMPLES_DIR)",
        ],
        cwd=installed.dir,
        env=installed.env,
    ).stdout.strip()
    env = dict(
        _user_env(installed.home), FRONTIER_URL=installed.url, FRONTIER_TOKEN=installed.token
    )
    return subprocess.Popen(
        [
            installed.bin("python"),
            f"{script}/external/track_gepa_run.py",
            "--name",
            name,
            "--budget",
            "5000",
            "--delay",
            "0.2",
        ],
        cwd=installed.dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _run_named(installed, name: str) -> dict | None:
    request = urllib.request.Request(
        installed.url + "/api/runs/", headers={"Authorization": f"Bearer {installed.token}"}
    )
    runs = json.loads(urllib.request.urlopen(request, timeout=10).read())
    return next((run for run in runs if run["name"] == name), None)


def test_a_tracker_is_stopped_from_the_browser_and_a_killed_one_is_abandoned(installed):
    """On the installed wheels, as a gepa user meets them: a real gepa.optimize with a
    tracker configured by the environment alone, stopped from Chromium; then a
    second one killed mid-run, whose run ends abandoned by itself."""
    from playwright.sync_api import expect, sync_playwright

    from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS
    from tests.polling import wait_until

    def scored(name):
        return lambda: (
            (run := _run_named(installed, name)) and run["best_score"] is not None and run
        )

    first = _tracked_run(installed, "stopped from the page")
    try:
        run = wait_until(scored("stopped from the page"), timeout=120, what="the seed's score")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(base_url=installed.url)
            page.goto("/login/")
            page.get_by_label("Username").fill("ada")
            page.get_by_label("Password").fill("a-long-password")
            page.get_by_role("button", name="Log in").click()
            page.wait_for_url(lambda url: "/login/" not in url)
            page.goto(f"/runs/{run['id']}/")
            page.locator("[data-control=stop] button").click()
            expect(page.locator("[data-field=status]")).to_have_text("stopped", timeout=60_000)
            browser.close()
        summary = json.loads(first.communicate(timeout=120)[0].strip().splitlines()[-1])
        assert summary["stopped"] and summary["metric_calls"] < 5000, summary
    finally:
        if first.poll() is None:
            first.kill()

    second = _tracked_run(installed, "killed mid-run")
    try:
        run = wait_until(scored("killed mid-run"), timeout=120, what="the seed's score")
    finally:
        second.kill()
        second.wait(timeout=30)
    ended = wait_until(
        lambda: (r := _run_named(installed, "killed mid-run"))["status"] == "abandoned" and r,
        timeout=60,
        what="the silent run to be abandoned",
    )
    assert ended["phase"].startswith("abandoned: its tracker was silent"), ended
