"""Comments, docstrings and docs cite only what is in the repository: the
facts about gepa live in docs/gepa-notes.md, the scoring rules (once in
outside "seed" documents) in docs/verifier-semantics.md, the design in
docs/architecture.md. A citation of an outside document (GEPA_NOTES,
ARCHITECTURE.md, "seed 00n", an issue number) fails here, and so does one of a
docs page, section or § number that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIRS = (
    "dashboard",
    "optimizer",
    "verifiers_app",
    "templates",
    "static",
    "tests",
    "bench",
    "examples",
    "clients",
    "docs",
)
TOP_FILES = (
    "README.md",
    "pyproject.toml",
    "Makefile",
    "Dockerfile",
    "docker-compose.yml",
    ".ci/run",
)
SUFFIXES = {".py", ".js", ".html", ".css", ".md", ".toml", ".yaml", ".yml", ".txt", ".cfg"}

OUTSIDE = re.compile(r"GEPA_NOTES|ARCHITECTURE(?:\.md)?\b|(?i:\bseeds? 00\d|\bissues? #?\d+)")
DOC_CITATION = re.compile(r"(docs/[\w.-]+\.md)(?:,? §(\d+)| \"([^\"]+)\"| ?\(?\"([^\"]+)\")?")
README_CITATION = re.compile(r"README\s+(?:'s\s+)?\"([^\"]+)\"")
THIS_FILE = Path(__file__).resolve()


def sources() -> list[Path]:
    found = [ROOT / name for name in TOP_FILES if (ROOT / name).is_file()]
    for directory in SOURCE_DIRS:
        for path in sorted((ROOT / directory).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and "node_modules" not in path.parts:
                found.append(path)
    return [p for p in found if p.resolve() != THIS_FILE]


def headings(doc: Path) -> list[str]:
    return [
        line.lstrip("#").strip() for line in doc.read_text().splitlines() if line.startswith("#")
    ]


def where(path: Path, text: str, index: int) -> str:
    return f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, index) + 1}"


def test_no_comment_or_doc_cites_a_document_outside_the_repository():
    found = []
    for path in sources():
        text = path.read_text(errors="replace")
        found += [f"{where(path, text, m.start())}: {m.group(0)!r}" for m in OUTSIDE.finditer(text)]
    assert not found, "cite docs/… (or say it in the docstring) instead of:\n" + "\n".join(found)


def test_every_docs_citation_names_a_page_section_or_fact_that_exists():
    broken = []
    for path in sources():
        text = path.read_text(errors="replace")
        for m in DOC_CITATION.finditer(text):
            doc, number, section = ROOT / m.group(1), m.group(2), m.group(3) or m.group(4)
            if not doc.is_file():
                broken.append(f"{where(path, text, m.start())}: {m.group(1)} does not exist")
            elif number and f"**§{number}.**" not in doc.read_text():
                broken.append(f"{where(path, text, m.start())}: {m.group(1)} has no §{number}")
            elif section and not any(h.startswith(section) for h in headings(doc)):
                broken.append(
                    f"{where(path, text, m.start())}: {m.group(1)} has no section {section!r}"
                )
        for m in README_CITATION.finditer(text):
            if not any(h.startswith(m.group(1)) for h in headings(ROOT / "README.md")):
                broken.append(
                    f"{where(path, text, m.start())}: README has no section {m.group(1)!r}"
                )
    assert not broken, "\n".join(broken)


def test_the_checks_catch_what_they_are_meant_to():
    assert OUTSIDE.search("resume (GEPA_NOTES 6)") and OUTSIDE.search("rows as in Seed 001")
    assert OUTSIDE.search("the plan (issue 14, point 4)") and OUTSIDE.search(
        'ARCHITECTURE "Data model"'
    )
    assert not OUTSIDE.search("docs/gepa-notes.md §6, random seed 0, an issue of the API")
    m = DOC_CITATION.search('see docs/verifier-semantics.md "Row verifiers".')
    assert m.group(1) == "docs/verifier-semantics.md" and m.group(3) == "Row verifiers"
    assert DOC_CITATION.search("(docs/gepa-notes.md §12)").group(2) == "12"
