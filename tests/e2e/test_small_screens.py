"""Small screens and keyboards in a real browser: a 390 px wide phone.

Every page is visited at 390×844 — with a real demo run (the simulator, run to
the end by the server's embedded worker) so its charts exist — and none may
scroll sideways (a wide table scrolls inside its own box instead). The nav
collapses behind a menu button a keyboard opens and closes; the run page's
first Tab stop skips the charts; Plotly's toolbar buttons are never a Tab stop,
also after the charts are drawn again."""

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import ARTIFACTS, E2E_USERNAME, login, wait_for_js
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

PHONE = {"width": 390, "height": 844}
DATASETS = Path(__file__).resolve().parents[1] / "fixtures" / "datasets"

DEMO_RUN = """
import json
from django.contrib.auth import get_user_model
from optimizer.demo_run import demo_config
from optimizer.examples import load_examples
from optimizer.tasksets.models import TaskSet
from optimizer.services import run_launch
from pathlib import Path
from tests.factories import recorded_run
from verifiers_app.services import verifier_upsert
user = get_user_model().objects.get(username={username!r})
load_examples(user=user)
spec = json.loads(Path("examples/verifiers/refund-policy-quality.json").read_text())
verifier_upsert(owner=user, spec=dict(spec, description="A second version, so the verifier has a diff to show."))
task_set = TaskSet.objects.get(name="Refund tickets", owner=user)
config = demo_config(task_set)
config.update(name="Phone-sized demo run", budget={{"max_metric_calls": 90}})
config["task_lm"]["simulated_latency_ms"] = config["reflection_lm"]["simulated_latency_ms"] = 0
run = run_launch(owner=user, config=config)
task = task_set.tasks.filter(split="val").order_by("position").first()
a = recorded_run(user, name="Pair A", seed=1, candidates=4, val_tasks=6, holdout_tasks=4, task_prefix="val-")
b = recorded_run(user, name="Pair B", seed=2, task_set=a.task_set, candidates=4)
print(json.dumps({{"run": run.pk, "task_set": task_set.pk, "task": task.pk, "task_key": task.task_id,
                   "verifier": "refund-policy-quality", "pair": [a.pk, b.pk]}}))
"""

RUN_DONE = "from optimizer.models import Run; r = Run.objects.get(pk={run}); print(r.status, r.best_candidate.index if r.best_candidate else -1)"


@pytest.fixture(scope="module")
def site(frontier_server):
    data = json.loads(
        frontier_server.manage("shell", "-c", DEMO_RUN.format(username=E2E_USERNAME))
        .stdout.strip()
        .splitlines()[-1]
    )

    def finished():
        status, best = frontier_server.manage(
            "shell", "-c", RUN_DONE.format(run=data["run"])
        ).stdout.split()[-2:]
        assert status not in {"failed", "stopped"}, status
        return int(best) + 1 if status == "completed" else None  # + 1: candidate 0 is an answer too

    data["best"] = (
        wait_until(finished, timeout=240, interval=2, what="the demo run to complete") - 1
    )
    return data


@pytest.fixture
def phone(browser, frontier_server):
    context = browser.new_context(base_url=frontier_server.url, viewport=PHONE)
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


# What scrolls sideways: the document wider than the window; and, to name the
# culprit, the first elements reaching past the right edge (inside a box that
# scrolls on its own is fine).
OVERFLOW = """() => {
  const width = window.innerWidth;
  const wide = [...document.querySelectorAll('body *')].filter((el) => {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.right <= width + 1) return false;
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      const style = getComputedStyle(up);
      if (['auto', 'scroll', 'hidden'].includes(style.overflowX) && up.getBoundingClientRect().right <= width + 1) return false;
    }
    return true;
  }).slice(0, 5).map((el) => el.tagName + '.' + el.className + '#' + el.id);
  return { scroll: document.documentElement.scrollWidth, width, wide };
}"""


