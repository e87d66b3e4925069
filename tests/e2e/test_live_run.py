"""The live run page in a real browser against a real server: a demo run
launched from the form (the embedded worker executes it with the offline
simulator, slowed down so it can be watched) fills the charts over the
websocket; a reload shows the same data; a dropped socket catches up with no
gap; the Stop button stops it; Pause and Resume change the page live; a
lineage node opens its candidate."""

import re
import time

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import ARTIFACTS, E2E_USERNAME, Api, login
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

SEED_DATA = """
from django.contrib.auth import get_user_model
from optimizer.tasksets.models import Task, TaskSet
from verifiers_app.services import verifier_create
owner = get_user_model().objects.get(username={username!r})
verifier_create(owner=owner, spec={{"id": "e2e-refund", "name": "E2E refund", "kind": "native",
    "checks": [{{"id": "mentions", "type": "task_expectations"}}, {{"id": "short", "type": "max_length", "params": {{"value": 600}}}}]}})
task_set = TaskSet.objects.create(owner=owner, name="e2e refunds")
for i in range(8):
    Task.objects.create(task_set=task_set, task_id=f"q{{i}}", position=i, split="train" if i < 4 else "val",
        input=f"Customer {{i}} asks whether order {{i}} can be refunded.",
        metadata={{"expectations": {{"mustMention": [{{"text": "30 days", "message": "State the refund window"}},
                                                    {{"anyOf": ["receipt", "proof of purchase"], "message": "Ask for proof of purchase"}}],
                                    "mustNotMention": [{{"text": "guarantee", "message": "Never guarantee an outcome"}}]}}}})
"""

RUN_STATE = """() => ({
  points: document.getElementById('chart-score').data[0].x.length,
  budget: document.querySelector('[data-field=budget]').textContent,
  barWidth: document.querySelector('[data-field=budget-bar] span').style.width,
  status: document.querySelector('[data-field=status]').textContent,
  lastSeq: window.__frontierRun ? window.__frontierRun.lastSeq : -1,
})"""

TABLE = """() => [...document.querySelectorAll('#candidate-rows tr')].map(
  (tr) => [Number(tr.dataset.candidateIndex), tr.children[4].textContent])"""


PAGE_CONTENT = """() => ({
  streams: ["proposals", "trials", "errors"].map((id) => [...document.querySelectorAll(`#stream-${id} > li`)].map((li) => li.textContent)),
  score: document.getElementById('chart-score').data.slice(0, 3).map((t) => [t.x, t.y]),
  lineage: document.getElementById('chart-lineage').data[1].x,
  front: document.getElementById('chart-front').data[0].z,
  // The per-task leaders: built live from front.updated deltas, on reload from the snapshot.
  leaders: [document.getElementById('chart-front').data[1].x, document.getElementById('chart-front').data[1].y],
  ticks: document.getElementById('chart-front').layout.yaxis.ticktext,
})"""


@pytest.fixture(scope="module")
def demo_data(frontier_server):
    frontier_server.manage("shell", "-c", SEED_DATA.format(username=E2E_USERNAME))


def launch_demo_run(page, *, budget: int, latency_ms: int, name: str = "") -> int:
    page.goto("/runs/new/")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Task set").select_option(label="e2e refunds (8 tasks)")
    page.locator("[name=verifier_ids][value=e2e-refund]").check()
    page.get_by_label("Simulator latency (ms per call, demo only)").fill(str(latency_ms))
    page.locator("[name='budget.preset']").select_option(label="exact number of metric calls")
    page.get_by_label("Exact metric calls").fill(str(budget))
    # The plan follows the form as it changes: this budget, for this task set, with the simulator free.
    plan = page.locator("[data-field=plan]")
    expect(plan).to_contain_text(f"{budget} metric calls")
    expect(plan).to_contain_text("free (demo simulator)")
    page.get_by_role("button", name="Dry run", exact=True).click()
    expect(page.locator("[data-field=dry-run-result]")).to_have_text(
        "dry run passed: ready to launch"
    )
    page.get_by_role("button", name="Launch", exact=True).click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    expect(page.locator("[data-field=live]")).to_have_text("● live")
    return int(re.search(r"/runs/(\d+)/$", page.url).group(1))


