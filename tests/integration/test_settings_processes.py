"""The settings a process gets from its environment: each case loads them in a
fresh Python process (embedded or distributed, DEBUG, SECRET_KEY, the production
block of docs/deployment.md and `manage.py check --deploy`). Spawns processes,
so it runs in the integration stage; it needs neither PostgreSQL nor Redis."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.standalone

ROOT = Path(__file__).resolve().parents[2]


def _load_settings(**env) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG"}
    }
    clean.update(env)
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings; print(settings.DEBUG, settings.EMBEDDED)",
        ],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_any_variables_it_runs_embedded_with_debug_on():
    result = _load_settings()
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]


def test_outside_debug_a_missing_secret_key_is_an_error():
    result = _load_settings(DEBUG="0")
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_with_services_configured_debug_is_off_and_the_mode_is_distributed():
    result = _load_settings(
        SECRET_KEY="x" * 50,
        DATABASE_URL="postgres://u@127.0.0.1/frontier",
        REDIS_URL="redis://127.0.0.1:6379/0",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"]


def _production_env() -> dict:
    """The documented production environment (docs/deployment.md "Behind HTTPS")."""
    page = (ROOT / "docs" / "deployment.md").read_text()
    block = page.split("# production.env\n", 1)[1].split("```", 1)[0]
    env = dict(line.split("=", 1) for line in block.strip().splitlines())
    assert env["SECRET_KEY"].startswith("<")  # a placeholder: never a key in the docs
    env["SECRET_KEY"] = "k" + "".join(f"{n:x}" for n in range(60))
    return env


def test_check_deploy_is_clean_with_the_documented_production_environment(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(_production_env(), FRONTIER_DATA_DIR=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_the_https_settings_come_from_the_environment(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(_production_env(), FRONTIER_DATA_DIR=str(tmp_path))
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD, "
        "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_PROXY_SSL_HEADER)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert (
        result.stdout.strip()
        == "True 31536000 True True True True ('HTTP_X_FORWARDED_PROTO', 'https')"
    ), result.stderr
    env["SECURE_PROXY_SSL_HEADER"] = "https"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0 and "SECURE_PROXY_SSL_HEADER must look like" in result.stderr
