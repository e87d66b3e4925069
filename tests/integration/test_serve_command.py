"""`manage.py serve` (what `make demo` runs) stops quietly on Ctrl-C, even with a
run in progress on the embedded worker, and the next start resumes that run at
once; it speaks plainly on the terminal; and it serves static files as
production sites do: hashed names, compressed, cached."""

import contextlib
import gzip
import json
import os
import pty
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
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


class Terminal:
    """`manage.py serve` writing to a terminal (a pseudo-terminal: Django colours
    a command's output only there), everything it prints kept."""

    def __init__(self, env: dict, port: int) -> None:
        controller, terminal = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=terminal,
            stderr=terminal,
        )
        os.close(terminal)
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, args=(controller,), daemon=True)
        self._reader.start()

    def _read(self, controller: int) -> None:
        try:
            while chunk := os.read(controller, 4096):
                self._chunks.append(chunk)
        except OSError:  # EIO: the server closed its end of the terminal
            pass
        finally:
            os.close(controller)

    def text(self) -> str:
        return b"".join(self._chunks).decode(errors="replace").replace("\r\n", "\n")

    def ctrl_c(self) -> int:
        self.process.send_signal(signal.SIGINT)  # what Ctrl-C in the terminal sends
        status = self.process.wait(timeout=60)
        self._reader.join(timeout=10)
        return status

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class Database:
    """The server's SQLite database, read directly: polling it through `manage.py
    shell` would take seconds per look."""

    def __init__(self, data_dir: str) -> None:
        from optimizer.models import Run, RunEvent, RunProgress

        self.path = Path(data_dir) / "frontier.sqlite3"
        self.runs, self.events, self.progress = (
            m._meta.db_table for m in (Run, RunEvent, RunProgress)
        )

    def _one(self, sql: str, *args) -> tuple:
        with contextlib.closing(sqlite3.connect(self.path, timeout=10)) as db:
            return db.execute(sql, args).fetchone()

    def run(self) -> tuple[int, str, int]:
        """(id, status, budget used) of the one run."""
        return self._one(
            f"SELECT r.id, r.status, p.budget_used FROM {self.runs} r "
            f"JOIN {self.progress} p ON p.run_id = r.id"
        )

    def last_seq(self) -> int:
        return self._one(f"SELECT COALESCE(MAX(seq), 0) FROM {self.events}")[0]

    def status_phases_after(self, seq: int) -> list[str]:
        with contextlib.closing(sqlite3.connect(self.path, timeout=10)) as db:
            rows = db.execute(
                f"SELECT payload FROM {self.events} WHERE seq > ? AND type = 'run.status' ORDER BY seq",
                (seq,),
            ).fetchall()
        return [json.loads(payload).get("phase", "") for (payload,) in rows]


RED = "\x1b[31"  # Django's ERROR style, and any red: for errors only
INTERNAL_WORDS = ("queued by another process", "re-queueing", "Celery", "broker")


def test_after_ctrl_c_the_next_serve_resumes_the_demo_run_at_once_and_says_so_plainly():
    """`make demo`, Ctrl-C with the demo run mid-way, `make demo` again, on a
    terminal. Ctrl-C stops the server (exit 0, no traceback) and leaves the run
    running with its checkpoint; demo_setup then says the run resumes when the
    server starts (not that it is "already running"); the next server takes the
    run back at once, with no heartbeat to wait for: the run says "resuming"
    (a run.status event, what the run page and the runs list show) within 8 s
    of the server answering, and spends budget again. Both servers print in the
    terminal's normal colour (red is for errors), with no internal words, and
    give the demo run's link as a full URL on the port they listen on."""
    with tempfile.TemporaryDirectory(prefix="frontier-serve-") as data_dir:
        env = _env(data_dir)
        env.pop("DJANGO_COLORS", None)
        db = Database(data_dir)
        _manage(env, "migrate", "--noinput", "-v", "0")
        _manage(env, "demo_setup")  # launches the live demo run
        checkpoint = Path(data_dir) / "runs" / "1" / "gepa_state.bin"
        first = Terminal(env, first_port := _free_port())
        try:
            wait_until(
                lambda: checkpoint.exists() and db.run()[2] > 0,
                timeout=180,
                interval=0.5,
                what="the demo run to checkpoint and spend budget",
            )
            assert first.ctrl_c() == 0
        finally:
            first.kill()
        run_id, status, used = db.run()
        assert status == "running"  # left for the next server, as a crashed worker leaves it
        seq = db.last_seq()

        again = _manage(env, "demo_setup")
        assert f"The demo run (run {run_id}) resumes when the server starts." in again, again
        assert "already" not in again, again

        second = Terminal(env, second_port := _free_port())
        try:
            wait_until(
                lambda: _answers(f"http://127.0.0.1:{second_port}/login/"),
                timeout=120,
                interval=0.2,
                what="the second server to answer",
            )
            answered = time.monotonic()
            wait_until(
                lambda: "resuming" in db.status_phases_after(seq),
                timeout=60,
                interval=0.2,
                what="the interrupted run to say it is resuming",
            )
            assert time.monotonic() - answered < 8, (
                "the run resumed only once its heartbeat was stale"
            )
            wait_until(
                lambda: db.run()[2] > used,
                timeout=120,
                interval=0.5,
                what="the resumed run to spend budget again",
            )
            assert db.run()[1] == "running"
        finally:
            second.ctrl_c()
            second.kill()

    for terminal, port, verb in ((first, first_port, "starts"), (second, second_port, "resumes")):
        text = terminal.text()
        assert "Traceback" not in text and "Exception ignored" not in text, text
        assert RED not in text, text
        assert [word for word in INTERNAL_WORDS if word in text] == [], text
        assert f"Serving Frontier at http://127.0.0.1:{port}/ " in text, text
        assert f"{verb}: http://127.0.0.1:{port}/runs/{run_id}/" in text, text
    assert f"Run {run_id} started." in first.text()
    assert "resumes from its checkpoint when the server starts again" in first.text()
    assert f"Run {run_id} resumed from its checkpoint." in second.text()


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
        out_path = Path(data_dir) / "serve.out"
        with open(out_path, "w") as out:
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
                stdout=out,
                stderr=subprocess.STDOUT,
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
        assert "Collecting static files" in out_path.read_text()


def _answers(url: str) -> bool:
    try:
        return _get(url)[0] == 200
    except OSError:
        return False
