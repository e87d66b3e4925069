"""Commits read `area: summary` in at most 72 characters, with a body that says
why (and the figures): the rule holds for every commit from the first one
written under it on; merge commits name what they merge and are left out."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIRST_UNDER_THE_RULE = "9e6a78c7dd91de1813bb47db70ece1f66f6531e2"
SUBJECT = re.compile(r"[a-z0-9][a-z0-9/._-]*(, [a-z0-9][a-z0-9/._-]*)*: \S.*")


def problems(log: str) -> list[str]:
    """What is wrong with each commit of `git log --format=%h%x00%s%x00%b%x1e` output."""
    found = []
    for entry in filter(str.strip, log.split("\x1e")):
        short, subject, body = [*entry.strip("\n").split("\x00"), "", ""][:3]
        if not SUBJECT.fullmatch(subject):
            found.append(f"{short}: subject is not `area: summary`: {subject!r}")
        if len(subject) > 72:
            found.append(f"{short}: subject is {len(subject)} characters (72 at most): {subject!r}")
        if not body.strip():
            found.append(f"{short}: no body (say why, with the figures): {subject!r}")
    return found


def history() -> str:
    if not (ROOT / ".git").exists():
        if os.environ.get("CI"):
            pytest.fail("CI runs in a git clone: no .git found")
        pytest.skip("not a git checkout (an unpacked source tree)")
    if subprocess.run(
        ["git", "cat-file", "-e", FIRST_UNDER_THE_RULE], cwd=ROOT, capture_output=True
    ).returncode:
        pytest.skip("a shallow clone without the first commit under the rule")
    return subprocess.run(
        [
            "git",
            "log",
            "--no-merges",
            "--format=%h%x00%s%x00%b%x1e",
            f"{FIRST_UNDER_THE_RULE}^..HEAD",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_every_commit_since_the_rule_reads_area_summary_with_a_body():
    assert problems(history()) == []


def test_a_long_subject_without_an_area_and_without_a_body_is_reported_three_times():
    log = "abc1234\x00Fix the thing that broke when the worker died and the run was left hanging forever ok\x00\x1e"
    found = problems(log)
    assert len(found) == 3 and all(p.startswith("abc1234: ") for p in found)
    assert (
        "not `area: summary`" in found[0] and "85 characters" in found[1] and "no body" in found[2]
    )
    assert problems("def5678\x00web: serve with uvicorn\x00Why: flow control.\n\x1e") == []
