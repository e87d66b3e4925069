"""``manage.py verifiers score|lint`` as a process: exit codes, one-line errors on
stderr, stdin. Spawns processes, so it runs in the integration stage; it needs
neither PostgreSQL nor Redis (the command runs embedded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.verifiers.test_cli import SPEC

pytestmark = pytest.mark.standalone

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def files(tmp_path):
    def write(name: str, content) -> str:
        path = tmp_path / name
        path.write_text(
            content if isinstance(content, str) else json.dumps(content), encoding="utf-8"
        )
        return str(path)

    return write


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    return subprocess.run(
        [sys.executable, "manage.py", "verifiers", *args],
        cwd=ROOT,
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_reads_the_output_from_stdin(files):
    completed = run_cli(
        "score", "--spec", files("spec.json", SPEC), "--output", "-", stdin="money back"
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["score"] == 1.0


def test_an_invalid_spec_exits_2_with_one_line_naming_the_file_and_field(files):
    bad = {
        "id": "x",
        "checks": [{"type": "contains"}, {"type": "regex", "params": {"pattern": "("}}],
    }
    path = files("bad.json", bad)
    completed = run_cli("score", "--spec", path, "--output", "-", stdin="x")
    assert completed.returncode == 2
    assert completed.stdout == ""
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1
    assert (
        lines[0]
        == f"CommandError: {path}: checks[0].params.value: is required (and 1 more problem)"
    )


def test_a_file_that_is_not_json_exits_2_with_one_line(files):
    path = files("broken.json", "{ nope")
    completed = run_cli("score", "--spec", path, "--output", "-")
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        f"CommandError: {path}: not valid JSON (Expecting property name enclosed in double quotes: line 1 column 3 (char 2))"
    ]


def test_it_prints_every_problem_with_its_field_path_and_exits_2(files):
    bad = files(
        "bad.json",
        {
            "id": "x",
            "passTreshold": 1,
            "checks": [{"type": "contains"}, {"type": "json_keys", "params": {"keys": []}}],
        },
    )
    good = files("good.json", SPEC)
    completed = run_cli("lint", bad, good)
    assert completed.returncode == 2  # an invalid spec, as for every subcommand
    assert completed.stdout.splitlines() == [
        f"{bad}: passTreshold: unknown field",
        f"{bad}: checks[0].params.value: is required",
        f"{bad}: checks[1].params.keys: must not be empty",
        f"{good}: ok",
    ]
    assert completed.stderr.strip() == "CommandError: 3 problems found"
