"""In a real browser: a run page that explains itself, charts that do
not mislead, no Chart Studio anywhere, readable error pages, the chores of a
runs list and the verifier editor's test cases (a 390 px wide screen and the
keyboard: test_small_screens.py).

Runs are written into the server's database by the factories (through
`manage.py shell`), so their numbers are known."""

import json
import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import ARTIFACTS, E2E_USERNAME, wait_for_js

pytestmark = pytest.mark.e2e

FACTORY_RUN = """
import json
from django.contrib.auth import get_user_model
from tests.factories import recorded_run
owner = get_user_model().objects.get(username={username!r})
run = recorded_run(owner=owner, candidates={candidates}, val_tasks={val_tasks}, name={name!r}, seed={seed}, status={status!r})
best = run.best_candidate
print(json.dumps({{"id": run.pk, "best": best.index if best else None, "task_set": run.task_set_id,
                   "best_text": best.components["system_prompt"] if best else None,
                   "budget_used": run.budget_used,
                   "merges": list(run.candidates.filter(origin="merge").values_list("index", "parents"))}}))
"""


COMPARE_PAIR = """
from django.contrib.auth import get_user_model
from tests.factories import REFUND_POLICY, recorded_run
from verifiers_app.services import verifier_create
owner = get_user_model().objects.get(username={username!r})
verifier = verifier_create(owner=owner, spec=REFUND_POLICY)  # so a fork of these runs can launch
a = recorded_run(owner, name="Pair A", seed=1, candidates=4, val_tasks=6, holdout_tasks=4, task_prefix="val-", verifiers=[REFUND_POLICY])
b = recorded_run(owner, name="Pair B", seed=2, task_set=a.task_set, candidates=4, verifiers=[REFUND_POLICY])
for run in (a, b):  # as run_launch links a run to its verifiers (the runs list filters by them)
    run.verifiers.add(verifier)
print(a.pk, b.pk)
"""


# A run whose one verifier asks more (passThreshold 0.9) than the run's verdict
# (pass ≥ 0.8): every factory output holds "Reply of candidate" (weight 4) and
# never the apology (weight 1), so every task scores 0.800, a verdict pass that
# the verifier fails.
STRICT_RUN = """
from django.contrib.auth import get_user_model
from tests.factories import recorded_run
owner = get_user_model().objects.get(username={username!r})
strict = {{"id": "strict", "name": "Strict", "kind": "native", "passThreshold": 0.9, "checks": [
    {{"id": "reply", "type": "contains", "weight": 4, "params": {{"value": "Reply of candidate"}}}},
    {{"id": "apology", "type": "contains", "params": {{"value": "we are so sorry"}}}}]}}
print(recorded_run(owner, name="Strict verifier", candidates=2, val_tasks=2, verifiers=[strict]).pk)
"""