def state(page) -> dict:
    return page.evaluate(RUN_STATE)


def snapshot(page, run_id: int) -> dict:
    return page.request.get(f"/runs/{run_id}/snapshot.json").json()


def test_a_demo_run_launched_from_the_form_fills_the_charts_live_and_survives_a_reload(
    page, demo_data
):
    # 300 ms a call: the run must still be making candidates once the page is live
    # (at 120 ms it made all five by metric call 50, a race with a loaded page load).
    run_id = launch_demo_run(page, budget=260, latency_ms=300)
    page.evaluate("window.__noReload = true")
    first = state(page)
    grown = wait_until(
        lambda: (s := state(page))["points"] >= first["points"] + 2 and s,
        what="new candidates on the chart",
    )
    assert grown["budget"] != first["budget"] and grown["barWidth"] != first["barWidth"]
    assert page.evaluate("window.__noReload") is True  # the same document: nothing reloaded
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "live-run-mid-run.png"), full_page=True)

    before = page.evaluate(TABLE)
    page.reload()
    expect(page.locator("[data-field=live]")).to_have_text("● live")
    after = page.evaluate(TABLE)
    assert after[: len(before)] == before  # every candidate seen before, with the same score

    wait_until(
        lambda: state(page)["status"] == "completed", timeout=120, what="the run to complete"
    )
    final = snapshot(page, run_id)
    columns = final["candidates"]
    assert page.evaluate(TABLE) == [
        [i, f"{score:.3f}"] for i, score in zip(columns["index"], columns["val_score"], strict=True)
    ]
    page.screenshot(path=str(ARTIFACTS / "live-run-completed.png"), full_page=True)
    # The finished run drawn from the database alone shows what the live page showed.
    live = page.evaluate(PAGE_CONTENT)
    page.reload()
    expect(page.locator("[data-field=live]")).to_have_text("● live")
    assert page.evaluate(PAGE_CONTENT) == live


def test_a_dropped_socket_reconnects_and_catches_up_with_no_gap_or_duplicate(page, demo_data):
    run_id = launch_demo_run(page, budget=260, latency_ms=120)
    wait_until(lambda: state(page)["points"] >= 2, what="the first candidates")
    page.evaluate("window.__frontierSocket.pause()")
    expect(page.locator("[data-field=live]")).to_have_text("paused")
    paused_at = state(page)["lastSeq"]
    wait_until(
        lambda: snapshot(page, run_id)["run"]["last_seq"] >= paused_at + 10,
        what="events while the socket is down",
    )
    missed = snapshot(page, run_id)["run"]["last_seq"]
    page.evaluate("window.__frontierSocket.resume()")
    expect(page.locator("[data-field=live]")).to_have_text("● live")
    wait_until(lambda: state(page)["lastSeq"] >= missed, what="the replay of missed events")

    wait_until(
        lambda: state(page)["status"] == "completed", timeout=120, what="the run to complete"
    )
    final = snapshot(page, run_id)
    indices = [row[0] for row in page.evaluate(TABLE)]
    assert indices == final["candidates"]["index"]  # none missing, none twice
    assert state(page)["points"] == len(final["candidates"]["index"])
    assert state(page)["lastSeq"] == final["run"]["last_seq"]

    # A plain close (a network drop) reconnects by itself.
    page.evaluate("window.__frontierSocket.close()")
    expect(page.locator("[data-field=live]")).to_have_text("● live", timeout=10_000)


VIEWPORTS = [(1400, 1000), (800, 900), (390, 844)]

# The page's height, and the blank under its last content (a heading, table row,
# stream list or chart) in px: the page's own bottom padding is about 45.
PAGE_END = """() => {
  const content = [...document.querySelectorAll('#run-page :is(h2, tr, .stream, .chart, p:not([hidden]))')]
    .map((el) => el.getBoundingClientRect()).filter((box) => box.height > 0);
  const height = document.documentElement.scrollHeight;
  return {height, blank: Math.round(height - Math.max(...content.map((box) => box.bottom + window.scrollY)))};
}"""