def assert_fits(page, url: str) -> None:
    page.wait_for_load_state("networkidle")
    measured = page.evaluate(OVERFLOW)
    assert measured["scroll"] <= measured["width"] and not measured["wide"], (url, measured)


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def test_no_page_scrolls_sideways_at_390_px_logged_in_or_out(phone, site):
    run, pair = site["run"], site["pair"]
    phone.goto("/login/")
    assert_fits(phone, "/login/")
    shot(phone, "390px-login.png")
    login(phone)
    pages = {
        "runs-list": "/runs/",
        "runs-list-filtered": "/runs/?status=completed&sort=-best_score",
        "run": f"/runs/{run}/",
        "candidate": f"/runs/{run}/candidates/{site['best']}/",
        "candidate-history": f"/runs/{run}/candidates/{site['best']}/history/",
        "compare-pick": f"/runs/{run}/compare/",
        "compare-candidates": f"/runs/{run}/compare/?c=0&c={site['best']}",
        "compare-task": f"/runs/{run}/compare/task/?c=0&c={site['best']}&task={site['task_key']}",
        "promotion": f"/runs/{run}/promotion/",
        "compare-runs": "/runs/compare/?a={}&b={}".format(*pair),
        "compare-runs-pick": "/runs/compare/",
        "launch-form": "/runs/new/",
        "fork-form": f"/runs/new/?fork={run}",
        "run-import": "/runs/import/",
        "verifiers": "/verifiers/",
        "verifier": f"/verifiers/{site['verifier']}/",
        "verifier-editor": f"/verifiers/{site['verifier']}/edit/",
        "verifier-diff": f"/verifiers/{site['verifier']}/diff/",
        "verifier-new": "/verifiers/new/",
        "task-sets": "/tasksets/",
        "task-set": f"/tasksets/{site['task_set']}/",
        "task": f"/tasksets/{site['task_set']}/tasks/{site['task']}/",
        "task-set-import": "/tasksets/import/",
        "api-tokens": "/account/tokens/",
        "api-docs": "/api/docs",
        "404": "/no/such/page/",
    }
    for name, url in pages.items():
        response = phone.goto(url)
        assert response.status == (404 if name == "404" else 200), (url, response.status)
        if name in {"run", "compare-runs"}:  # the charts are drawn before measuring
            wait_for_js(phone, "document.querySelectorAll('.js-plotly-plot .main-svg').length >= 3")
        assert_fits(phone, url)
        shot(phone, f"390px-{name}.png")

    # A task set file's preview (its rows in a table) fits.
    phone.goto("/tasksets/import/")
    phone.get_by_label("Task set name").fill("Phone import")
    phone.get_by_label("File (.jsonl, .json, .yaml, .csv or .tsv)").set_input_files(
        str(DATASETS / "alpaca.jsonl")
    )
    phone.get_by_role("button", name="Preview").click()
    expect(
        phone.get_by_role("table", name="Rows as they will be stored").locator("tbody tr")
    ).to_have_count(4)
    assert_fits(phone, "task set import preview")
    shot(phone, "390px-task-set-import-preview.png")

    # Our 403 page (a form posted without its CSRF cookie) fits too.
    phone.goto("/runs/")
    phone.context.clear_cookies(name="csrftoken")
    phone.get_by_role("button", name="Menu").click()
    phone.get_by_role("button", name="Log out").click()
    expect(phone.get_by_role("heading", name="You may not see this page")).to_be_visible()
    assert_fits(phone, "403")
    shot(phone, "390px-403.png")


NAV_STATE = """() => ({ expanded: document.querySelector('.nav-toggle').getAttribute('aria-expanded'),
                       focused: document.activeElement.textContent.trim() })"""


def test_the_nav_collapses_behind_a_menu_button_the_keyboard_opens_and_closes(phone, site):
    login(phone)
    phone.goto("/runs/")
    nav = phone.get_by_role("navigation", name="Main")
    menu = phone.get_by_role("button", name="Menu")
    expect(nav).to_be_hidden()
    expect(menu).to_have_attribute("aria-expanded", "false")

    # Skip link, brand, then the menu button: Enter opens it and Tab walks into the links.
    for _ in range(3):
        phone.keyboard.press("Tab")
    expect(menu).to_be_focused()
    phone.keyboard.press("Enter")
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(nav.get_by_role("link", name="Runs")).to_be_visible()
    phone.keyboard.press("Tab")
    expect(nav.get_by_role("link", name="Runs")).to_be_focused()
    assert_fits(phone, "/runs/ with the menu open")
    ARTIFACTS.mkdir(exist_ok=True)
    phone.screenshot(path=str(ARTIFACTS / "390px-nav-open.png"))

    # Escape closes it and gives the focus back to the button; Space opens it again, a click closes it.
    phone.keyboard.press("Escape")
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(nav).to_be_hidden()
    expect(menu).to_be_focused()
    phone.keyboard.press("Space")
    expect(nav).to_be_visible()
    menu.click()
    expect(nav).to_be_hidden()
    expect(menu).to_have_attribute("aria-expanded", "false")

    # On a wide screen there is no menu button: the nav is simply there.
    phone.set_viewport_size({"width": 1200, "height": 800})
    expect(menu).to_be_hidden()
    expect(nav).to_be_visible()


# Where the keyboard is, and whether it is on a Plotly toolbar button.
FOCUS = """() => { const el = document.activeElement;
  return { modebar: !!el.closest('.modebar'), chart: !!el.closest('.js-plotly-plot'),
           inCandidates: !!el.closest('#candidates'), what: el.tagName + ' ' + (el.textContent || '').trim().slice(0, 40),
           visible: (() => { const b = el.getBoundingClientRect(); return b.width > 0 && b.left >= 0 && b.right <= innerWidth; })() }; }"""


