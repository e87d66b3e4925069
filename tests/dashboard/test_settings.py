"""Settings come from the environment through typed helpers that fail loudly.
(Loading the settings in a fresh process with a given environment, and
`check --deploy`: tests/integration/test_settings_processes.py.)"""

import re
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard.env import database_from_url, env_bool, env_int, env_list, redis_url


def test_a_boolean_variable_with_a_typo_is_an_error_naming_it(monkeypatch):
    monkeypatch.setenv("DEBUG", "ture")
    with pytest.raises(ImproperlyConfigured, match="DEBUG"):
        env_bool("DEBUG", False)


def test_an_integer_variable_that_is_not_a_number_is_an_error_naming_it(monkeypatch):
    monkeypatch.setenv("FRONTIER_WORKER_CONCURRENCY", "two")
    with pytest.raises(ImproperlyConfigured, match="FRONTIER_WORKER_CONCURRENCY"):
        env_int("FRONTIER_WORKER_CONCURRENCY", 2)


def test_lists_are_comma_separated_and_trimmed(monkeypatch):
    monkeypatch.setenv("ALLOWED_HOSTS", " a.example, b.example ,")
    assert env_list("ALLOWED_HOSTS", []) == ["a.example", "b.example"]


def test_a_postgres_url_becomes_a_database_entry():
    db = database_from_url("DATABASE_URL", "postgres://frontier:s%40cret@db.internal:5433/frontier")
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "frontier",
        "frontier",
        "s@cret",
        "db.internal",
        "5433",
    )


@pytest.mark.parametrize("url", ["mysql://x/y", "postgres://host-only"])
def test_a_database_url_we_cannot_use_is_an_error(url):
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        database_from_url("DATABASE_URL", url)


def test_a_redis_url_must_be_redis():
    assert redis_url("REDIS_URL", "redis://127.0.0.1:6379/0")
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
        redis_url("REDIS_URL", "http://127.0.0.1:6379")


def test_every_variable_the_settings_read_is_in_the_configuration_page():
    root = Path(__file__).resolve().parents[2]
    read = set(
        re.findall(
            r"\benv_\w+\(\s*\"([A-Z][A-Z0-9_]+)\"", (root / "dashboard/settings.py").read_text()
        )
    )
    page = (root / "docs" / "configuration.md").read_text()
    assert len(read) > 30
    missing = sorted(name for name in read if f"| `{name}` |" not in page)
    assert not missing, f"docs/configuration.md lists no row for {missing}"