def test_the_run_page_logs_no_error_live_or_finished_and_ends_at_its_content_at_every_width(
    page, demo_data
):
    """Watched live and once finished, at three widths: no console error, and the
    finished page's height is its content's. The candidate table and the streams
    kept a 900 px placeholder until scrolled near: a page whose height changed
    by hundreds of px when scrolled to its end, blank under short content, and
    blank in a full-page screenshot."""
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    run_id = launch_demo_run(page, budget=200, latency_ms=300)
    wait_until(lambda: state(page)["points"] >= 1, what="the seed on the chart")

    def look_at_every_width(finished: bool) -> None:
        for width, height in VIEWPORTS:
            page.set_viewport_size({"width": width, "height": height})
            page.goto(f"/runs/{run_id}/")
            expect(page.locator("[data-field=live]")).to_have_text("● live")
            if not finished:
                continue  # a live page grows as candidates arrive
            page.wait_for_timeout(500)
            top = page.evaluate(PAGE_END)
            page.keyboard.press("End")
            page.wait_for_timeout(500)
            end = page.evaluate(PAGE_END)
            assert (end["height"], end["blank"] < 100) == (top["height"], True), (
                f"{width} px wide: {top['height']} px tall at the top, {end} at the end"
            )

    look_at_every_width(finished=False)
    wait_until(
        lambda: state(page)["status"] == "completed", timeout=120, what="the run to complete"
    )
    look_at_every_width(finished=True)
    assert errors == []


