"""Two users steer one live demo run in Chromium, each in a browser of their own:
the owner and a user the run is shared with steering rights. The owner pauses;
the other's open page turns to "paused" with no reload; meanwhile that user adds
an edited candidate and writes a reviewer note; the owner resumes and both pages
see the human candidate and the note arrive, still without a reload. A user the
run is shared with read-only is offered none of it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import E2E_USERNAME, login, wait_for_js
from tests.e2e.test_inject_candidate import HUMAN_ROWS
from tests.e2e.test_live_run import SEED_DATA, launch_demo_run, state
from tests.e2e.test_reviewer_notes import NEVER, SHORT
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

PASSWORD = "steering-password-123"
STEERER, WATCHER = "steerer", "watcher"
USERS = """
from django.contrib.auth import get_user_model
for name in ({steerer!r}, {watcher!r}):
    get_user_model().objects.create_user(name, password={password!r})
"""
SHARE = """
from django.contrib.auth import get_user_model
from optimizer.models import Run
User = get_user_model()
run = Run.objects.get(pk={run_id})
run.steered_by.add(User.objects.get(username={steerer!r}))
run.shared_with.add(User.objects.get(username={watcher!r}))
"""
EDITED = 'Answer refund questions. Always include "30 days" and ask for a receipt.'


@pytest.fixture(scope="module")
def demo_data(frontier_server):
    """The live-run tests' verifier and tasks, with a check no output meets (so
    every iteration reflects and the run never runs out of things to try), and
    the two other users."""
    seed = SEED_DATA.replace(SHORT, f"{SHORT}, {NEVER}")
    assert seed != SEED_DATA
    frontier_server.manage("shell", "-c", seed.format(username=E2E_USERNAME))
    frontier_server.manage(
        "shell", "-c", USERS.format(steerer=STEERER, watcher=WATCHER, password=PASSWORD)
    )


def open_as(browser, frontier_server, username: str, path: str):
    context = browser.new_context(
        base_url=frontier_server.url, viewport={"width": 1400, "height": 1000}
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    login(page, username, PASSWORD)
    page.goto(path)
    expect(page.locator("[data-field=live]")).to_have_text("● live")
    return page


def test_the_owner_and_a_steering_sharer_pause_inject_annotate_and_resume_one_live_run(
    browser, frontier_server, page, demo_data
):
    """The owner's Pause reaches the sharer's open page as "paused" with Resume;
    while paused the sharer adds an edited candidate (its page's dialog) and a
    note on a train task (the Trials stream's "Note for GEPA"); the owner's
    Resume applies the candidate at the next boundary and both open pages show
    it (origin human, by the sharer) and the note. The read-only sharer's page
    offers no Pause, Resume, Stop, "Edit and add to run" or note editor."""
    run_id = launch_demo_run(page, budget=2000, latency_ms=400)
    frontier_server.manage(
        "shell", "-c", SHARE.format(run_id=run_id, steerer=STEERER, watcher=WATCHER)
    )
    owner = page
    steerer = open_as(browser, frontier_server, STEERER, f"/runs/{run_id}/")
    watcher = open_as(browser, frontier_server, WATCHER, f"/runs/{run_id}/")
    try:
        for other in (steerer, watcher):
            other.evaluate("window.__noReload = true")

        # The read-only sharer: nothing to steer with, on the run page or a candidate's.
        for name in ("Pause", "Resume", "Stop", "Cancel"):
            expect(watcher.get_by_role("button", name=name)).to_have_count(0)
        expect(watcher.locator("#stream-trials > li").first).to_be_visible(timeout=60_000)
        expect(watcher.locator("[data-action=note-for-gepa]")).to_have_count(0)
        candidate = watcher.context.new_page()
        candidate.goto(f"/runs/{run_id}/candidates/0/")
        expect(candidate.locator("#scores")).to_be_visible()
        expect(candidate.get_by_role("button", name="Edit and add to run")).to_have_count(0)
        expect(candidate.locator("details.gepa-note textarea").first).to_be_hidden()
        expect(candidate.get_by_role("button", name="Save note")).to_have_count(0)
        candidate.close()

        # The owner pauses; the sharer's open page follows.
        wait_until(lambda: state(owner)["points"] >= 1, what="the seed candidate")
        owner.get_by_role("button", name="Pause").click()
        expect(owner.locator("[data-field=status]")).to_have_text("paused", timeout=60_000)
        expect(steerer.locator("[data-field=status]")).to_have_text("paused")
        expect(steerer.locator("[data-field=phase]")).to_have_text(f"paused by {E2E_USERNAME}")
        expect(steerer.get_by_role("button", name="Resume")).to_be_visible()
        expect(steerer.get_by_role("button", name="Pause")).to_be_hidden()
        paused_points = state(owner)["points"]

        # While paused, the sharer adds an edited candidate from the seed's page...
        editor = steerer.context.new_page()
        editor.goto(f"/runs/{run_id}/candidates/0/")
        editor.get_by_role("button", name="Edit and add to run").click()
        dialog = editor.locator("#inject-dialog")
        expect(dialog.locator("[data-field=inject-cost]")).to_contain_text("4 metric calls")
        dialog.locator("textarea[data-component=instructions]").fill(EDITED)
        dialog.get_by_role("button", name="Add to run").click()
        expect(dialog.locator("[data-field=inject-result]")).to_contain_text("Added")
        editor.close()
        # ...and a note on a train task, from a minibatch trial on the run page.
        trial = steerer.locator("#stream-trials > li", has_text="· train ·").first
        expect(trial).to_be_visible()
        button = trial.locator("[data-action=note-for-gepa]")
        expect(button).to_be_visible()
        task_key = button.get_attribute("data-task-key")
        button.click()
        notes = steerer.locator("#note-editor")
        notes.get_by_label(f"Note for GEPA on {task_key}").fill('say "30 days" first')
        notes.get_by_role("button", name="Save note").click()
        expect(notes.locator("[data-field=note-status]")).to_contain_text("saved")
        # Nothing ran meanwhile: the candidate waits for the next iteration boundary.
        assert state(owner)["points"] == paused_points
        expect(owner.locator("[data-field=status]")).to_have_text("paused")

        owner.get_by_role("button", name="Resume").click()
        expect(owner.locator("[data-field=status]")).to_have_text("running", timeout=30_000)
        expect(steerer.locator("[data-field=status]")).to_have_text("running")
        for viewer in (owner, steerer, watcher):
            rows = wait_for_human_rows(viewer)
            assert len(rows) == 1, rows
            assert rows[0][1].startswith(f"human · edited from #0 by {STEERER}"), rows
            listed = viewer.locator("#notes-list > li")
            expect(listed).to_have_count(1)
            expect(listed.first).to_contain_text(task_key)
            expect(listed.first).to_contain_text('say "30 days" first')
        for other in (steerer, watcher):
            assert other.evaluate("window.__noReload") is True  # the same document all along
    finally:
        steerer.context.close()
        watcher.context.close()
    owner.once("dialog", lambda dialog: dialog.accept())
    owner.get_by_role("button", name="Cancel").click()
    expect(owner.locator("[data-field=status]")).to_have_text(re.compile("stopp"), timeout=60_000)


def wait_for_human_rows(viewer) -> list:
    return wait_for_js(viewer, HUMAN_ROWS, timeout=60, what="the human candidate's row")
