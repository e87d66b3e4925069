"""Browser tests: a real `manage.py serve` process (uvicorn + embedded Celery
worker, its own SQLite data dir) driven by Playwright in Debian's Chromium.

Fixtures:
- `frontier_server` (module scope): `.url`, `.data_dir`, `.manage(*args)` runs a
  management command against the server's database; a superuser
  `E2E_USERNAME`/`E2E_PASSWORD` exists.
- `browser` (session scope): Chromium at /usr/bin/chromium.
- `page`: a fresh browser context logged in as the e2e user, base_url set.
- `Api(base, token)`: a plain HTTP client (urllib) as scripts use the API;
  `session_login(base)` one logged in through the login form instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.cookiejar import CookieJar
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("FRONTIER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-gpu",
    "--no-first-run",
]
E2E_USERNAME = "e2e"
E2E_PASSWORD = "e2e-password-123"
ARTIFACTS = ROOT / "test-artifacts"

pytestmark = pytest.mark.e2e


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/e2e" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_env(data_dir: Path) -> dict:
    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"}
    }
    env.update(
        FRONTIER_DATA_DIR=str(data_dir),
        DEBUG="1",
        PYTHONUNBUFFERED="1",
        FRONTIER_VALIDATE_EVENTS="1",  # every event the served runs publish is checked against its model
        DJANGO_SETTINGS_MODULE="dashboard.settings",
    )
    # Static files collected once for the whole session (tests/conftest.py), not
    # again by each module's server: `manage.py serve` finds them up to date.
    from django.conf import settings

    env["FRONTIER_STATIC_ROOT"] = str(settings.STATIC_ROOT)
    return env


@dataclass
class FrontierServer:
    url: str
    data_dir: Path
    env: dict
    process: subprocess.Popen | None = None
    log_path: Path = field(default=None)

    def manage(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"manage.py {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result

    def new_token(self, username: str = E2E_USERNAME) -> str:
        """A fresh API token of `username`, as the API tokens page would show it once."""
        return (
            self.manage("shell", "-c", NEW_TOKEN.format(username=username))
            .stdout.strip()
            .splitlines()[-1]
        )

    def log(self) -> str:
        return (
            self.log_path.read_text(errors="replace")
            if self.log_path and self.log_path.exists()
            else ""
        )


NEW_TOKEN = """
from django.contrib.auth import get_user_model
from dashboard.account_services import api_token_create
_, raw = api_token_create(user=get_user_model().objects.get(username={username!r}), name="e2e script")
print(raw)
"""


class Api:
    """A plain HTTP client: urllib, JSON bodies, optional Bearer token and cookies."""

    def __init__(self, base: str, token: str | None = None):
        self.base, self.token = base, token
        self.cookies = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))

    def call(
        self,
        method: str,
        path: str,
        body=None,
        *,
        raw: bytes | None = None,
        headers: dict | None = None,
    ):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        all_headers = {"Content-Type": "application/json"} if body is not None else {}
        if self.token:
            all_headers["Authorization"] = f"Bearer {self.token}"
        all_headers.update(headers or {})
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers=all_headers
        )
        try:
            with self.opener.open(request, timeout=60) as response:
                return (
                    response.status,
                    _decode(response),
                    response.headers,
                )  # case-insensitive names
        except urllib.error.HTTPError as error:
            return error.code, _decode(error), error.headers

    def cookie(self, name: str) -> str:
        return next(c.value for c in self.cookies if c.name == name)


def _decode(response):
    body = response.read()
    kind = response.headers.get("Content-Type", "")
    return (
        json.loads(body)
        if kind.startswith("application/json") and body
        else body.decode(errors="replace")
    )


def wait_for_js(page, expression: str, arg=None, *, timeout: float = 15, what: str = "") -> object:
    """Page.wait_for_function without its in-page `new Function`, which the
    site's Content Security Policy (no 'unsafe-eval') refuses: poll with
    page.evaluate (run by the browser's debugging protocol, not the page)."""
    from tests.polling import wait_until

    return wait_until(
        lambda: page.evaluate(expression, arg),
        timeout=timeout,
        what=what or expression[:80],
        interval=0.05,
    )


PROGRESS_LINE = re.compile(
    r"\[[#.]+\] \d+/\d+ metric calls · .* · (queued|running|stopping|stopped|completed|failed)"
)


def progress_only(stderr: str) -> bool:
    """`optimize run --wait`'s stderr holds nothing but its progress bar (each redraw
    whole: no log line glued to it) and warnings."""
    lines = [line for line in stderr.replace("\r", "\n").splitlines() if line.strip()]
    return bool(lines) and all(
        PROGRESS_LINE.fullmatch(line) or line.startswith("warning:") for line in lines
    )


def session_login(base: str, username: str = E2E_USERNAME, password: str = E2E_PASSWORD) -> Api:
    """A plain HTTP client logged in through the login form (a session cookie and a CSRF cookie)."""
    browser = Api(base)
    login_page = browser.call("GET", "/login/")[1]
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page).group(1)
    form = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": csrf, "username": username, "password": password}
    ).encode()
    status, _, _ = browser.call(
        "POST",
        "/login/",
        raw=form,
        headers={"Content-Type": "application/x-www-form-urlencoded", "Referer": base + "/login/"},
    )
    assert status == 200 and browser.cookie("sessionid"), "login failed"
    return browser


def _wait_for(
    url: str, process: subprocess.Popen, server: FrontierServer, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode}:\n{server.log()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"the server did not answer {url} within {timeout}s:\n{server.log()}")


@pytest.fixture(scope="module")
def frontier_server():
    data_dir = Path(tempfile.mkdtemp(prefix="frontier-e2e-"))
    port = _free_port()
    server = FrontierServer(
        url=f"http://127.0.0.1:{port}", data_dir=data_dir, env=_server_env(data_dir)
    )
    server.manage("migrate", "--noinput", "-v", "0")
    env = dict(server.env, DJANGO_SUPERUSER_PASSWORD=E2E_PASSWORD)
    subprocess.run(
        [
            sys.executable,
            "manage.py",
            "createsuperuser",
            "--noinput",
            "--username",
            E2E_USERNAME,
            "--email",
            "e2e@example.com",
        ],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    server.log_path = data_dir / "server.log"
    with open(server.log_path, "w") as log:
        server.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port)],
            cwd=ROOT,
            env=server.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for(server.url + "/login/", server.process, server)
        yield server
    finally:
        server.process.terminate()
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.process.kill()
        shutil.rmtree(data_dir, ignore_errors=True)


@contextmanager
def chromium():
    """Debian's Chromium under Playwright (missing: the test fails in CI, skips elsewhere).
    Playwright's sync API runs an event loop on this thread: Django's ORM refuses to run
    in the test process while it is open."""
    if not Path(CHROMIUM).exists():
        message = f"Chromium not found at {CHROMIUM} (apt-get install -y chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import expect

    # CI shares two cores between the server, its worker and Chromium: a live page
    # may take longer than Playwright's 5 s to show what a click asked for.
    expect.set_options(timeout=10_000)
    with chromium() as browser:
        yield browser


def login(page, username: str = E2E_USERNAME, password: str = E2E_PASSWORD) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/login/" not in url)


@pytest.fixture
def page(browser, frontier_server, request):
    context = browser.new_context(
        base_url=frontier_server.url, viewport={"width": 1400, "height": 1000}
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    login(page)
    yield page
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-failure.png"), full_page=True)
    context.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
