"""Integration tests: PostgreSQL, Redis, and real web (`manage.py serve`, uvicorn)
and `celery worker` processes started with the same commands docker-compose.yml runs.

They need DATABASE_URL (PostgreSQL) and REDIS_URL. Without them (a laptop with
no services) they skip with the reason; under CI (CI=true) they fail instead.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pytest
from celery import Celery
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items):
    """Every test here is marked `integration`. Those that need PostgreSQL and
    Redis (all but the ones marked `standalone`, which only spawn processes) are
    skipped with the reason when the services are missing, and under CI
    (CI=true) the session stops instead: CI never skips them. Decided at
    collection, before pytest-django would create a test database on a server
    that is not there."""
    ours = [item for item in items if "tests/integration" in str(item.fspath)]
    for item in ours:
        item.add_marker(pytest.mark.integration)
    needing = [item for item in ours if item.get_closest_marker("standalone") is None]
    problems = _missing_services() if needing else []
    if not problems:
        return
    message = "integration tests need PostgreSQL and Redis: " + "; ".join(problems)
    if os.environ.get("CI"):
        raise pytest.UsageError(message + " (CI must never skip them)")
    for item in needing:
        item.add_marker(pytest.mark.skip(reason=message))


#: The hostnames of the workers started on the project's Redis (start_worker).
_WORKERS: list[str] = []
#: What `make test-integration` names this run's queue: frontier-test-<pid or CI's name>.
OWN_QUEUE_PREFIX = "frontier-test-"


@pytest.fixture(scope="session", autouse=True)
def _own_redis_keys_removed():
    """At the end of the session, the keys Celery made in the project's Redis
    for this run. Run as `make test-integration` runs it, every one of them is
    under the run's own key prefix (FRONTIER_BROKER_KEY_PREFIX, named as its
    queue is), and all of them go. Run with a queue so named but no prefix: the
    queue's list and bindings and its workers' control bindings go, and the
    sets Celery shares between workers stay. Other runs' keys are left as they
    are."""
    yield
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    own_prefix = settings.BROKER_KEY_PREFIX.startswith(OWN_QUEUE_PREFIX)
    own_queue = queue.startswith(OWN_QUEUE_PREFIX)
    if not settings.REDIS_URL or not (own_prefix or own_queue or _WORKERS):
        return
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        if own_prefix:
            pattern = re.sub(r"([*?\[\]\\])", r"\\\1", settings.BROKER_KEY_PREFIX) + "*"
            if names := list(client.scan_iter(match=pattern)):
                client.delete(*names)
            return
        if own_queue:
            names = [queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}"]
            names += client.scan_iter(match=f"{queue}\x06\x16*")  # its priority lists
            client.delete(*names)
        pidbox = "_kombu.binding.celery.pidbox"
        workers = tuple(f"{name}.celery.pidbox".encode() for name in _WORKERS)
        ours = [member for member in client.smembers(pidbox) if member.endswith(workers)]
        if ours:
            client.srem(pidbox, *ours)
    finally:
        client.close()


def _missing_services() -> list[str]:
    problems = []
    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        problems.append("DATABASE_URL is not set to a PostgreSQL database")
    else:
        db = settings.DATABASES["default"]
        if not _reachable(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432)):
            problems.append(f"PostgreSQL at {db['HOST']}:{db['PORT'] or 5432} is not reachable")
    if not settings.REDIS_URL:
        problems.append("REDIS_URL is not set")
    else:
        parsed = urlparse(settings.REDIS_URL)
        if not _reachable(parsed.hostname, parsed.port or 6379):
            problems.append(f"Redis at {parsed.hostname}:{parsed.port or 6379} is not reachable")
    return problems


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def checkout_served_url() -> str | None:
    """What the checkout's var/served-url holds, where `manage.py serve` of
    this checkout's default data directory records its address
    (dashboard/lib/site_url.py): a `make demo`'s, which no test may change."""
    try:
        return (ROOT / "var" / "served-url").read_text()
    except FileNotFoundError:
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def services_env(transactional_db, tmp_path):
    """Environment for child processes: the *test* database, Redis, this test
    process's queue (`make test-integration` names one of its own, so a local
    deployment on the same Redis is never touched), emptied first, and a channel
    prefix, runs and data directory of their own (a web process records its
    address in its data directory: in the checkout's, the CLI of a `make demo`
    there would link to a test's server after it has gone), with the
    checkout's collected static files."""
    from django.db import connection

    from dashboard.celery import app

    app.control.purge()
    db = connection.settings_dict
    token = uuid.uuid4().hex[:10]
    (tmp_path / "data").mkdir(exist_ok=True)
    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        REDIS_URL=settings.REDIS_URL,
        SECRET_KEY=settings.SECRET_KEY,  # sessions made here must verify there
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        FRONTIER_CHANNEL_PREFIX=f"frontier-it-{token}",
        FRONTIER_QUEUE=settings.CELERY_TASK_DEFAULT_QUEUE,
        FRONTIER_RUNS_DIR=str(tmp_path / "runs"),
        FRONTIER_DATA_DIR=str(tmp_path / "data"),
        FRONTIER_STATIC_ROOT=str(settings.STATIC_ROOT),
        FRONTIER_RUN_STALE_SECONDS="3",
        FRONTIER_VALIDATE_EVENTS="1",  # the workers check every event against its model, as the unit tests do
        PYTHONUNBUFFERED="1",
    )
    return env


