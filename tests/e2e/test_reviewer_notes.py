"""Reviewer notes GEPA reads, as users write them: in a real browser on a live
run's page (the trials stream's "Note for GEPA"), seen live on another open
page of the run; and by a script with only a token, through /api/runs/<id>/notes.
Both watch a later proposal of the running demo run say it read the note."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import E2E_USERNAME, Api
from tests.e2e.test_api_scripts import import_tasks, run_status
from tests.e2e.test_live_run import SEED_DATA, launch_demo_run
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

FINISHED = ("completed", "stopped", "failed")
# A check no output meets (a regex is no phrase the simulated reflection can learn):
# no minibatch is ever perfect, so gepa reflects every iteration (it skips perfect ones).
NEVER = '{{"id": "never", "type": "regex", "params": {{"pattern": "^never$"}}}}'
SHORT = '{{"id": "short", "type": "max_length", "params": {{"value": 600}}}}'
SPEC = {
    "id": "notes-refund",
    "name": "Notes refund",
    "checks": [
        {"type": "contains", "params": {"value": "refund"}},
        {"id": "never", "type": "regex", "params": {"pattern": "^never$"}},
    ],
}


@pytest.fixture(scope="module")
def demo_data(frontier_server):
    """The live-run tests' verifier and tasks, with a check no output meets."""
    seed = SEED_DATA.replace(SHORT, f"{SHORT}, {NEVER}")
    assert seed != SEED_DATA
    frontier_server.manage("shell", "-c", seed.format(username=E2E_USERNAME))


def test_a_note_written_in_a_live_run_s_drill_down_is_listed_everywhere_and_read_by_gepa(
    page, demo_data
):
    """Writes "Note for GEPA" from a minibatch trial; a second open page of the
    run lists the note without a reload, then shows a later proposal that read it."""
    run_id = launch_demo_run(page, budget=2000, latency_ms=250)
    other = page.context.new_page()
    other.goto(f"/runs/{run_id}/")
    expect(other.locator("[data-field=live]")).to_have_text("● live")
    other.evaluate("window.__noReload = true")

    button = page.locator("#stream-trials [data-action=note-for-gepa]").first
    expect(button).to_be_visible(timeout=60_000)
    task_key = button.get_attribute("data-task-key")
    # The live stream prepends trials several times a second: on a loaded machine
    # (slow frames) the click waits longer for a frame in which its button holds still.
    page.locator(
        f"#stream-trials [data-action=note-for-gepa][data-task-key='{task_key}']"
    ).first.click(timeout=60_000)
    editor = page.locator("#note-editor")
    expect(editor.locator("[data-field=note-task]")).to_have_text(task_key)
    editor.get_by_label(f"Note for GEPA on {task_key}").fill('should mention "tracking number"')
    editor.get_by_role("button", name="Save note").click()
    expect(editor.locator("[data-field=note-status]")).to_contain_text("saved")

    listed = other.locator("#notes-list > li")
    expect(listed).to_have_count(1)
    expect(listed.first).to_contain_text(task_key)
    expect(listed.first).to_contain_text('should mention "tracking number"')
    expect(other.locator("[data-field=notes-empty]")).to_be_hidden()
    read = other.locator(
        "#stream-proposals .notes-read", has_text=f"read 1 reviewer note: {task_key}"
    )
    expect(read.first).to_be_visible(timeout=90_000)
    assert other.evaluate("window.__noReload") is True  # the same document: nothing reloaded

    # Removed from the list on one page: gone from the other too, still without a reload.
    page.locator("#notes-list > li").first.get_by_role("button", name="Remove").click()
    expect(other.locator("#notes-list > li")).to_have_count(0)

    # A candidate's page: "Note for GEPA" in a task's row (a val task: it says no
    # reflection of this run reads it), listed live on the run page too.
    candidate = page.context.new_page()
    candidate.goto(f"/runs/{run_id}/candidates/0/")
    box = candidate.locator("details.gepa-note").first
    val_key = box.get_attribute("data-task-key")
    box.locator("summary").click()
    expect(box.locator("[data-field=not-reflected]")).to_be_visible()
    box.get_by_label(f"Note for GEPA on {val_key}").fill("the seed's answer is fine here")
    box.get_by_role("button", name="Save note").click()
    expect(box.locator("[data-field=note-status]")).to_contain_text("saved")
    expect(box.get_by_role("button", name="Remove")).to_be_visible()
    expect(other.locator("#notes-list > li")).to_have_count(1)
    expect(other.locator("#notes-list > li").first).to_contain_text(val_key)
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("[data-field=status]")).to_have_text(re.compile("stopp"))


def test_a_script_with_a_token_writes_edits_and_removes_a_note_that_the_run_reads(
    frontier_server,
):
    api = Api(frontier_server.url, frontier_server.new_token())
    status, body, _ = api.call("POST", "/api/verifiers/", {"spec": SPEC})
    assert status == 201, body
    task_set = import_tasks(api, "notes script tasks")
    config = {
        "task_set_id": task_set,
        "verifier_ids": ["notes-refund"],
        "budget": {"max_metric_calls": 2000},
        "task_lm": {"provider": "demo", "model": "demo-task", "simulated_latency_ms": 150},
    }
    status, run, _ = api.call("POST", "/api/runs/", {"config": config})
    assert status == 201, run
    notes = f"/api/runs/{run['id']}/notes"

    status, body, _ = api.call("POST", notes, {"task_key": "t0", "text": "   "})
    assert status == 400 and [p["field"] for p in body["problems"]] == ["text"], body
    status, body, _ = api.call("POST", notes, {"task_key": "nope", "text": "a note"})
    assert status == 400 and [p["field"] for p in body["problems"]] == ["task_key"], body
    status, note, _ = api.call("POST", notes, {"task_key": "t0", "text": "mention the order"})
    assert status == 201 and note["author"] and note["task_key"] == "t0", note
    status, edited, _ = api.call(
        "PATCH", f"{notes}/{note['id']}", {"text": 'should mention "tracking number"'}
    )
    assert status == 200 and edited["text"] == 'should mention "tracking number"', edited
    status, listed, _ = api.call("GET", notes)
    assert status == 200 and [n["text"] for n in listed["notes"]] == [edited["text"]], listed

    def read_it() -> dict | None:
        _, events, _ = api.call("GET", f"/api/runs/{run['id']}/events?after=0&limit=5000")
        return next(
            (e["data"] for e in events if e["type"] == "proposal" and e["data"].get("notes")),
            None,
        )

    proposal = wait_until(read_it, what="a proposal that read the note", timeout=120)
    # As the note was when that reflection read it (the edit may have come just after).
    [read] = proposal["notes"]
    assert (read["id"], read["task_key"], read["author"]) == (note["id"], "t0", note["author"])
    assert read["text"] in (note["text"], edited["text"])
    assert "t0" in proposal["minibatch"]
    status, document, _ = api.call("GET", f"/api/runs/{run['id']}/export")
    assert status == 200 and [n["text"] for n in document["reviewer_notes"]] == [edited["text"]]

    status, _, _ = api.call("DELETE", f"{notes}/{note['id']}")
    assert status == 204
    assert api.call("GET", notes)[1]["notes"] == []
    status, body, _ = api.call("POST", f"/api/runs/{run['id']}/cancel")
    assert status == 200, body
    wait_until(lambda: run_status(api, run["id"]) in FINISHED, what="the run to end", timeout=60)
    _, events, _ = api.call("GET", f"/api/runs/{run['id']}/events?after=0&limit=5000")
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    types = [e["type"] for e in events]
    assert types.count("note.saved") == 2 and types.count("note.deleted") == 1
