"""Throttling of password logins (site and admin) and API-token guesses.

The rule (docs/security.md "Login throttling"), kept on Django's cache (Redis in the
distributed mode, so every web process shares the counts):

- every failed attempt counts against the client's IP address and, for a
  password login, against the account name tried;
- counts live in a fixed window of FRONTIER_LOGIN_WINDOW_SECONDS (900) that
  starts at the first failure;
- once an account has FRONTIER_LOGIN_FAILURES_PER_ACCOUNT failures (10), or an
  IP address FRONTIER_LOGIN_FAILURES_PER_IP (50), every attempt for that account
  or from that address is refused, the right password or token included, until
  the window ends; refused attempts count too, so hammering does not help.

If the cache is unreachable (Redis down) the throttle lets attempts through
and logs it: logins and scripts keep working through a Redis outage, as runs do.

The address is REMOTE_ADDR: behind a reverse proxy, run daphne with
`--proxy-headers` so it is the client's, not the proxy's. A session that is
already logged in is never affected; only attempts to log in or to use a token.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

log = logging.getLogger(__name__)

REFUSED_MESSAGE = "Too many failed attempts for this account or from this address: try again later."


def _key(kind: str, value: str) -> str:
    # Hashed: an account name or header value may hold anything a cache key cannot.
    return (
        "throttle:" + kind + ":" + hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:32]
    )


def client_ip(request) -> str:
    return request.META.get("REMOTE_ADDR") or "unknown"


@dataclass(frozen=True)
class Throttle:
    """The counters one attempt is judged by: its IP and, when known, its account."""

    keys: tuple[tuple[str, int], ...]  # (cache key, limit)

    def refused(self) -> bool:
        try:
            return any((cache.get(key) or 0) >= limit for key, limit in self.keys)
        except Exception as error:
            log.warning("login throttle unavailable, attempt let through: %s", error)
            return False

    def failed(self) -> None:
        window = settings.LOGIN_THROTTLE_WINDOW_SECONDS
        try:
            for key, _ in self.keys:
                cache.add(key, 0, timeout=window)  # starts the window at the first failure
                try:
                    cache.incr(key)
                except ValueError:  # expired between add and incr: a new window
                    cache.add(key, 1, timeout=window)
        except Exception as error:
            log.warning("login throttle unavailable, failure not counted: %s", error)


def login_throttle(ip: str, username: str | None) -> Throttle:
    keys = [(_key("ip", ip), settings.LOGIN_FAILURES_PER_IP)]
    if username:
        keys.append(
            (_key("account", username.strip().lower()), settings.LOGIN_FAILURES_PER_ACCOUNT)
        )
    return Throttle(tuple(keys))


def token_throttle(ip: str) -> Throttle:
    """Token guesses (API or websocket handshake) carry no account: they count
    against the IP address only."""
    return Throttle(((_key("ip", ip or "unknown"), settings.LOGIN_FAILURES_PER_IP),))
