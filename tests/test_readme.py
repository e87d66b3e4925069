"""The README is the front door: what Frontier is, a screenshot, how to start,
a tour and where to go next. The reference lives in docs/, and the README
links every page of it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_it_stays_a_front_door_of_at_most_15_kb():
    size = README.stat().st_size
    assert size <= 15 * 1024, f"README.md is {size} bytes: move reference material to docs/"


def test_it_links_every_docs_page():
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", README.read_text()))
    pages = {path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").glob("*.md")}
    assert pages - linked == set(), "pages the README's Documentation list does not link"
    assert linked - pages == set(), "links to pages that do not exist"


def test_every_image_it_shows_exists_and_is_small():
    images = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", README.read_text())
    assert images
    for image in images:
        path = ROOT / image
        assert path.is_file(), image
        assert path.stat().st_size <= 300 * 1024, f"{image} is over 300 KB"