def make_run(
    server,
    *,
    name: str,
    candidates: int = 12,
    val_tasks: int = 6,
    seed: int = 7,
    status: str = "completed",
) -> dict:
    script = FACTORY_RUN.format(
        username=E2E_USERNAME,
        name=name,
        candidates=candidates,
        val_tasks=val_tasks,
        seed=seed,
        status=status,
    )
    return json.loads(server.manage("shell", "-c", script).stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(frontier_server):
    return {
        "main": make_run(frontier_server, name="Explained run", candidates=14, seed=11),
        "other": make_run(frontier_server, name="Second run", candidates=5, seed=3),
        "lone": make_run(frontier_server, name="Lone seed", candidates=1, val_tasks=3),
        "pair": frontier_server.manage(
            "shell", "-c", COMPARE_PAIR.format(username=E2E_USERNAME)
        ).stdout.split()[-2:],
    }


def open_run(page, run_id: int) -> None:
    page.goto(f"/runs/{run_id}/")
    wait_for_js(
        page, "window.__frontierRun && document.querySelectorAll('#candidate-rows tr').length > 0"
    )
    page.wait_for_load_state("networkidle")


NO_CLOUD = """() => [...document.querySelectorAll('.js-plotly-plot')].map((gd) => ({
  id: gd.id,
  displaylogo: gd._context.displaylogo,
  cloud: gd._context.showSendToCloud || gd._context.showEditInChartStudio,
  links: [...gd.querySelectorAll('a[href]')].map((a) => a.href).filter((h) => /plot\\.?ly/.test(h)),
  studio: gd.querySelectorAll('[data-title*="Chart Studio"], [data-title*="cloud" i], .modebar-btn--logo').length,
  tabbable: [...gd.querySelectorAll('.modebar a, .modebar button')].filter((b) => b.tabIndex >= 0).length,
  bg: gd._fullLayout.plot_bgcolor,
}))"""


def test_no_chart_on_any_page_has_the_plotly_logo_or_a_chart_studio_button(page, runs):
    pages = [f"/runs/{runs['main']['id']}/", "/runs/compare/?a={}&b={}".format(*runs["pair"])]
    seen = 0
    for url in pages:
        page.goto(url)
        wait_for_js(page, "document.querySelectorAll('.js-plotly-plot').length > 0")
        page.wait_for_load_state("networkidle")
        for chart in page.locator(".js-plotly-plot").all():
            chart.hover()  # the toolbar is drawn (and shown) on hover
        charts = page.evaluate(NO_CLOUD)
        assert charts, url
        for chart in charts:
            assert chart["displaylogo"] is False and not chart["cloud"], chart
            assert chart["links"] == [] and chart["studio"] == 0, chart
            assert chart["tabbable"] == 0, chart  # the toolbar is out of the tab order
            assert chart["bg"] == "#ffffff", (
                chart
            )  # one style: no grey plot area on compare-runs either
        seen += len(charts)
    assert seen >= 6
    ARTIFACTS.mkdir(exist_ok=True)
    chart = page.locator(".js-plotly-plot").first
    chart.hover()
    chart.screenshot(path=str(ARTIFACTS / "chart-toolbar-without-chart-studio.png"))
    page.screenshot(path=str(ARTIFACTS / "compare-runs-styled.png"), full_page=True)


def test_the_run_page_says_what_it_shows_and_what_gepa_is_doing(page, runs):
    run = runs["main"]
    open_run(page, run["id"])
    card = page.locator("#run-explainer")
    expect(card.locator("[data-field=best-prompt]")).to_have_text(run["best_text"])
    expect(card.locator("[data-field=best-link]")).to_have_attribute(
        "href", f"/runs/{run['id']}/candidates/{run['best']}/"
    )
    expect(card.locator("[data-field=doing-now]")).to_have_text(re.compile("Finished"))
    expect(card.get_by_text("Seed prompt (where the run started)")).to_be_visible()
    expect(card.locator(".explainer-facts")).to_contain_text(
        "policy"
    )  # a verifier of the factory run, with its weight
    expect(card.locator(".explainer-facts")).to_contain_text("× 1")
    expect(card).to_contain_text("demo simulator")
    card.get_by_text("What the words on this page mean").click()
    for term in ("metric calls", "front (★)", "leads N", "verdicts"):
        expect(card.locator("dt", has_text=term)).to_be_visible()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    card.get_by_role("button", name="Copy", exact=True).click()
    expect(card.get_by_role("button", name="Copied")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "run-page-explainer.png"), full_page=False)


CHARTS = """() => {
  const score = document.getElementById('chart-score'), lineage = document.getElementById('chart-lineage');
  const front = document.getElementById('chart-front');
  const ticks = (gd) => [...gd.querySelectorAll('.xtick text')].map((t) => t.textContent);
  return {
    scoreRange: score._fullLayout.yaxis.range, rejectedAxis: score._fullData[2].yaxis,
    bestLineEnd: score._fullData[1].x[score._fullData[1].x.length - 1],
    lineageRange: lineage._fullLayout.xaxis.range, lineageYRange: lineage._fullLayout.yaxis.range,
    lineageTicks: ticks(lineage),
    mergeEdges: lineage._fullData[2].x.filter((x) => x === null).length,  // one null ends each edge
    frontLegend: front._fullLayout.showlegend && front._fullData[1].name,
  };
}"""


