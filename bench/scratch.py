"""A throwaway SQLite Frontier for the benches that need no services: a
temporary data directory (removed at exit), the service settings cleared, and
DEBUG off as a deployed worker runs it. With DEBUG on Django logs every query
and, on SQLite, quotes each parameter through the database for the log: a
cost no deployment pays (docs/benchmarks.md "bench/cost_accounting.py"), so a
bench measured that way overstates our own work.

Usage, before `django.setup()`:  ``DATA_DIR = scratch.setup("cost")``
(`debug=True` measures the development mode instead).

What every bench that makes scratch things (databases, Redis keys, temporary
directories, child processes) shares: `exit_on_signals` (SIGTERM and SIGHUP
exit through the bench's `finally` blocks and atexit, as Ctrl-C does), `stop`
(a child process and its process group, killed if it does not stop in time),
`delete_keys` (every Redis key holding the bench's unique tag) and `free_port`
(a port for a server it starts).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What points Django at a user's own services and files: a bench that makes
# its own in a scratch data directory drops them from its environment.
OWN_PLACES = (
    "DATABASE_URL",
    "REDIS_URL",
    "SQLITE_PATH",
    "FRONTIER_RUNS_DIR",
    "FRONTIER_STATIC_ROOT",
)


def setup(name: str, *, debug: bool = False) -> str:
    """Point Django at a fresh SQLite database; returns the data directory."""
    exit_on_signals()
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    os.environ["FRONTIER_DATA_DIR"] = data_dir = tempfile.mkdtemp(prefix=f"frontier-bench-{name}-")
    atexit.register(shutil.rmtree, data_dir, ignore_errors=True)
    for variable in OWN_PLACES:
        os.environ.pop(variable, None)
    os.environ["DEBUG"] = "1" if debug else "0"
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    return data_dir


# Set when a signal stops the bench: loops in other threads (which a signal
# does not interrupt) check it, so the clean-up does not wait for them.
stopping = threading.Event()


def _exit(signum: int, frame: object) -> None:
    if stopping.is_set():  # a second signal must not cut the clean-up short
        return
    stopping.set()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def exit_on_signals() -> None:
    """SIGTERM, SIGHUP and SIGINT raise in the main thread (SystemExit, or
    KeyboardInterrupt for SIGINT), so `finally` blocks, context managers and
    atexit remove what the bench made; by default SIGTERM and SIGHUP end the
    process on the spot. Signals that come during that clean-up are ignored."""
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _exit)


def run_each(*steps: Callable[[], object]) -> None:
    """A clean-up: run every step, also when one before it fails, then raise
    the first failure (PostgreSQL gone: the Redis keys are still deleted). It
    is raised chained to the error the bench stopped on, if any, which
    contextlib.ExitStack would drop: the user sees why the bench stopped."""
    failure = None
    for step in steps:
        try:
            step()
        except Exception as error:  # the next steps still run
            failure = failure or error
    if failure is not None:
        raise failure


def web_data_env(data_dir: Path, root: Path) -> dict[str, str]:
    """Environment for a bench's `manage.py serve` of the checkout `root`: a
    data directory of the bench's own (`serve` records its address there, and
    in the checkout's it would point the CLI's links at a server that has
    gone), and the checkout's own collected static files (collected once, not
    per bench: ~12 s)."""
    return {
        "FRONTIER_DATA_DIR": str(data_dir),
        "FRONTIER_STATIC_ROOT": str(root / "var" / "static"),
    }


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serving(
    process: subprocess.Popen, port: int, what: str, timeout: float = 60
) -> subprocess.Popen:
    """`process` once it accepts connections on 127.0.0.1:`port`; stopped (see
    `stop`) and SystemExit with the end of its stderr if it exits or does not
    listen within `timeout` seconds."""
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return process
            except OSError:
                if process.poll() is not None:
                    tail = process.stderr.read().decode()[-2000:] if process.stderr else ""
                    raise SystemExit(f"{what} exited: {tail}") from None
                time.sleep(0.1)
        raise SystemExit(f"{what} did not start within {timeout:.0f} s")
    except BaseException:
        stop(process)
        raise


def stop(process: subprocess.Popen, timeout: float = 10) -> None:
    """Stop a child process: SIGTERM, then SIGKILL after `timeout` seconds; a
    child started with `start_new_session=True` is stopped with its whole
    process group (what it started in turn)."""
    if process.poll() is not None:
        return
    try:
        own_group = os.getpgid(process.pid) == process.pid
    except ProcessLookupError:
        own_group = False

    def send(signum: int) -> None:
        try:
            if own_group:
                os.killpg(process.pid, signum)
            else:
                process.send_signal(signum)
        except ProcessLookupError:
            pass

    send(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        process.wait(timeout=timeout)
    if own_group:  # what the child left running in its group
        send(signal.SIGKILL)


def delete_keys(redis_url: str, tag: str) -> int:
    """Delete every key in `redis_url`'s DB whose name holds `tag` (a bench's
    unique channel prefix or queue name: Celery's bindings are named
    `_kombu.binding.<queue>`); returns how many."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(f"*{tag}*"))
        if keys:
            client.delete(*keys)
        return len(keys)
    finally:
        client.close()
