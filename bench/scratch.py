"""A throwaway SQLite Frontier for the benches that need no services: a
temporary data directory (removed at exit), the service settings cleared, and
DEBUG off as a deployed worker runs it. With DEBUG on Django logs every query
and, on SQLite, quotes each parameter through the database for the log: a
cost no deployment pays (docs/benchmarks.md "bench/cost_accounting.py"), so a
bench measured that way overstates our own work.

Usage, before `django.setup()`:  ``DATA_DIR = scratch.setup("cost")``
(`debug=True` measures the development mode instead).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup(name: str, *, debug: bool = False) -> str:
    """Point Django at a fresh SQLite database; returns the data directory."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    os.environ["FRONTIER_DATA_DIR"] = data_dir = tempfile.mkdtemp(prefix=f"frontier-bench-{name}-")
    atexit.register(shutil.rmtree, data_dir, ignore_errors=True)
    for variable in ("DATABASE_URL", "REDIS_URL", "SQLITE_PATH", "FRONTIER_RUNS_DIR"):
        os.environ.pop(variable, None)
    os.environ["DEBUG"] = "1" if debug else "0"
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    return data_dir