def test_the_owner_stops_resumes_and_cancels_a_run_from_its_page_and_sees_each_live(
    page, demo_data
):
    # Slow enough that the Stop lands while there is still something to learn: the
    # simulator reaches 1.000 on this set within ~5 candidates, after which no
    # proposal can be accepted and a resumed run would add no point to the chart.
    launch_demo_run(page, budget=2000, latency_ms=400)
    wait_until(lambda: state(page)["points"] >= 1, what="the seed candidate")
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("[data-field=status]")).to_have_text(re.compile("stopping|stopped"))
    expect(page.locator("[data-field=status]")).to_have_text("stopped", timeout=60_000)
    expect(page.get_by_role("button", name="Resume")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "live-run-stopped.png"), full_page=True)

    stopped_points = state(page)["points"]
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("[data-field=status]")).to_have_text("running", timeout=30_000)
    wait_until(lambda: state(page)["points"] > stopped_points, what="new candidates after resuming")
    # Cancel throws the current iteration away, so it asks first: dismissing keeps the run going.
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("[data-field=status]")).to_have_text("running")
    dialogs = []
    page.once("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("[data-field=status]")).to_have_text("stopped", timeout=60_000)
    assert "Cancel this run now?" in dialogs[0]


def test_the_owner_pauses_and_resumes_a_run_and_the_page_turns_pause_into_resume_live(
    page, demo_data
):
    """Pause (a form post, like Stop) asks the run to pause after its iteration:
    the page that loads says so, then turns to "paused" and swaps Pause for
    Resume over the websocket, with no reload; Resume brings it back to running
    the same way."""
    launch_demo_run(page, budget=2000, latency_ms=800)
    wait_until(lambda: state(page)["points"] >= 1, what="the seed candidate")
    status = page.locator("[data-field=status]")
    pause = page.get_by_role("button", name="Pause")
    resume = page.get_by_role("button", name="Resume")
    expect(resume).to_be_hidden()
    pause.click()
    page.wait_for_load_state()
    page.evaluate("() => { window.__sameDocument = true; }")
    expect(status).to_have_text("paused", timeout=60_000)
    expect(resume).to_be_visible()
    expect(pause).to_be_hidden()
    expect(page.get_by_role("button", name="Stop")).to_be_visible()  # a paused run can be stopped
    expect(page.locator("[data-field=phase]")).to_have_text(f"paused by {E2E_USERNAME}")
    assert page.evaluate("() => window.__sameDocument === true"), "the page reloaded"
    page.screenshot(path=str(ARTIFACTS / "live-run-paused.png"), full_page=True)

    paused_points = state(page)["points"]
    resume.click()
    page.wait_for_load_state()
    page.evaluate("() => { window.__sameDocument = true; }")
    expect(status).to_have_text("running", timeout=30_000)
    expect(pause).to_be_visible()
    expect(resume).to_be_hidden()
    wait_until(lambda: state(page)["points"] > paused_points, what="new candidates after resuming")
    assert page.evaluate("() => window.__sameDocument === true"), "the page reloaded"
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel").click()
    expect(status).to_have_text("stopped", timeout=60_000)


def test_clicking_a_lineage_node_opens_that_candidate(page, demo_data):
    # Tall enough that the lineage chart (below the run's header card) is in the viewport the mouse clicks in.
    page.set_viewport_size({"width": 1400, "height": 1800})
    run_id = launch_demo_run(page, budget=120, latency_ms=0)
    wait_until(
        lambda: state(page)["status"] == "completed", timeout=120, what="the run to complete"
    )
    expect(page.locator("#chart-lineage .scatterlayer .point")).not_to_have_count(0)
    # The header card fetches the final best prompt when the run ends: let the page settle before aiming.
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(300)
    point = page.evaluate(
        """() => {
          const el = document.getElementById('chart-lineage');
          el.scrollIntoView({ block: "center" });  // below the fold on a 1000 px high window
          const layout = el._fullLayout, trace = el._fullData[1];
          // The seed: mid-chart (a best at 1.000 sits on the plot's top edge).
          const k = 0, box = el.getBoundingClientRect();
          return { index: trace.customdata[k],
                   x: box.left + layout._size.l + layout.xaxis.l2p(trace.x[k]),
                   y: box.top + layout._size.t + layout.yaxis.l2p(trace.y[k]) };
        }"""
    )
    page.mouse.move(point["x"], point["y"])
    page.mouse.click(point["x"], point["y"])
    page.wait_for_url(f"**/runs/{run_id}/candidates/{point['index']}/")
    expect(
        page.get_by_role("heading", name=re.compile(f"Candidate #{point['index']}"))
    ).to_be_visible()
    expect(page.locator(".evaluations tbody tr")).not_to_have_count(0)


HOSTILE_RUN = """
from django.contrib.auth import get_user_model
from tests.factories import recorded_run
owner = get_user_model().objects.get(username={username!r})
run = recorded_run(owner=owner, name="hostile", candidates=4, val_tasks=3,
                component_text='<img src=x onerror="window.__xss=1"><b>bold</b>', task_prefix="<i>task</i>")
print(run.pk)
"""


def test_hostile_prompt_text_is_shown_literally_in_tooltips_and_nothing_runs(page, frontier_server):
    result = frontier_server.manage("shell", "-c", HOSTILE_RUN.format(username=E2E_USERNAME))
    run_id = int(result.stdout.strip().splitlines()[-1])
    page.goto(f"/runs/{run_id}/")
    expect(page.locator("[data-field=live]")).to_have_text("● live")
    point = page.evaluate(
        """() => {
          const el = document.getElementById('chart-lineage');
          el.scrollIntoView({ block: "center" });  // below the fold on a 1000 px high window
          const layout = el._fullLayout, trace = el._fullData[1], box = el.getBoundingClientRect();
          return { x: box.left + layout._size.l + layout.xaxis.l2p(trace.x[1]),
                   y: box.top + layout._size.t + layout.yaxis.l2p(trace.y[1]) };
        }"""
    )
    page.mouse.move(point["x"], point["y"])
    tooltip = page.locator("#chart-lineage .hoverlayer")
    expect(tooltip).to_contain_text('<img src=x onerror="window.__xss=1"><b>bold</b>')
    assert page.evaluate("window.__xss") is None
    assert (
        page.locator("#chart-lineage .hoverlayer b").count() <= 1
    )  # only our own "#index" bold, not the prompt's
    # Task ids label the heatmap's columns: shown literally, never as markup.
    ticks = page.locator("#chart-front .xtick text")
    expect(ticks.first).to_have_text("<i>task</i>000")
    assert (
        page.locator(
            "#chart-front .xtick text i, #chart-front .xtick text tspan[style*=italic]"
        ).count()
        == 0
    )


def test_candidates_picked_in_the_table_open_the_compare_view_url(page, frontier_server):
    result = frontier_server.manage("shell", "-c", HOSTILE_RUN.format(username=E2E_USERNAME))
    run_id = int(result.stdout.strip().splitlines()[-1])
    page.goto(f"/runs/{run_id}/")
    compare = page.get_by_role("link", name="Compare selected")
    expect(compare).to_have_attribute("aria-disabled", "true")
    page.get_by_label("select candidate 3").check()
    page.get_by_label("select candidate 0").check()
    expect(compare).to_have_attribute("aria-disabled", "false")
    expect(compare).to_have_attribute("href", f"/runs/{run_id}/compare/?c=0&c=3")
    expect(page.locator("[data-field=selection]")).to_have_text("Selected: #0, #3")


def test_the_runs_list_follows_a_run_launched_in_another_tab_without_a_reload(page, demo_data):
    list_loads = []  # by the document on screen (the login landed on a page that had its own)
    page.on("framenavigated", lambda frame: frame == page.main_frame and list_loads.clear())
    page.on(
        "request",
        lambda request: "/runs/list.json" in request.url and list_loads.append(request.url),
    )
    page.goto("/runs/")
    expect(page.locator("[data-field=live]")).to_have_text("● live")
    page.evaluate("window.__noReload = true")
    other = page.context.new_page()
    hostile = '<img src=x onerror="window.__xss=1"> refunds'
    # Slow enough to be seen running (at 60 ms a call it could finish before the first look: CI saw "completed").
    run_id = launch_demo_run(other, budget=120, latency_ms=250, name=hostile)
    row = page.locator(f"#runs-table tr[data-run-id='{run_id}']")
    expect(row).to_be_visible()
    expect(row.get_by_role("link")).to_have_text(
        hostile
    )  # pushed text shown literally, never as markup
    expect(page.locator("#runs-table tbody tr").first).to_have_attribute(
        "data-run-id", str(run_id)
    )  # newest on top
    expect(row.locator(".status")).to_have_text("running")
    budget = row.locator(".bar + .muted")
    expect(budget).not_to_have_text("0 / 120", timeout=30_000)  # the budget moves while it runs
    # A dropped socket reconnects by itself and reloads the list once, so
    # nothing that changed while it was down is missed.
    page.evaluate("window.__frontierRunsSocket.close()")
    expect(page.locator("[data-field=live]")).to_have_text("reconnecting…")
    expect(page.locator("[data-field=live]")).to_have_text("● live")
    expect(row.locator(".status")).to_have_text("completed", timeout=60_000)
    expect(row).to_contain_text("simulator")
    expect(row).to_contain_text(re.compile(r"\d+ / 120"))
    used = int(re.search(r"(\d+) / 120", row.locator(".bar + .muted").text_content()).group(1))
    assert used <= 120  # the budget is a hard cap, on the list as everywhere
    expect(row).to_contain_text("free (demo simulator)")  # the cost column
    assert page.evaluate("window.__noReload") is True
    assert page.evaluate("window.__xss") is None
    # Pushed, not polled: list.json is read only when the socket (re)connects.
    assert len(list_loads) == 2, list_loads
    page.screenshot(path=str(ARTIFACTS / "runs-list-live.png"), full_page=True)
    other.close()


def snapshot_scores_of(page, run_id: int, index: int) -> list:
    page_of_rows = page.request.get(f"/runs/{run_id}/scores.json?after={index - 1}&limit=1").json()
    assert page_of_rows["rows"] == [index]
    return page_of_rows["scores"][0]


LARGE_RUN = """
from django.contrib.auth import get_user_model
from tests.factories import recorded_run
owner = get_user_model().objects.get(username={username!r})
print(recorded_run(owner=owner, name="large", candidates=300, val_tasks=100, status="running", climbing=True).pk)
"""

NEXT_CANDIDATES = """
from optimizer.runs import event_types as ev
from optimizer.runs.events import publish_run_event
from optimizer.models import Run
run = Run.objects.get(pk={run_id})
tasks = [row["task_id"] for row in run.tasks_snapshot]
for index in (300, 301, 302):
    publish_run_event(run.pk, ev.CANDIDATE_NEW, {{
        "index": index, "parents": [index - 1], "origin": "reflection", "iteration": index, "metric_calls": 40000 + index,
        "val_score": 0.99, "objective_scores": {{"policy": 0.99, "format": 0.99}},
        "task_scores": {{t: 0.99 for t in tasks}}, "verdicts": {{t: "pass" for t in tasks}},
        "prompt_chars": 80, "prompt_tokens": 20, "mean_output_tokens": 30.0, "mean_latency_ms": 12.0,
        "components": {{"system_prompt": "Always state the 30 days window."}}, "usage": {{}}, "cost": 0.0}})
    publish_run_event(run.pk, ev.RUN_BUDGET, {{"used": 40000 + index, "total": 50000}})
"""


# Plotly.newPlot draws a figure from scratch; the run page uses it only at load.
RECORD_WHOLE_REDRAWS = """() => {
  window.__wholeRedraws = [];
  const newPlot = Plotly.newPlot;
  Plotly.newPlot = (gd, ...rest) => { window.__wholeRedraws.push(gd.id || String(gd)); return newPlot(gd, ...rest); };
}"""


def test_a_run_of_300_candidates_by_100_tasks_loads_and_applies_each_event_without_redrawing(
    page, frontier_server
):
    result = frontier_server.manage("shell", "-c", LARGE_RUN.format(username=E2E_USERNAME))
    run_id = int(result.stdout.strip().splitlines()[-1])
    started = time.monotonic()
    page.goto(f"/runs/{run_id}/")
    expect(page.locator("[data-field=live]")).to_have_text("● live")
    load_seconds = time.monotonic() - started
    assert state(page)["points"] == 300
    # A big run's heatmap starts with the front and the top candidates, not all 300 rows.
    first_rows = page.evaluate("document.getElementById('chart-front').data[0].z.length")
    assert first_rows < 300
    expect(page.locator("[data-field=heatmap-count]")).to_contain_text(
        f"{first_rows} of 300 candidates shown"
    )
    page.evaluate(RECORD_WHOLE_REDRAWS)
    # Events written by another process reach this embedded server's socket on
    # reconnect (replay from the database): the same code path as live events.
    frontier_server.manage("shell", "-c", NEXT_CANDIDATES.format(run_id=run_id))
    page.evaluate("window.__frontierSocket.close()")
    wait_until(lambda: state(page)["points"] == 303, what="three more candidates")
    slowest = page.evaluate("window.__frontierRun.slowestApplyMs")
    assert page.locator("#candidate-rows tr").count() == 303
    assert (
        page.evaluate("document.getElementById('chart-front').data[0].z.length") == first_rows + 3
    )
    # Each event extended the big figures in place: none was drawn anew.
    assert page.evaluate("window.__wholeRedraws") == []
    # The rest of the rows come on demand, with the same scores the database holds.
    page.get_by_role("button", name="Show more rows").click()
    wait_until(
        lambda: page.evaluate("document.getElementById('chart-front').data[0].z.length") == 303,
        what="every row",
    )
    expect(page.locator("[data-field=heatmap-rows]")).to_be_hidden()
    row_7 = page.evaluate(
        "(() => { const d = document.getElementById('chart-front').data[0]; return d.z[d.y.indexOf('#7')]; })()"
    )
    assert row_7 == snapshot_scores_of(page, run_id, 7)
    # A figure, not a gate (performance claims are printed, not asserted).
    print(f"large run page: live after {load_seconds:.2f} s; slowest event apply {slowest}")
    page.screenshot(path=str(ARTIFACTS / "live-run-300x100.png"), full_page=False)


BIGGER_RUN = """
from django.contrib.auth import get_user_model
from tests.factories import recorded_run
owner = get_user_model().objects.get(username={username!r})
print(recorded_run(owner=owner, name="bigger", candidates=1001, val_tasks=2, climbing=True).pk)
"""

CHARTS_DRAWN = """() => ['chart-score', 'chart-lineage', 'chart-front', 'chart-scatter', 'chart-verdicts']
  .map((id) => Boolean(document.getElementById(id).data))"""


def test_a_run_of_over_a_thousand_candidates_draws_every_chart_and_lists_every_candidate_on_demand(
    page, frontier_server
):
    result = frontier_server.manage("shell", "-c", BIGGER_RUN.format(username=E2E_USERNAME))
    run_id = int(result.stdout.strip().splitlines()[-1])
    page.goto(f"/runs/{run_id}/")
    expect(page.locator("[data-field=live]")).to_have_text("● live")
    # The charts below the fold follow once the page is live: none is left undrawn.
    wait_until(lambda: page.evaluate(CHARTS_DRAWN) == [True] * 5, what="every chart drawn")
    assert len(page.evaluate("document.getElementById('chart-scatter').data[0].x")) == 1001
    # The lineage starts summarised and says so; the whole of it is one click away.
    shown = len(page.evaluate("document.getElementById('chart-lineage').data[1].x"))
    assert shown < 1001
    expect(page.locator("[data-field=lineage-count]")).to_contain_text(
        f"Showing {shown} of 1001 candidates"
    )
    page.get_by_role("button", name="Draw the whole lineage").click()
    wait_until(
        lambda: len(page.evaluate("document.getElementById('chart-lineage').data[1].x")) == 1001,
        what="the whole lineage",
    )
    expect(page.locator("[data-field=lineage-rows]")).to_be_hidden()
    # The table starts with the first 500 candidates and says so; the rest come on demand.
    note = page.locator("[data-field=table-count]")
    expect(note).to_have_text("Showing the first 500 of 1001 candidates (in candidate order).")
    assert page.locator("#candidate-rows tr").count() == 500
    page.get_by_role("button", name="Show more candidates").click()
    expect(note).to_have_text("Showing the first 1000 of 1001 candidates (in candidate order).")
    page.get_by_role("button", name="Show all").click()
    expect(page.locator("#candidate-rows tr")).to_have_count(1001)
    expect(page.locator("[data-field=table-rows]")).to_be_hidden()
    assert page.locator("#candidate-rows tr").last.get_attribute("data-candidate-index") == "1000"


def test_the_launch_form_slows_the_simulator_enough_to_watch_the_run(page, demo_data):
    """At the API's 0 ms a small simulated run ends before its page draws; the
    form's simulator latency starts at 800 ms per call, labelled with its unit,
    and the plan's wall time follows it."""
    page.goto("/runs/new/")
    latency = page.get_by_label("Simulator latency (ms per call, demo only)")
    expect(latency).to_have_value("800")
    page.get_by_label("Task set").select_option(label="e2e refunds (8 tasks)")
    plan = page.locator("[data-field=plan]")
    expect(plan).to_contain_text("(800 ms per task call)")
    latency.fill("0")
    expect(plan).not_to_contain_text("ms per task call")


FIVE_CHECKS = {
    "id": "e2e-five-checks",
    "checks": [
        {"id": "refund", "type": "contains", "params": {"value": "refund"}},
        {"id": "order", "type": "contains", "params": {"value": "order number"}},
        {"id": "no-gift-card", "type": "not_contains", "params": {"value": "gift card"}},
        {"id": "short", "type": "max_length", "params": {"value": 600}},
        {"id": "reference", "type": "regex", "params": {"pattern": "REF-\\d{4}"}},
    ],
}


def test_a_simulator_run_says_what_the_simulator_cannot_learn_and_where_it_tops_out(
    page, frontier_server, demo_data
):
    """The simulated reflection learns only what feedback spells out: a regex
    check's feedback quotes a pattern, so with one regex among five equal checks
    a run plateaus at 0.80. The run page says so, beside the score chart, from
    the run's own verifiers and tasks; where everything can be learnt it says
    that instead."""
    api = Api(frontier_server.url, frontier_server.new_token())
    assert api.call("POST", "/api/verifiers/", {"spec": FIVE_CHECKS})[0] == 201
    task_set = next(t for t in api.call("GET", "/api/tasksets/")[1] if t["name"] == "e2e refunds")
    runs = {}
    for verifier in ("e2e-five-checks", "e2e-refund"):
        config = {
            "task_set_id": task_set["id"],
            "verifier_ids": [verifier],
            "budget": {"max_metric_calls": 12},
        }
        status, run, _ = api.call("POST", "/api/runs/", {"config": config})
        assert status == 201, run
        runs[verifier] = run["id"]

    page.goto(f"/runs/{runs['e2e-five-checks']}/")
    note = page.locator("#chart-score").locator("xpath=..").locator("[data-field=simulator-note]")
    expect(note).to_contain_text("Simulated models.")
    expect(note).to_contain_text("patterns (e2e-five-checks/reference: its feedback quotes a regex")
    expect(note).to_contain_text("tops out near 0.80 on the val set (4 tasks)")
    expect(note).to_contain_text("Real models are not limited this way.")
    ARTIFACTS.mkdir(exist_ok=True)
    note.screenshot(path=str(ARTIFACTS / "simulator-note.png"))

    page.goto(f"/runs/{runs['e2e-refund']}/")
    note = page.locator("[data-field=simulator-note]")
    expect(note).to_contain_text("the feedback spells out everything the verifiers check")
    expect(page.locator("[data-field=simulator-ceiling]")).to_have_text("1.00")


def test_a_dry_run_lists_each_problem_next_to_its_field_and_launches_nothing(page, demo_data):
    page.goto("/runs/new/")
    page.get_by_label("Task set").select_option(label="e2e refunds (8 tasks)")
    page.get_by_label("Val split").fill("nope")
    page.get_by_role("button", name="Add component").click()
    components = page.locator("#components .component")
    expect(components).to_have_count(2)
    components.nth(1).get_by_label("Text").fill("   ")
    page.locator("[name='budget.preset']").select_option(label="exact number of metric calls")
    page.get_by_label("Exact metric calls").fill("6")
    page.get_by_label("Concurrency").fill("0")
    page.get_by_role("button", name="Dry run", exact=True).click()

    # The config's own shape is checked first…
    expect(page.locator("[data-problems-for=seed_components]")).to_contain_text(
        "component 'component_2' is empty"
    )
    expect(page.locator("[data-problems-for=concurrency]")).to_contain_text("concurrency:")
    expect(
        page.locator("[data-problems-for=config]")
    ).to_be_hidden()  # each problem sits by its own field
    page.get_by_label("Concurrency").fill("4")
    expect(page.locator("[data-field=dry-run-result]")).to_contain_text("problem(s) found")
    components.nth(1).get_by_label("Text").fill("Be brief.")
    page.get_by_role("button", name="Dry run", exact=True).click()
    # …then what it refers to: splits, verifiers.
    expect(page.locator("[data-problems-for=splits]")).to_contain_text(
        'splits.val: task set "e2e refunds" has no tasks in split "nope"'
    )
    expect(page.locator("[data-problems-for=verifier_ids]")).to_contain_text(
        "choose at least one verifier"
    )
    expect(page.locator("[data-problems-for=seed_components]")).to_be_hidden()

    runs_before = page.request.get("/runs/list.json").json()["runs"]
    page.get_by_role("button", name="Launch", exact=True).click()
    expect(page.locator("[data-field=dry-run-result]")).to_contain_text("nothing was launched")
    assert page.request.get("/runs/list.json").json()["runs"] == runs_before

    # Two components with one name would silently become one: refused by name.
    components.nth(1).get_by_label("Component name").fill("instructions")
    page.get_by_role("button", name="Dry run", exact=True).click()
    expect(page.locator("[data-problems-for=seed_components]")).to_have_text(
        'seed_components: two components are named "instructions": rename one'
    )

    components.nth(1).get_by_role("button", name="Remove").click()
    expect(components).to_have_count(1)
    page.get_by_label("Val split").fill("val")
    page.locator("[name=verifier_ids][value=e2e-refund]").check()
    page.get_by_role("button", name="Dry run", exact=True).click()
    expect(page.locator("[data-field=dry-run-result]")).to_have_text(
        "dry run passed: ready to launch"
    )
    expect(page.locator("[data-problems-for='budget.warning']")).to_contain_text(
        "budget: 6 metric calls allow only 0 proposal(s)"
    )


def test_after_logging_out_the_sockets_say_access_denied_instead_of_retrying_forever(
    page, demo_data
):
    # Over the wire a refused handshake looks like a network drop (code 1006);
    # the pages tell the two apart by asking for themselves again.
    launch_demo_run(page, budget=40, latency_ms=0)
    page.context.clear_cookies()
    page.evaluate("window.__frontierSocket.close()")
    expect(page.locator("[data-field=live]")).to_have_text(
        "access denied: reload to log in", timeout=15_000
    )

    login(page)
    page.goto("/runs/")
    expect(page.locator("[data-field=live]")).to_have_text("● live")
    page.context.clear_cookies()
    page.evaluate("window.__frontierRunsSocket.close()")
    expect(page.locator("[data-field=live]")).to_have_text(
        "access denied: reload to log in", timeout=15_000
    )