def test_the_charts_keep_scores_on_zero_to_one_and_minibatch_scores_off_the_val_axis(page, runs):
    run = runs["main"]
    open_run(page, run["id"])
    charts = page.evaluate(CHARTS)
    assert charts["scoreRange"] == [0, 1] and charts["lineageYRange"] == [0, 1]
    assert charts["rejectedAxis"] == "y2"
    assert charts["bestLineEnd"] == run["budget_used"]
    assert all(re.fullmatch(r"\d+", t) for t in charts["lineageTicks"]), charts["lineageTicks"]
    assert charts["mergeEdges"] == 2 * len(run["merges"])  # each merge child joined to both parents
    assert "top score" in charts["frontLegend"]
    page.screenshot(path=str(ARTIFACTS / "run-page-charts.png"), full_page=True)

    open_run(page, runs["lone"]["id"])
    lone = page.evaluate(CHARTS)
    assert lone["lineageRange"][0] < 0 < lone["lineageRange"][1] and lone["lineageTicks"][0] == "0"
    assert all(re.fullmatch(r"\d+", t) for t in lone["lineageTicks"]), lone["lineageTicks"]
    assert lone["scoreRange"] == [0, 1]


def test_the_run_page_logs_no_console_error_at_any_width(page, runs):
    """A run with no rejected proposal yet (a lone seed, as a live run starts) has an
    empty minibatch strip under the score chart, whose axis lines Plotly drew at NaN:
    `<path> attribute d: Expected number, "M49,NaNH621"` in the console."""
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    for run in ("lone", "main"):
        for width, height in [(1400, 1000), (800, 900), (390, 844)]:
            page.set_viewport_size({"width": width, "height": height})
            open_run(page, runs[run]["id"])
            assert errors == [], f"{run} run, {width} px wide"


HEATMAP_BOXES = """() => {
  const chart = document.getElementById("chart-front");
  const box = (selector) => { const el = chart.querySelector(selector); if (!el) return null;
    const r = el.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  return {legend: box(".legend"), plot: box(".nsewdrag"), colorbar: box(".colorbar")};
}"""


def _overlap(a, b) -> bool:
    return (
        a["left"] < b["right"]
        and b["left"] < a["right"]
        and a["top"] < b["bottom"]
        and b["top"] < a["bottom"]
    )


def test_the_heatmaps_legend_overlaps_neither_the_heatmap_nor_its_colour_bar(page, runs):
    """The ○ legend of the Pareto-front heatmap sits above the cells at every
    width, clear of the plot area and of the colour bar."""
    for width, height in [(1400, 1000), (800, 900), (390, 844)]:
        page.set_viewport_size({"width": width, "height": height})
        open_run(page, runs["main"]["id"])
        page.locator("#chart-front").scroll_into_view_if_needed()
        expect(page.locator("#chart-front .legend")).to_be_visible()
        boxes = page.evaluate(HEATMAP_BOXES)
        assert boxes["plot"] and boxes["colorbar"], (width, boxes)
        assert not _overlap(boxes["legend"], boxes["plot"]), (width, boxes)
        assert not _overlap(boxes["legend"], boxes["colorbar"]), (width, boxes)


def test_a_missing_page_shows_our_404_not_djangos_debug_page(page, runs):
    response = page.goto("/runs/999999/")
    assert response.status == 404
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    assert "Django" not in page.content() and "DEBUG" not in page.content()
    page.screenshot(path=str(ARTIFACTS / "error-404.png"))
    page.goto("/runs/999999/best/download.txt")
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()


NO_CANDIDATE_RUN = """
from django.contrib.auth import get_user_model
from optimizer.models import Run, RunEvent, run_progress
from tests.factories import recorded_run
run = recorded_run(owner=get_user_model().objects.get(username={username!r}), candidates=1, val_tasks=3,
                name="Failed before the seed was scored", status="failed")
run.candidates.all().delete()
RunEvent.objects.filter(run=run).delete()
Run.objects.filter(pk=run.pk).update(best_candidate=None, best_score=None, seed_score=None)
run_progress(run.pk).update(budget_used=0, last_seq=0)
print(run.pk)
"""