class Process:
    def __init__(self, args: list[str], env: dict, log_path: Path, cwd: Path = ROOT):
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 - open for the process's life, closed by stop()
        # A session of its own, so kill() takes a prefork worker's children too.
        self.popen = subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        """SIGKILL the process and its children: a machine losing power, as far as the run can tell."""
        os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.popen.poll() is not None:
            self._log.close()
            return
        self.popen.terminate()
        try:
            self.popen.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.popen.kill()
        self._log.close()


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


@pytest.fixture
def web_server(services_env, tmp_path):
    """A web process (`manage.py serve`, as in docker-compose.yml) on a free port."""
    process = start_web(services_env, tmp_path / "web.log")
    yield process
    process.stop()


def start_web(env: dict, log_path: Path) -> Process:
    """`manage.py serve` on a free port; returns once it serves the login page."""
    port = free_port()
    process = Process(
        [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env,
        log_path,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(process, url + "/login/", name="the web process", seconds=60)
    process.url = url
    return process


def wait_until_serving(process: Process, url: str, *, name: str, seconds: float) -> None:
    """Return once `url` answers; fail with the process's log when it exits or stays silent."""
    deadline = time.monotonic() + seconds
    while True:
        if process.popen.poll() is not None:
            pytest.fail(f"{name} exited:\n{process.log()}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            if time.monotonic() > deadline:
                process.stop()
                pytest.fail(f"{name} did not answer within {seconds:.0f} s:\n{process.log()}")
            time.sleep(0.2)


def start_worker(env: dict, log_path: Path) -> Process:
    """`celery -A dashboard worker` (as in docker-compose.yml); returns once it
    answers a ping (through the broker in `env`, which may be another Redis)."""
    hostname = f"it-{uuid.uuid4().hex[:6]}@{socket.gethostname()}"
    process = Process(
        [
            _bin("celery"),
            "-A",
            "dashboard",
            "worker",
            "--loglevel",
            "INFO",
            "--concurrency",
            "2",
            "--hostname",
            hostname,
        ],
        env,
        log_path,
    )
    if env["REDIS_URL"] == settings.REDIS_URL:
        _WORKERS.append(hostname)
    deadline = time.monotonic() + 60
    with broker_control(env["REDIS_URL"]) as control:
        while not control.ping(destination=[hostname], timeout=0.5):
            if process.popen.poll() is not None or time.monotonic() > deadline:
                process.stop()
                pytest.fail(f"the celery worker did not answer a ping:\n{process.log()}")
    return process


@contextmanager
def broker_control(redis_url: str):
    """Celery's control through the broker at `redis_url`: the project's app for the
    project's Redis; for another Redis (a RedisServer of the test) an app of its own,
    closed after and never made the current app: shared tasks (a run's launch) resolve
    through the current app, and this process would go on sending them to that broker
    long after the test stopped it."""
    from dashboard.celery import app

    if redis_url == settings.REDIS_URL:
        yield app.control
        return
    other = Celery(broker=redis_url, set_as_current=False)
    try:
        yield other.control
    finally:
        other.close()


class RedisServer:
    """A redis-server of the test's own, on a free port, no persistence: the
    test stops and starts it at will (a Redis outage) without touching anyone
    else's Redis."""

    def __init__(self, directory: Path):
        self.port = free_port()
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.popen: subprocess.Popen | None = None

    def env(self, env: dict) -> dict:
        """`env` (services_env) on this Redis, configured as a deployment is by
        default: without the run's key prefix, since nothing else is on this
        Redis to keep apart from."""
        return {**env, "REDIS_URL": self.url, "FRONTIER_BROKER_KEY_PREFIX": ""}

    def start(self) -> None:
        self.popen = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=open(self.directory / "redis.log", "a"),  # noqa: SIM115 - the child keeps it
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 20
        while not _reachable("127.0.0.1", self.port):
            if self.popen.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"redis-server did not start:\n{(self.directory / 'redis.log').read_text()}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            self.popen.wait(timeout=20)
        self.popen = None


@pytest.fixture
def own_redis(tmp_path):
    """A RedisServer, not started yet; stopped and removed after the test."""
    if shutil.which("redis-server") is None:
        message = (
            "this test starts a redis-server of its own: install Redis (the redis-server binary)"
        )
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must never skip it)")
        pytest.skip(message)
    server = RedisServer(tmp_path / "redis")
    yield server
    server.stop()
    shutil.rmtree(server.directory, ignore_errors=True)


@pytest.fixture
def celery_worker(services_env, tmp_path):
    process = start_worker(services_env, tmp_path / "celery.log")
    process.queue = services_env["FRONTIER_QUEUE"]
    yield process
    process.stop()


def api_token(user) -> str:
    """A new API token of `user` (what a script sends as `Authorization: Bearer …`)."""
    from dashboard.models import ApiToken

    token = ApiToken.generate()
    ApiToken.objects.create(
        user=user, name="integration", prefix=token[:8], digest=ApiToken.hash(token)
    )
    return token


def session_cookie(user) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
