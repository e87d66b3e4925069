"""Edit and add a candidate in a real browser against a real server: from a
candidate page of a live demo run, the dialog says what it costs, the edited
candidate is submitted (session, CSRF) and arrives in the open run page's table
and proposals log without a reload, as origin human with a diff link; once the
run has ended the same dialog is refused and offers a fork from the text."""

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import E2E_USERNAME, Api, wait_for_js
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

SEED_DATA = """
from django.contrib.auth import get_user_model
from optimizer.tasksets.models import Task, TaskSet
from verifiers_app.services import verifier_create
owner = get_user_model().objects.get(username={username!r})
verifier_create(owner=owner, spec={{"id": "e2e-inject", "name": "E2E inject", "kind": "native",
    "checks": [{{"id": "mentions", "type": "task_expectations"}}]}})
task_set = TaskSet.objects.create(owner=owner, name="e2e inject refunds")
for i in range(8):
    Task.objects.create(task_set=task_set, task_id=f"q{{i}}", position=i, split="train" if i < 4 else "val",
        input=f"Customer {{i}} asks whether order {{i}} can be refunded.",
        metadata={{"expectations": {{"mustMention": [{{"text": "30 days", "message": "State the refund window"}}]}}}})
print(task_set.pk)
"""

HUMAN_ROWS = """() => [...document.querySelectorAll('#candidate-rows tr')]
  .filter((tr) => tr.children[2].textContent.startsWith('human'))
  .map((tr) => [Number(tr.dataset.candidateIndex), tr.children[2].textContent,
                tr.querySelector('a.diff-link')?.getAttribute('href')])"""


@pytest.fixture(scope="module")
def task_set_id(frontier_server) -> int:
    out = frontier_server.manage("shell", "-c", SEED_DATA.format(username=E2E_USERNAME))
    return int(out.stdout.strip().splitlines()[-1])


def test_a_candidate_edited_on_its_page_joins_the_live_run_without_a_reload(
    page, frontier_server, task_set_id
):
    api = Api(frontier_server.url, frontier_server.new_token())
    config = {
        "task_set_id": task_set_id,
        "verifier_ids": ["e2e-inject"],
        "budget": {"max_metric_calls": 400},
        "task_lm": {"provider": "demo", "model": "demo-task", "simulated_latency_ms": 500},
    }
    status, run, _ = api.call("POST", "/api/runs/", {"config": config})
    assert status == 201, run
    run_id = run["id"]
    wait_until(
        lambda: api.call("GET", f"/api/runs/{run_id}/candidates/0")[0] == 200,
        what="the seed to be recorded",
        timeout=60,
    )

    page.goto(f"/runs/{run_id}/")
    expect(page.locator("[data-field=live]")).to_have_text("● live")

    editor = page.context.new_page()
    editor.goto(f"/runs/{run_id}/candidates/0/")
    editor.get_by_role("button", name="Edit and add to run").click()
    dialog = editor.locator("#inject-dialog")
    expect(dialog.locator("[data-field=inject-cost]")).to_contain_text(
        "Evaluating it on the 4 val tasks costs 4 metric calls;"
    )
    dialog.locator("textarea[data-component=instructions]").fill(
        'Answer refund questions. Always include "30 days" as the refund window.'
    )
    dialog.get_by_role("button", name="Add to run").click()
    expect(dialog.locator("[data-field=inject-result]")).to_contain_text("Added")

    # The run page, open all along, shows it arrive: a table row and the proposals log.
    rows = wait_for_js(page, HUMAN_ROWS, timeout=60, what="the human candidate's row")
    index, origin, diff = rows[0]
    assert origin.startswith(f"human · edited from #0 by {E2E_USERNAME}")
    assert diff == f"/runs/{run_id}/compare/?c=0&c={index}"
    expect(page.locator("#stream-proposals li.injection-applied")).to_contain_text(f"→ #{index}")

    # The run ends; the same dialog is refused with the reason and offers a fork.
    assert api.call("POST", f"/api/runs/{run_id}/stop")[0] == 200
    wait_until(
        lambda: api.call("GET", f"/api/runs/{run_id}")[1]["status"] in ("completed", "stopped"),
        what="the run to end",
        timeout=120,
    )
    editor.goto(f"/runs/{run_id}/candidates/{index}/")
    expect(editor.locator("[data-field=origin]")).to_contain_text(f"by {E2E_USERNAME}")
    editor.get_by_role("button", name="Edit and add to run").click()
    dialog = editor.locator("#inject-dialog")
    dialog.locator("textarea[data-component=instructions]").fill("Say 30 days twice.")
    dialog.get_by_role("button", name="Add to run").click()
    expect(dialog.locator("[data-field=inject-result]")).to_contain_text("has ended")
    fork = dialog.get_by_role("link", name="Fork with this text")
    expect(fork).to_be_visible()
    fork.click()
    editor.wait_for_url(lambda url: "/runs/new/" in url)
    expect(editor.locator("[data-field=fork-note]")).to_contain_text(
        f"your edit of candidate #{index}"
    )
    expect(editor.locator("textarea[name='component.text']")).to_have_value("Say 30 days twice.")
    editor.close()