def test_a_run_with_no_candidate_says_so_instead_of_a_best_prompt(page, frontier_server):
    run = {
        "id": int(
            frontier_server.manage(
                "shell", "-c", NO_CANDIDATE_RUN.format(username=E2E_USERNAME)
            ).stdout.split()[-1]
        )
    }
    page.goto(f"/runs/{run['id']}/")
    card = page.locator("#run-explainer")
    expect(card.locator("[data-field=no-best]")).to_have_text(re.compile("No candidate yet"))
    expect(card.locator("[data-field=best-prompt]")).to_be_hidden()
    page.screenshot(path=str(ARTIFACTS / "run-without-candidate.png"))
    response = page.goto(
        f"/runs/{run['id']}/best/download.txt"
    )  # what the "Best prompt .txt" link answers
    assert response.status == 404
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    expect(page.locator(".error-message")).to_have_text(
        f"Run {run['id']} has no scored candidate yet."
    )
    assert "Traceback" not in page.content()
    page.screenshot(path=str(ARTIFACTS / "error-best-prompt-without-candidate.png"))


def test_our_403_page_answers_a_form_whose_csrf_cookie_is_gone(page, runs):
    page.goto("/runs/")
    page.context.clear_cookies(name="csrftoken")
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("heading", name="You may not see this page")).to_be_visible()
    expect(page.locator(".error-message")).to_contain_text("Reload the page and try again")
    assert "Django" not in page.content() and "DEBUG" not in page.content()
    page.screenshot(path=str(ARTIFACTS / "error-403.png"))


def test_the_runs_list_sorts_by_a_heading_and_filters_by_task_set(page, runs):
    page.goto("/runs/")
    page.get_by_role("link", name="Best score").click()
    page.wait_for_url(re.compile(r"sort=-best_score"))
    expect(page.locator("th[data-sort-key=best_score]")).to_have_attribute(
        "aria-sort", "descending"
    )
    best_scores = page.locator(
        "#runs-table tbody tr td:nth-child(3)"
    ).all_inner_texts()  # "–": no score yet
    scores = [float(t.split()[0]) for t in best_scores if t.strip() != "–"]
    assert scores == sorted(scores, reverse=True) and len(scores) >= 5
    page.get_by_role("link", name="Best score").click()
    page.wait_for_url(re.compile(r"sort=best_score"))
    page.locator("#runs-filter select[name=task_set]").select_option(
        value=str(runs["main"]["task_set"])
    )
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(rf"task_set={runs['main']['task_set']}"))
    expect(page.locator("#runs-table tbody tr")).to_have_count(1)
    expect(page.locator("#runs-table tbody tr")).to_contain_text("Explained run")


def rows(page) -> list[str]:
    return [
        name.strip()
        for name in page.locator("#runs-table tbody tr td:first-child a").all_inner_texts()
    ]


OTHER_MODEL_RUN = """
from django.contrib.auth import get_user_model
from tests.factories import recorded_run
run = recorded_run(owner=get_user_model().objects.get(username={username!r}), candidates=2, name="Failed run", status="failed")
run.config["task_lm"] = {{"provider": "openai", "model": "tiny-e2e-model"}}  # not the simulator
run.save(update_fields=["config"])
"""