TABBABLE_TOOLBAR_BUTTONS = "[...document.querySelectorAll('.modebar a, .modebar button')].filter((b) => b.tabIndex >= 0).length"


def tab_through_the_charts(page) -> list[dict]:
    """Tab from the link just before the charts until the focus reaches the candidates table."""
    page.get_by_role("link", name="Skip the charts").focus()
    stops = []
    for _ in range(80):
        page.keyboard.press("Tab")
        stops.append(page.evaluate(FOCUS))
        if stops[-1]["inCandidates"]:
            return stops
    raise AssertionError(f"80 Tab presses never reached the candidates table: {stops}")


def test_the_run_pages_first_tab_stop_skips_the_charts_and_no_toolbar_button_is_a_tab_stop(
    phone, site
):
    login(phone)
    phone.goto(f"/runs/{site['run']}/")
    wait_for_js(
        phone,
        "document.querySelectorAll('#candidate-rows tr').length > 0 && "
        "document.querySelectorAll('.js-plotly-plot .modebar-btn').length > 0",
    )
    phone.wait_for_load_state("networkidle")

    # The first Tab stop: the skip link, shown on focus, inside the window; Enter lands after the charts.
    phone.keyboard.press("Tab")
    skip = phone.get_by_role("link", name="Skip past the charts to the candidates table")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    assert phone.evaluate(FOCUS)["visible"]
    phone.screenshot(path=str(ARTIFACTS / "390px-run-skip-link-focused.png"))
    phone.keyboard.press("Enter")
    expect(phone.locator("#candidates")).to_be_focused()
    assert (
        phone.evaluate("document.querySelector('#candidates').getBoundingClientRect().top")
        > phone.evaluate("document.querySelector('.chart-grid').getBoundingClientRect().bottom") - 1
    )  # the target is after the charts
    phone.keyboard.press("Tab")
    assert not phone.evaluate(FOCUS)["chart"]

    # Walking through the charts by Tab: toolbar buttons exist but are never a stop ...
    buttons = phone.locator(".js-plotly-plot .modebar-btn").count()
    assert buttons > 0
    stops = tab_through_the_charts(phone)
    assert not any(stop["modebar"] for stop in stops), stops

    # ... also after the charts are drawn again: new axes picked, the window resized, a candidate selected.
    axis = phone.locator("#axis-x")
    axis.select_option(
        index=1 if axis.input_value() != axis.locator("option").nth(1).get_attribute("value") else 0
    )
    phone.set_viewport_size({"width": 700, "height": 844})
    phone.set_viewport_size(PHONE)
    phone.locator("#candidate-rows tr").first.click()
    phone.wait_for_timeout(500)  # Plotly's resize is debounced
    stops = tab_through_the_charts(phone)
    assert not any(stop["modebar"] for stop in stops), stops
    assert phone.evaluate(TABBABLE_TOOLBAR_BUTTONS) == 0

    # A redraw by Plotly itself, not through charts.js (a relayout that rebuilds the toolbar's buttons).
    phone.evaluate(
        "() => window.Plotly.relayout(document.getElementById('chart-score'), {'modebar.remove': ['zoom2d']})"
    )
    assert phone.evaluate("document.querySelectorAll('#chart-score .modebar-btn').length") > 0
    assert phone.evaluate(TABBABLE_TOOLBAR_BUTTONS) == 0
    shot(phone, "390px-run-page-keyboard.png")


# Each word of every visible table header: on how many lines it is drawn.
BROKEN_HEADER_WORDS = """() => {
  const broken = [];
  for (const th of document.querySelectorAll('th')) {
    if (!th.offsetParent) continue;
    const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        if (lines.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}"""


@pytest.mark.parametrize("width", [390, 800])
def test_no_table_header_breaks_inside_a_word(browser, frontier_server, site, width):
    """A narrow table wrapped its headers anywhere: "SCOR" / "E"."""
    context = browser.new_context(
        base_url=frontier_server.url, viewport={"width": width, "height": 900}
    )
    page = context.new_page()
    login(page)
    run = site["run"]
    for url in (
        f"/runs/{run}/",
        f"/runs/{run}/compare/?c=0&c={site['best']}",
        f"/runs/{run}/promotion/",
        "/runs/",
        f"/tasksets/{site['task_set']}/",
        "/verifiers/",
    ):
        page.goto(url)
        if url == f"/runs/{run}/":
            wait_for_js(page, "document.querySelectorAll('#candidate-rows tr').length > 0")
        assert page.evaluate(BROKEN_HEADER_WORDS) == [], (width, url)
    context.close()
