"""Re-scoring a finished run in a real browser: from the run page, edit the
run's own verifier in the form, watch the worker score the stored outputs,
see the ranking change beside the original, switch between the scorings, and
launch a new run from the new best under the edited verifier."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import E2E_USERNAME

pytestmark = pytest.mark.e2e

MAKE_RUN = """
from django.contrib.auth import get_user_model
from tests.factories import REFUND_POLICY, recorded_run
owner = get_user_model().objects.get(username="{username}")
run = recorded_run(owner, candidates=12, val_tasks=6, name="rescore me", verifiers=(REFUND_POLICY,))
print(run.pk)
"""
# The run's verifier edited down to quoting the order number, as a regex: another
# ranking, with another best (#2 where the original's is #5).
EDITED = {
    "id": "refund-order",
    "name": "Order number only",
    "kind": "native",
    "checks": [{"id": "order", "type": "regex", "params": {"pattern": r"order #\d+"}}],
}


@pytest.fixture(scope="module")
def finished_run(frontier_server) -> int:
    out = frontier_server.manage("shell", "-c", MAKE_RUN.format(username=E2E_USERNAME)).stdout
    return int(out.strip().splitlines()[-1])


def test_rescoring_a_finished_run_with_an_edited_verifier_changes_the_ranking(page, finished_run):
    page.goto(f"/runs/{finished_run}/")
    switch = page.locator("[data-field=scorings]")
    expect(switch).to_contain_text("original")
    switch.locator("[data-action=rescore]").click()

    spec = page.locator("textarea[name=spec]")
    expect(spec).to_contain_text('"id": "refund-policy"')  # starts from the run's own verifier
    spec.fill(
        json.dumps({**EDITED, "checks": [{"id": "w", "type": "regex", "params": {"pattern": "("}}]})
    )
    page.locator("input[name=name]").fill("window only")
    page.locator("[data-action=start-rescore]").click()
    expect(page.locator("[data-field=problems]")).to_contain_text("spec.checks[0].params.pattern")

    page.locator("textarea[name=spec]").fill(json.dumps(EDITED))
    page.locator("[data-action=start-rescore]").click()

    ranking = page.locator("[data-field=ranking]")
    expect(ranking).to_be_visible(timeout=60_000)  # the page reloads once the worker is done
    expect(page.locator("h1")).to_contain_text("window only")
    rows = ranking.locator("tbody tr")
    expect(rows).to_have_count(12)
    pairs = [
        (
            row.locator("[data-field=rank]").inner_text(),
            row.locator("[data-field=original-rank]").inner_text(),
        )
        for row in rows.all()
    ]
    assert any(new != old.rstrip(" ★") for new, old in pairs), pairs
    expect(page.locator("[data-field=best]")).to_contain_text("original")

    best = page.locator("[data-field=best] a").inner_text().lstrip("#")
    original_best = page.locator("[data-field=original-best] a").inner_text().lstrip("#")
    assert best != original_best  # the edited verifier crowns another candidate
    scores = {
        row.get_attribute("data-index"): row.locator("[data-field=score]").inner_text()
        for row in rows.all()
    }

    # The run page switches its candidate table to the scoring, kept in the URL, and back.
    page.goto(f"/runs/{finished_run}/")
    table = page.locator("#candidate-rows")
    expect(table.locator(f"tr[data-candidate-index='{original_best}'] .front-mark")).to_have_text(
        "best"
    )
    page.locator("[data-field=scorings] a", has_text="window only").click()
    expect(page).to_have_url(re.compile(rf"/runs/{finished_run}/\?scoring=\d+$"))
    expect(page.locator("[data-field=scoring-shown]")).to_contain_text(
        "Scores: re-scoring ‘window only’"
    )
    expect(page.locator("[data-field=scoring-charts-note]")).to_be_visible()
    expect(page.locator("[data-field=scoring-best]")).to_contain_text(f"#{best}")
    new_best_row = table.locator(f"tr[data-candidate-index='{best}']")
    expect(new_best_row.locator(".front-mark")).to_have_text("best")
    expect(new_best_row.locator(".val-score")).to_contain_text(f"{scores[best]} · rank 1")
    expect(
        table.locator(f"tr[data-candidate-index='{original_best}'] .front-mark")
    ).not_to_have_text("best")
    page.reload()  # the URL keeps the scoring
    expect(new_best_row.locator(".front-mark")).to_have_text("best")
    page.locator("[data-field=scorings] a", has_text="original").click()
    expect(page).to_have_url(re.compile(rf"/runs/{finished_run}/$"))
    expect(page.locator("[data-field=scoring-shown]")).to_have_count(0)
    expect(table.locator(f"tr[data-candidate-index='{original_best}'] .front-mark")).to_have_text(
        "best"
    )
    expect(new_best_row.locator(".val-score")).not_to_contain_text("rank")

    # Launch from the new best under the edited verifier: the fork form is prefilled.
    page.goto(page.locator("[data-field=scorings] a", has_text="window only").get_attribute("href"))
    page.locator("[data-field=scoring-shown] a", has_text="its page").click()
    page.locator("[data-action=fork-from-scoring]").click()
    expect(page).to_have_url(
        re.compile(rf"/runs/new/\?fork={finished_run}&candidate={best}&verifiers=refund-order$")
    )
    prefill = json.loads(page.locator("#launch-prefill").text_content())
    assert prefill["verifier_ids"] == ["refund-order"]


MAKE_SCORING = """
from optimizer.models import Run
from optimizer.scorings.execute import scoring_execute
from optimizer.scorings.services import scoring_create
run = Run.objects.get(pk={run})
scoring = scoring_create(run=run, user=run.owner, specs=[{spec}], source=[{{"edited": True}}], name="order only")
assert scoring_execute(scoring.pk) == "done"
print(scoring.pk)
"""


def test_the_run_page_switched_to_a_rescoring_compares_under_it(page, frontier_server):
    out = frontier_server.manage("shell", "-c", MAKE_RUN.format(username=E2E_USERNAME)).stdout
    run = int(out.strip().splitlines()[-1])
    out = frontier_server.manage(
        "shell", "-c", MAKE_SCORING.format(run=run, spec=json.dumps(EDITED))
    ).stdout
    scoring = int(out.strip().splitlines()[-1])

    page.goto(f"/runs/{run}/?scoring={scoring}")
    table = page.locator("#candidate-rows")
    for index in (0, 2):
        table.locator(f"tr[data-candidate-index='{index}'] input").check()
    page.locator("[data-action=compare]").click()

    expect(page).to_have_url(re.compile(rf"/runs/{run}/compare/\?c=0&c=2&scoring={scoring}$"))
    expect(page.locator("[data-field=scoring-shown]")).to_contain_text(
        "Scores: re-scoring ‘order only’ (val)"
    )
    expect(page.locator("[data-field=scorings] strong")).to_have_text("order only")
    page.locator("[data-field=scorings] a", has_text="original").click()
    expect(page).to_have_url(re.compile(rf"/runs/{run}/compare/\?c=0&c=2$"))
    expect(page.locator("[data-field=scoring-shown]")).to_have_count(0)
