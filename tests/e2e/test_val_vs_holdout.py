"""Held-out by default, as a newcomer meets it: a task file with no splits,
imported with the CLI, gets a holdout split by the stated rule; a demo run
launched from the form plans the held-out evaluation on its own line; the run
page's "Val vs held-out" panel says it waits for the end, fills in live when
the held-out scores arrive over the websocket, flags the val lift it cannot
confirm, and shows the same from the database after a reload."""

import json
import re

import pytest
from playwright.sync_api import expect

from optimizer.examples import EXAMPLES_DIR
from tests.e2e.conftest import ARTIFACTS, E2E_USERNAME
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

SET_NAME = "e2e held-out refunds"
PANEL = """() => {
  const panel = document.getElementById('val-vs-holdout');
  const row = (split) => [...panel.querySelectorAll(`tr[data-split=${split}] td`)].map((td) => td.textContent.trim());
  return {state: panel.dataset.state, verdict: panel.dataset.verdict, val: row('val'), holdout: row('holdout'),
          message: panel.querySelector('[data-field=vh-verdict]').textContent.trim(),
          budget: document.querySelector('[data-field=holdout-budget]').textContent.trim()};
}"""


@pytest.fixture(scope="module")
def imported(frontier_server, tmp_path_factory):
    """The refund example's 20 tickets without their split field, as a user's own file would be."""
    rows = [
        json.loads(line)
        for line in (EXAMPLES_DIR / "tasks" / "refund-tickets.jsonl").read_text().splitlines()
        if line.strip()
    ]
    path = tmp_path_factory.mktemp("held-out") / "tickets.jsonl"
    path.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "split"}) + "\n" for r in rows)
    )
    frontier_server.manage(
        "verifiers", "create", str(EXAMPLES_DIR / "verifiers" / "refund-policy-quality.json")
    )
    return frontier_server.manage(
        "tasks", "import", str(path), "--set", SET_NAME, "--owner", E2E_USERNAME
    ).stdout


def test_an_unsplit_import_is_held_out_by_the_rule_and_the_run_page_checks_the_val_lift_live(
    page, imported
):
    assert imported.strip().endswith(
        "20 rows without a split dealt by the rule: 50/30/20 from 10 rows, seed 0 "
        "(10 train, 6 val, 4 holdout)"
    )
    page.goto("/runs/new/")
    page.get_by_label("Task set").select_option(label=f"{SET_NAME} (20 tasks)")
    page.locator("[name=verifier_ids][value=refund-policy-quality]").check()
    expect(
        page.get_by_label("Evaluate seed and best on the held-out split at the end")
    ).to_be_checked()
    page.get_by_label("Simulator latency (ms per call, demo only)").fill("300")
    page.locator("[name='budget.preset']").select_option(label="exact number of metric calls")
    page.get_by_label("Exact metric calls").fill("90")
    plan = page.locator("[data-field=plan]")
    expect(plan).to_contain_text("90 metric calls")
    expect(plan).to_contain_text(
        "at the end: seed and best on the holdout split, 8 evaluations (2 × 4 tasks), not metric calls"
    )
    page.get_by_role("button", name="Launch", exact=True).click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    expect(page.locator("[data-field=live]")).to_have_text("● live")
    page.evaluate("window.__noReload = true")

    at_first = page.evaluate(PANEL)
    assert at_first["state"] == "pending", at_first
    assert at_first["message"] == (
        "The seed and the best are scored on 4 held-out tasks when the run ends."
    )
    assert at_first["budget"] == "0 of 8 evaluations"

    expect(page.locator("#val-vs-holdout")).to_have_attribute(
        "data-state", "scored", timeout=180_000
    )
    assert page.evaluate("window.__noReload") is True  # filled in live, not by a reload
    live = wait_until(lambda: (p := page.evaluate(PANEL))["verdict"] and p, what="the verdict")
    assert live["val"][0] == "6" and live["holdout"][0] == "4"
    assert re.fullmatch(r"[01]\.\d{3}", live["holdout"][1]), live
    # Four held-out tasks cannot confirm anything: the val lift is flagged, with the reason.
    assert live["verdict"] == "not_confirmed", live
    assert live["message"] == (
        "⚠ Val lift not confirmed on held-out: too few held-out tasks to tell "
        "(4; at least 10 are needed)."
    )
    assert "too few tasks to tell" in live["holdout"][3]
    assert live["budget"] == "8 of 8 evaluations"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "val-vs-holdout.png"), full_page=True)

    page.reload()
    expect(page.locator("[data-field=live]")).to_have_text("● live")
    assert page.evaluate(PANEL) == live  # the database shows what the live page showed
