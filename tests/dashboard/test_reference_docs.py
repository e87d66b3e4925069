"""The generated sections of docs/ (dashboard/reference_docs.py) match their
sources: the event catalogue's models, and each is rewritten in place."""

from __future__ import annotations

import pytest

from dashboard import reference_docs


@pytest.mark.parametrize("name", sorted(reference_docs.SECTIONS))
def test_each_generated_section_is_up_to_date(name):
    file, render = reference_docs.SECTIONS[name]
    current = (reference_docs.ROOT / reference_docs.DOCS / file).read_text()
    assert reference_docs.with_section(current, name, render()) == current, (
        f"docs/{file}: its generated section {name!r} is stale: run `{reference_docs.COMMAND}` and commit the result"
    )


def test_it_rewrites_only_what_lies_between_the_markers():
    page = f"# A page\n\nby hand\n\n{reference_docs.begin_marker('events')}\nold\n{reference_docs.END}\n\nafter\n"
    rewritten = reference_docs.with_section(page, "events", "new\n")
    assert rewritten == page.replace("\nold\n", "\nnew\n")
    assert reference_docs.with_section(rewritten, "events", "new\n") == rewritten


def test_a_page_without_the_markers_is_an_error_naming_them():
    with pytest.raises(ValueError, match="<!-- generated: events"):
        reference_docs.with_section("# no markers\n", "events", "x\n")


def test_check_lists_a_stale_page_and_the_command_to_run(tmp_path, monkeypatch, capsys):
    file, _ = reference_docs.SECTIONS["events"]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / file).write_text(
        f"{reference_docs.begin_marker('events')}\nold\n{reference_docs.END}\n"
    )
    monkeypatch.setattr(reference_docs, "ROOT", tmp_path)
    monkeypatch.setattr(reference_docs, "SECTIONS", {"events": reference_docs.SECTIONS["events"]})
    assert reference_docs.main(["--check"]) == 1
    assert f"docs/{file} is stale: run `{reference_docs.COMMAND}`" in capsys.readouterr().out
    assert reference_docs.main([]) == 0
    assert reference_docs.main(["--check"]) == 0