def test_every_runs_list_heading_sorts_and_status_verifier_and_model_filter(
    page, runs, frontier_server
):
    frontier_server.manage("shell", "-c", OTHER_MODEL_RUN.format(username=E2E_USERNAME))
    page.goto("/runs/")
    keys = page.locator("#runs-table th").evaluate_all(
        "(ths) => ths.map((th) => th.dataset.sortKey)"
    )
    assert len(keys) == 10 and all(keys), keys  # every column has a sort key
    for key in keys:
        page.locator(f"#runs-table th[data-sort-key={key}] a").click()
        page.wait_for_url(re.compile(rf"[?&]sort=-?{key}(&|$)"))
        heading = page.locator(f"#runs-table th[data-sort-key={key}]")
        expect(heading).to_have_attribute("aria-sort", re.compile("ascending|descending"))
        expect(
            page.locator(
                "#runs-table th[aria-sort=ascending], #runs-table th[aria-sort=descending]"
            )
        ).to_have_count(1)
        if key == "name":
            names = rows(page)
            ordered = sorted(names, key=str.casefold)
            assert names in (ordered, ordered[::-1]), names
    page.screenshot(path=str(ARTIFACTS / "runs-list-sorted.png"), full_page=True)

    page.goto("/runs/")
    page.locator("#runs-filter select[name=status]").select_option(value="failed")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"status=failed"))
    assert "Failed run" in rows(page) and "Explained run" not in rows(page), rows(page)
    assert all(s == "failed" for s in page.locator("#runs-table tbody .status").all_inner_texts())

    page.goto("/runs/")
    page.locator("#runs-filter select[name=verifier]").select_option(
        value="refund-policy"
    )  # the pair's verifier only
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"verifier=refund-policy"))
    assert sorted(rows(page)) == ["Pair A", "Pair B"], rows(page)

    page.goto("/runs/")
    page.locator("#runs-filter select[name=model]").select_option(value="tiny-e2e-model")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"model=tiny-e2e-model"))
    assert rows(page) == ["Failed run"], rows(page)
    page.locator("#runs-filter select[name=model]").select_option(value="demo simulator")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"model=demo\+simulator"))
    shown = rows(page)
    assert {"Explained run", "Pair A", "Pair B"} <= set(shown) and "Failed run" not in shown, shown
    page.screenshot(path=str(ARTIFACTS / "runs-list-filtered.png"), full_page=True)


def test_an_archived_run_leaves_the_list_and_a_running_run_cannot_be_deleted(page, frontier_server):
    done = make_run(frontier_server, name="Archive me", candidates=3, seed=5)
    page.goto(f"/runs/{done['id']}/")
    page.get_by_text("Tags, notes, archive, delete").click()
    page.get_by_role("button", name="Archive", exact=True).click()
    expect(page.locator("[data-field=tags] .tag-archived")).to_have_text("archived")
    page.goto("/runs/")
    assert "Archive me" not in rows(page)
    page.get_by_label("archived runs").check()
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"archived=1"))
    assert "Archive me" in rows(page)
    page.screenshot(path=str(ARTIFACTS / "runs-list-archived.png"), full_page=True)
    page.goto(f"/runs/{done['id']}/")
    page.get_by_text("Tags, notes, archive, delete").click()
    page.get_by_role("button", name="Unarchive").click()
    expect(page.locator("[data-field=tags] .tag-archived")).to_have_count(0)

    busy = make_run(frontier_server, name="Busy run", candidates=2, status="running")
    open_run(page, busy["id"])
    page.get_by_text("Tags, notes, archive, delete").click()
    expect(page.get_by_role("button", name="Delete run")).to_be_hidden()
    expect(
        page.get_by_text("Archive and delete are available once the run has stopped.")
    ).to_be_visible()
    # A page opened while the run was stopped still shows the button: the server refuses all the same.
    page.evaluate(
        "document.querySelectorAll('.run-chores form[data-when=finished]').forEach((f) => { f.hidden = false; })"
    )
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete run").click()
    expect(page.locator(".messages")).to_contain_text(
        f"run {busy['id']} is running; stop or cancel it before deleting it"
    )
    expect(page).to_have_url(re.compile(rf"/runs/{busy['id']}/$"))
    page.screenshot(path=str(ARTIFACTS / "delete-refused-while-running.png"))
    assert page.goto(f"/runs/{busy['id']}/").status == 200


