"""Shared fixtures: an owner, a collaborator-less outsider and an admin, plus
logged-in Django test clients for each."""

from __future__ import annotations

import pytest

PASSWORD = "correct horse battery"


def pytest_sessionstart(session):
    """Pages name their static files by hashed name (ManifestStaticFilesStorage):
    collectstatic, as `manage.py serve` runs it, into STATIC_ROOT before any test
    module is imported (importing dashboard.asgi makes ServeStatic list the
    files there) or renders a page. The servers integration tests start read the
    same STATIC_ROOT, and browser tests' servers are pointed at it
    (tests/e2e/conftest.py). The first run takes ~20 s, later ones ~50 ms
    (dashboard.staticfiles.collect_static_files)."""
    from dashboard.staticfiles import collect_static_files

    collect_static_files()


@pytest.fixture(autouse=True)
def _fresh_login_throttle():
    """Every test starts with no failed logins counted (dashboard.throttle keeps
    them in the cache, which outlives a test), so none is throttled by accident.
    Only the in-process cache: clearing the Redis one would flush the whole DB
    the broker and channel layer share (integration tests use their own IPs)."""
    from django.core.cache import caches
    from django.core.cache.backends.locmem import LocMemCache

    if isinstance(caches["default"], LocMemCache):
        caches["default"].clear()
    yield


@pytest.fixture(autouse=True)
def _steering_read_before_every_iteration(settings):
    """Runs executed in-process read stop, pause and injections before every
    iteration, so a test that asks at iteration N sees it acted on at N
    (settings.FRONTIER_STEERING_CHECK_MS; servers and workers started as
    processes keep the default)."""
    settings.FRONTIER_STEERING_CHECK_MS = 0


@pytest.fixture
def runs_dir(settings, tmp_path, monkeypatch):
    """For tests that execute runs in-process: gepa's run directories go under
    tmp_path, and the heartbeat thread stays quiet. The test database is a
    shared-cache in-memory SQLite, where a second thread writing gets "table is
    locked" instead of waiting; heartbeat, cancel and kill -9 run against a real
    SQLite file in tests/integration/test_optimize_command.py."""
    from optimizer.runs import runner

    settings.RUNS_DIR = tmp_path / "runs"
    monkeypatch.setattr(runner, "HEARTBEAT_SECONDS", 3600)
    return settings.RUNS_DIR


@pytest.fixture(autouse=True)
def _no_runs_list_push_outlives_its_test():
    """A test that publishes events leaves a trailing runs-list push scheduled
    (optimizer.runs.events.RunRowPushes: a timer thread that reads the run's row up to
    a second later). Fired during the next teardown's flush, its read and the
    TRUNCATE took their table locks in opposite orders: PostgreSQL's deadlock
    detector failed the flush (seen in CI), and the next test found the last
    one's rows. Cancelled here, before pytest-django's database teardown (its
    autouse fixture is set up before this one, so torn down after it)."""
    yield
    from optimizer.runs.events import row_pushes

    row_pushes.cancel_all()


@pytest.fixture(autouse=True)
def _fast_password_hasher(settings):
    """Tests create users by the hundred: a deliberately slow hasher (PBKDF2,
    ~0.3 s a password on this machine) cost most of the unit stage's time.
    Servers the tests start as processes keep the real one."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _validate_run_events(settings):
    """Every event a test publishes must match its model in optimizer.runs.event_types
    (optimizer.runs.events.publish_run_events raises otherwise)."""
    settings.FRONTIER_VALIDATE_EVENTS = True


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", "alice@example.com", PASSWORD)


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("bob", "bob@example.com", PASSWORD)


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("root", "root@example.com", PASSWORD)


@pytest.fixture
def user_client(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def other_client(django_user_model, other_user):
    from django.test import Client

    c = Client()
    c.force_login(other_user)
    return c


@pytest.fixture
def admin_client_logged_in(admin_user):
    from django.test import Client

    c = Client()
    c.force_login(admin_user)
    return c
