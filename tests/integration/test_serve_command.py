"""`manage.py serve` (what `make demo` runs) stops quietly on Ctrl-C, even with a
run in progress on the embedded worker, and leaves that run resumable; and it
serves static files as production sites do: hashed names, compressed, cached."""

import gzip
import os
import re
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import brotli
import pytest

from tests.e2e.conftest import ROOT, _free_port
from tests.polling import wait_until

# Spawns `manage.py serve` on a data directory of its own: needs no service.
pytestmark = pytest.mark.standalone


def _env(data_dir: str, static_root: str | None = None) -> dict:
    """`static_root`: where the static files are collected; the session's (tests/conftest.py) by default."""
    from django.conf import settings

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG"}
    }
    return dict(
        env,
        FRONTIER_DATA_DIR=data_dir,
        FRONTIER_STATIC_ROOT=static_root or str(settings.STATIC_ROOT),
        PYTHONUNBUFFERED="1",
        DJANGO_SETTINGS_MODULE="dashboard.settings",
    )


def _manage(env: dict, *args: str) -> str:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout


RUN_STATUS = (
    "from optimizer.models import Run; r = Run.objects.get(); print(r.status, r.budget_used)"
)


def _run_state(env: dict) -> tuple[str, int]:
    status, used = _manage(env, "shell", "-c", RUN_STATUS).split()[-2:]
    return status, int(used)


def test_ctrl_c_stops_the_server_with_no_traceback_and_the_demo_run_is_not_marked_failed():
    with tempfile.TemporaryDirectory(prefix="frontier-serve-") as data_dir:
        env = _env(data_dir)
        _manage(env, "migrate", "--noinput", "-v", "0")
        _manage(env, "demo_setup")  # launches the live demo run
        err_path = Path(data_dir) / "serve.err"
        with open(err_path, "w") as err:
            server = subprocess.Popen(
                [sys.executable, "manage.py", "serve", "--port", str(_free_port())],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        try:
            wait_until(
                lambda: (state := _run_state(env))[0] == "running" and state[1] > 0,
                timeout=120,
                interval=1,
                what="the demo run to be spending its budget",
            )
            server.send_signal(signal.SIGINT)  # what Ctrl-C in the terminal sends
            assert server.wait(timeout=60) == 0
        finally:
            if server.poll() is None:
                server.kill()
        stderr = err_path.read_text()
        assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
        assert "resumes from its checkpoint when the server starts again" in stderr
        assert (
            _run_state(env)[0] == "running"
        )  # left for the watchdog to resume, as after a worker crash


def _get(url: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return (
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                response.read(),
            )
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def test_serve_collects_the_static_files_and_serves_them_hashed_compressed_and_cached_for_a_year():
    """With nothing collected yet, `manage.py serve` (DEBUG on, as `make demo`) collects
    first; the pages name the hashed files, which come compressed when the client
    accepts it, cached for a year, and answer a conditional request with 304."""
    with tempfile.TemporaryDirectory(prefix="frontier-serve-") as data_dir:
        env = _env(data_dir, static_root=str(Path(data_dir) / "static"))
        _manage(env, "migrate", "--noinput", "-v", "0")
        base = f"http://127.0.0.1:{_free_port()}"
        err_path = Path(data_dir) / "serve.err"
        with open(err_path, "w") as err:
            server = subprocess.Popen(
                [
                    sys.executable,
                    "manage.py",
                    "serve",
                    "--no-worker",
                    "--port",
                    base.rsplit(":", 1)[1],
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        try:
            wait_until(
                lambda: _answers(base + "/login/"),
                timeout=180,
                interval=0.5,
                what="serve to answer (after collecting)",
            )
            login = _get(base + "/login/")[2].decode()
            css_url = re.search(r'href="(/static/css/frontier\.[0-9a-f]{12}\.css)"', login).group(1)
            manifest = (Path(data_dir) / "static" / "staticfiles.json").read_text()
            plotly_url = "/static/" + re.search(
                r'"(vendor/plotly-frontier\.min\.[0-9a-f]{12}\.js)"', manifest
            ).group(1)
            for url, source in (
                (css_url, "static/css/frontier.css"),
                (plotly_url, "static/vendor/plotly-frontier.min.js"),
            ):
                original = (ROOT / source).read_bytes()
                status, headers, body = _get(base + url, {"Accept-Encoding": "gzip, deflate, br"})
                assert status == 200 and headers["content-encoding"] == "br", (url, status, headers)
                assert brotli.decompress(body) == original and len(body) < len(original) / 3
                assert headers["cache-control"] == "max-age=31536000, public, immutable", headers
                assert (
                    "accept-encoding" in headers["vary"].lower()
                    and headers["x-content-type-options"] == "nosniff"
                )
                status, headers, body = _get(base + url, {"Accept-Encoding": "gzip"})
                assert headers["content-encoding"] == "gzip" and gzip.decompress(body) == original
                status, plain_headers, body = _get(base + url)
                assert "content-encoding" not in plain_headers and body == original
                assert _get(base + url, {"If-None-Match": plain_headers["etag"]})[0] == 304
            assert _get(base + "/static/vendor/plotly.min.js")[0] == 404  # the full bundle is gone
        finally:
            server.terminate()
            server.wait(timeout=60)
        assert "Collecting static files" in err_path.read_text()


def _answers(url: str) -> bool:
    try:
        return _get(url)[0] == 200
    except OSError:
        return False