def test_a_run_gets_tags_and_notes_is_forked_from_a_prefilled_form_and_deleted_after_a_confirmation(
    page, runs
):
    parent = runs["pair"][0]
    page.goto(f"/runs/{parent}/")
    page.get_by_text("Tags, notes, archive, delete").click()
    page.get_by_label("Tags").fill("baseline, refund")
    page.get_by_label("Notes").fill("The first try <b>bold</b>.")
    page.get_by_role("button", name="Save tags and notes").click()
    expect(page.locator("[data-field=tags] .tag")).to_have_text(["baseline", "refund"])
    expect(page.locator("[data-field=notes]")).to_have_text("The first try <b>bold</b>.")
    page.screenshot(path=str(ARTIFACTS / "run-tags-and-notes.png"))

    page.locator("[data-control=fork] input[name=candidate]").fill("2")
    page.get_by_role("button", name="Fork…").click()
    page.wait_for_url(re.compile(rf"/runs/new/\?fork={parent}&candidate=2"))
    expect(page.locator("[data-field=fork-note]")).to_contain_text("from candidate #2")
    expect(page.locator("textarea[name='component.text']")).not_to_have_value("")
    seed_text = page.locator("textarea[name='component.text']").input_value()
    page.locator("[name='budget.preset']").select_option(label="exact number of metric calls")
    page.get_by_label("Exact metric calls").fill("60")
    page.get_by_label("Train split").fill("val")  # the factory's task set has no train split
    page.screenshot(path=str(ARTIFACTS / "fork-prefilled-form.png"), full_page=True)
    page.get_by_role("button", name="Launch", exact=True).click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    fork = int(re.search(r"/runs/(\d+)/$", page.url).group(1))
    expect(page.locator("[data-field=fork-parent]")).to_have_attribute("href", f"/runs/{parent}/")
    expect(page.locator("#seed-prompt-text")).to_have_text(seed_text)
    page.goto(f"/runs/{parent}/")
    expect(page.locator("[data-field=fork-child]")).to_have_attribute("href", f"/runs/{fork}/")
    page.screenshot(path=str(ARTIFACTS / "run-links-to-its-fork.png"))

    page.get_by_text("Tags, notes, archive, delete").click()
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Delete run").click()
    expect(page).to_have_url(re.compile(rf"/runs/{parent}/$"))  # dismissed: nothing happened
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete run").click()
    page.wait_for_url(re.compile(r"/runs/$"))
    expect(page.get_by_text(f"Run {parent} (Pair A) was deleted.")).to_be_visible()
    assert page.goto(f"/runs/{parent}/").status == 404


def test_the_verifier_editor_keeps_the_id_fixed_and_runs_saved_test_cases_on_every_edit(page):
    page.goto("/verifiers/new/")
    expect(page.locator("#lint-problems li")).to_have_count(0)  # nothing typed yet: no error
    expect(page.locator("[data-error-for]")).to_have_count(0)
    page.locator("#spec-json").fill(
        json.dumps(
            {
                "id": "polite-e2e",
                "name": "Polite",
                "checks": [{"id": "please", "type": "contains", "params": {"value": "please"}}],
            }
        )
    )
    expect(page.locator("#lint-status")).to_have_text("Valid")
    page.get_by_label("Output to score").fill("Yes, please hold on.")
    expect(page.get_by_test_id("try-verdict")).to_have_text("pass")
    page.get_by_label("Test case name").fill("says please")
    page.get_by_role("button", name="Save as test case").click()
    page.get_by_label("Output to score").fill("No.")
    expect(page.get_by_test_id("try-verdict")).to_have_text("fail")
    page.get_by_label("Test case name").fill("curt")
    page.get_by_role("button", name="Save as test case").click()
    expect(page.locator("#suite-summary")).to_have_text("2 of 2 as expected")
    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_url(re.compile(r"/verifiers/polite-e2e/$"))

    page.goto("/verifiers/polite-e2e/edit/")
    id_field = page.locator("#spec-form").get_by_label("Id (fixed once saved)")
    expect(id_field).to_have_attribute("readonly", "")
    expect(page.locator("#suite-summary")).to_have_text(
        "2 of 2 as expected"
    )  # stored with the verifier
    page.locator("#spec-form").get_by_label("value").fill("thanks")  # an edit re-runs the suite
    expect(page.locator("#suite-summary")).to_have_text("1 of 2 as expected")
    expect(page.locator("tr[data-case='0'] [data-testid=case-verdict]")).to_have_text(
        "✗ verdict fail"
    )
    expect(page.locator("tr[data-case='0'] [data-testid=case-passed]")).to_have_text(
        "✗ verifier failed"
    )
    page.screenshot(path=str(ARTIFACTS / "verifier-test-cases.png"), full_page=True)
    spec = json.loads(page.locator("#spec-json").input_value())
    page.locator("#spec-json").fill(json.dumps(dict(spec, id="renamed")))
    expect(page.locator("#lint-problems")).to_contain_text("a saved verifier's id cannot change")


