"""Typed readers for settings that come from the environment.

Each helper fails loudly (ImproperlyConfigured, naming the variable) on a value
it cannot parse, so a typo in a deployment never silently becomes a default.
"""

from __future__ import annotations

import os
from typing import overload
from urllib.parse import unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@overload
def env_str(name: str) -> str | None: ...


@overload
def env_str(name: str, default: str) -> str: ...


@overload
def env_str(name: str, default: None) -> str | None: ...


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None else value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name} must be one of 1/0, true/false, yes/no, on/off; got {value!r}"
    )


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer; got {value!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def database_from_url(name: str, url: str) -> dict:
    """A Django DATABASES entry for a postgres:// URL (the only server database we support)."""
    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(
            f"{name} must be a postgres:// URL; got scheme {parsed.scheme!r}"
        )
    db_name = unquote(parsed.path.lstrip("/"))
    if not db_name:
        raise ImproperlyConfigured(
            f"{name} must name a database, as in postgres://user@host:5432/frontier"
        )
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": db_name,
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "",
        "PORT": str(parsed.port or ""),
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }


def redis_url(name: str, url: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme not in {"redis", "rediss"} or not parsed.hostname:
        raise ImproperlyConfigured(
            f"{name} must be a redis:// URL, as in redis://127.0.0.1:6379/0; got {url!r}"
        )
    return url


def proxy_ssl_header(name: str, value: str | None) -> tuple[str, str] | None:
    """`X-Forwarded-Proto: https` → Django's ("HTTP_X_FORWARDED_PROTO", "https")."""
    if value is None or not value.strip():
        return None
    header, sep, expected = value.partition(":")
    if not sep or not header.strip() or not expected.strip():
        raise ImproperlyConfigured(
            f"{name} must look like 'X-Forwarded-Proto: https'; got {value!r}"
        )
    return "HTTP_" + header.strip().upper().replace("-", "_"), expected.strip()
