"""Unsharing a run in the admin ends the other user's open live page at once
(their socket is closed and the page says "access denied") and takes the run
off their open runs list."""

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


def test_unsharing_a_run_in_the_admin_shows_access_denied_on_the_other_users_open_page(
    browser, frontier_server, page
):
    run_id = int(
        frontier_server.manage(
            "shell", "-c", SEED.format(owner=E2E_USERNAME, password=WATCHER_PASSWORD)
        )
        .stdout.strip()
        .splitlines()[-1]
    )
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


def test_unsharing_a_run_removes_it_from_the_other_users_open_runs_list_at_once(
    browser, frontier_server, page
):
    """The row goes as the run socket closes, not at the list's next check of who may see what."""
    seed = SEED.replace('create_user("watcher"', 'create_user("list-watcher"')
    run_id = int(
        frontier_server.manage(
            "shell", "-c", seed.format(owner=E2E_USERNAME, password=WATCHER_PASSWORD)
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    context = browser.new_context(base_url=frontier_server.url)
    watcher = context.new_page()
    login(watcher, "list-watcher", WATCHER_PASSWORD)
    watcher.goto("/runs/")
    expect(watcher.locator("[data-field=live]")).to_have_attribute("data-state", "live")
    row = watcher.locator(f"#runs-table tr[data-run-id='{run_id}']")
    expect(row).to_have_count(1)

    page.goto(f"/admin/optimizer/run/{run_id}/change/")
    page.select_option("#id_shared_with", [])
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text("changed successfully")

    expect(row).to_have_count(0, timeout=5_000)
    context.close()