def test_cancel_asks_first_and_does_nothing_when_the_answer_is_no(page, frontier_server):
    run = make_run(frontier_server, name="Cancel me", candidates=3, status="running")
    open_run(page, run["id"])
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("[data-field=status]")).to_have_text("running")
    assert asked and "Cancel this run now?" in asked[0]
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("[data-field=status]")).to_have_text(re.compile("stopping|stopped"))
    page.screenshot(path=str(ARTIFACTS / "cancel-confirmed.png"))


@pytest.fixture(scope="module")
def strict_run(frontier_server) -> int:
    return int(
        frontier_server.manage(
            "shell", "-c", STRICT_RUN.format(username=E2E_USERNAME)
        ).stdout.split()[-1]
    )


def test_a_tasks_drill_down_shows_the_verdict_and_each_verifiers_passed_with_what_decided_them(
    page, strict_run
):
    """A verifier with passThreshold 0.9 fails an output scoring 0.800 whose verdict
    is pass (docs/verifier-semantics.md "Passed and verdict"): the candidate page's
    scores per task and the compare page's task view say both, with the numbers."""
    run_id = strict_run
    page.goto(f"/runs/{run_id}/candidates/0/")
    expect(page.locator("[data-field=judgments-rule]")).to_contain_text(
        "run thresholds: pass ≥ 0.8, borderline ≥ 0.6"
    )
    row = page.locator("tr[data-task-key='t000']")
    expect(row.locator("[data-field=verdict]")).to_have_text("verdict pass")
    expect(row.locator("[data-field=verdict-why]")).to_have_text("(0.800 ≥ 0.8)")
    expect(row.locator("ul.passed li")).to_have_text(
        'verifier "Strict" failed (0.800 < passThreshold 0.9)'
    )
    page.screenshot(path=str(ARTIFACTS / "candidate-two-judgments.png"), full_page=True)

    page.goto(f"/runs/{run_id}/compare/?c=0&c=1")
    expect(page.locator("[data-field=judgments-rule]")).to_contain_text(
        "run thresholds: pass ≥ 0.8, borderline ≥ 0.6"
    )
    page.goto(f"/runs/{run_id}/compare/task/?c=0&c=1&split=val&task=t000")
    judged = page.locator("[data-candidate='0'] [data-field=judgments] li")
    expect(judged.first).to_have_text(
        "verdict pass (0.800 ≥ 0.8; run thresholds: pass ≥ 0.8, borderline ≥ 0.6)"
    )
    expect(judged.nth(1)).to_have_text('verifier "Strict" failed (0.800 < passThreshold 0.9)')


def test_the_run_pages_trials_say_each_tasks_verdict_and_whether_its_verifiers_passed(
    page, strict_run
):
    """The run page's Trials stream said `0.800 pass` for a task the run's one
    verifier (passThreshold 0.9) failed: it now says both judgments, each with
    what decides it, and the header card names each verifier's passThreshold."""
    open_run(page, strict_run)
    trial = page.locator("#stream-trials li").filter(has_text="t000").first
    expect(trial).to_contain_text(
        "0.800 · verdict pass (0.800 ≥ 0.8) · verifiers failed (passThreshold: strict 0.9)"
    )
    expect(page.locator("#run-explainer .explainer-facts")).to_contain_text(
        "× 1 · passThreshold 0.9"
    )
