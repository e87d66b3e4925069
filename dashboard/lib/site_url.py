"""The address the site's links start with (run pages in API answers and CLI output).

In order:
1. ``FRONTIER_BASE_URL``, when set: where users reach the site (behind a proxy,
   the proxy's address);
2. the address `manage.py serve` listens on: it puts it in its own environment
   (``FRONTIER_SERVED_URL``, so its requests and its embedded worker see it) and
   records it in the data directory, so a CLI process of the same data
   directory links to the server that is running there;
3. http://127.0.0.1:8000, `make demo`'s address.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from django.conf import settings

DEFAULT = "http://127.0.0.1:8000"
SERVED_URL_ENV = "FRONTIER_SERVED_URL"


def _record() -> Path:
    return Path(settings.DATA_DIR) / "served-url"


def site_url() -> str:
    """The links' base, without a trailing slash."""
    if settings.BASE_URL:
        return settings.BASE_URL
    served = os.environ.get(SERVED_URL_ENV, "")
    if not served:
        try:
            served = _record().read_text(encoding="utf-8").strip()[:500]
        except OSError:
            served = ""
    return (served if served.startswith(("http://", "https://")) else DEFAULT).rstrip("/")


def record_served_url(url: str) -> None:
    """Called by `manage.py serve` once it knows the address it listens on."""
    os.environ[SERVED_URL_ENV] = url
    # A read-only data directory: this process's own links are still right.
    with contextlib.suppress(OSError):
        _record().write_text(url + "\n", encoding="utf-8")
