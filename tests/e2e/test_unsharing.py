"""Unsharing a run in the admin ends the other user's open live page at once:
their socket is closed and the page says "access denied" (it kept receiving
events before)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import E2E_USERNAME, login

pytestmark = pytest.mark.e2e

WATCHER_PASSWORD = "watcher-password-123"
SEED = """
from django.contrib.auth import get_user_model
from tests.factories import recorded_run
User = get_user_model()
owner = User.objects.get(username={owner!r})
watcher = User.objects.create_user("watcher", password={password!r})
run = recorded_run(owner, candidates=3, val_tasks=3, holdout_tasks=0, name="shared then unshared", task_prefix="val-")
run.shared_with.add(watcher)
print(run.pk)
"""


def test_unsharing_a_run_in_the_admin_shows_access_denied_on_the_other_users_open_page(browser, frontier_server, page):
    run_id = int(frontier_server.manage("shell", "-c", SEED.format(owner=E2E_USERNAME, password=WATCHER_PASSWORD))
                 .stdout.strip().splitlines()[-1])
    context = browser.new_context(base_url=frontier_server.url)
    watcher = context.new_page()
    login(watcher, "watcher", WATCHER_PASSWORD)
    watcher.goto(f"/runs/{run_id}/")
    live = watcher.locator("[data-field=live]")
    expect(live).to_have_attribute("data-state", "live")

    page.goto(f"/admin/optimizer/run/{run_id}/change/")  # the admin (the e2e user) unshares it
    page.select_option("#id_shared_with", [])
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text("changed successfully")

    expect(live).to_have_attribute("data-state", "denied", timeout=10_000)
    expect(live).to_have_text("access denied: reload to log in")
    context.close()
