"""frontier_tracker imports nothing of the server, checked in a fresh process.
Spawns a process, so it runs in the integration stage; needs no service."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.standalone

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"
SERVER_PACKAGES = {
    "django",
    "ninja",
    "pydantic",
    "channels",
    "celery",
    "redis",
    "psycopg",
    "uvicorn",
    "plotly",
    "openai",
}


def test_it_imports_without_django_or_any_other_server_dependency():
    probe = "import json, sys, frontier_tracker; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=CLIENT
    ).stdout
    assert not SERVER_PACKAGES & set(json.loads(loaded))
    declared = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert [d.split(">")[0] for d in declared] == ["gepa"]
