"""The Content Security Policy holds on every page: each page of the URLconf
(resolved from it, so a new page is covered without touching this file) is
loaded in Chromium against a real server, with a recorded run, a verifier with
two versions, a task set and a token to point at; the policy header is there
and the browser reports no violation and no console error.

The policy allows no inline style at all, and Plotly writes style attributes
for everything it draws (static/js/csp-style-attributes.js routes them through
the CSSOM): the charts are hovered, their legends clicked, their toolbars used
and a chart with rich text and annotations drawn, and every node Plotly styled
must carry its style (a refused style attribute leaves the node unstyled)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.e2e.conftest import ARTIFACTS, E2E_USERNAME, Api, wait_for_js
from tests.url_patterns import argument_names, url_patterns

pytestmark = pytest.mark.e2e

SEED = """
import json
from django.contrib.auth import get_user_model
from dashboard.account_services import api_token_create
from optimizer.examples import load_examples
from tests.factories import recorded_run
from verifiers_app.models import Verifier
from verifiers_app.services import verifier_update
owner = get_user_model().objects.get(username={username!r})
load_examples(user=owner)
run = recorded_run(owner, candidates=4, val_tasks=4, holdout_tasks=2, name="CSP sweep", task_prefix="val-")
verifier = Verifier.objects.filter(owner=owner).order_by("pk").first()
verifier_update(verifier=verifier, spec={{**verifier.spec, "passThreshold": 0.5}}, user=owner)
token, _ = api_token_create(user=owner, name="csp sweep")
from optimizer.tasksets.models import TaskSet
example = TaskSet.objects.filter(owner=owner, tasks__split="train").exclude(pk=run.task_set_id).order_by("pk").first()
from optimizer.scorings.execute import scoring_execute
from optimizer.scorings.services import scoring_create
scoring = scoring_create(run=run, user=owner, specs=run.verifier_specs, source=[], name="CSP sweep")
scoring_execute(scoring.pk)
print(json.dumps({{"example_set": example.pk, "run_id": run.pk, "index": 0, "slug": verifier.slug, "pk": run.task_set_id,
                  "task_pk": run.task_set.tasks.first().pk, "token_pk": token.pk, "scoring_id": scoring.pk}}))
"""
# Not pages: POST-only actions and file downloads.
NOT_PAGES = {
    "runs:control",
    "runs:scoring_fork",
    "runs:scoring_json",
    "verifiers:delete",
    "verifiers:duplicate",
    "account:revoke",
    "logout",
    "tasksets:split",
    "tasksets:assign",
    "runs:dry_run",
    "verifiers:export",
    "tasksets:import_confirm",
    "tasksets:export",
    "tasksets:duplicate",
    "tasksets:delete",
}
# Pages that also need a query to show something.
QUERIES = {"compare:task": "?task=val-000&c=0&c=1"}
# Pages that answer 400 without state made elsewhere (an upload token): their
# error page is still loaded and checked for violations.
NEEDS_STATE = {"/tasksets/import/preview/"}
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}:${e.columnNumber} ${e.sample}`));
"""


def pages(ids: dict) -> list[str]:
    urls = []
    for name, pattern in url_patterns():
        namespace = name.split(":")[0]
        admin_page = name == "admin:index" or name.endswith(
            ("_changelist", "_add")
        )  # each admin list and form
        if namespace == "api" or (namespace == "admin" and not admin_page) or name in NOT_PAGES:
            continue
        if any(
            name.endswith(suffix)
            for suffix in (
                "download_txt",
                "download_json",
                "download_best_txt",
                "download_best_json",
                "export_json",
                "export_csv",
                "list_json",
                "snapshot",
            )
        ):
            continue
        values = dict(ids, pk=ids["token_pk"] if namespace == "account" else ids["pk"])
        urls.append(
            reverse(name, kwargs={arg: values[arg] for arg in argument_names(pattern)})
            + QUERIES.get(name, "")
        )
    return urls


@pytest.fixture(scope="module")
def ids(frontier_server) -> dict:
    return json.loads(
        frontier_server.manage("shell", "-c", SEED.format(username=E2E_USERNAME))
        .stdout.strip()
        .splitlines()[-1]
    )


def policy_errors(page) -> list[str]:
    """Console errors that name the policy (a blocked eval, a refused style…)."""
    errors: list[str] = []
    page.on(
        "console",
        lambda message: (
            errors.append(f"{page.url}: {message.text}")
            if message.type == "error" and "Content Security Policy" in message.text
            else None
        ),
    )
    return errors


def test_every_page_loads_under_the_strict_policy_without_a_violation(page, ids):
    errors = policy_errors(page)
    page.add_init_script(RECORD_VIOLATIONS)
    visited = pages(ids)
    assert len(visited) >= 20
    for url in visited:
        probe = page.request.get(url, max_redirects=0)
        if probe.status == 405 or "attachment" in probe.headers.get("content-disposition", ""):
            continue  # a POST-only action or a download: not a page
        if url == "/favicon.ico":
            continue  # a redirect to a static file (an image): no page, no scripts
        response = page.goto(url)
        assert response.status < 400 or (url in NEEDS_STATE and response.status == 400), (
            url,
            response.status,
        )
        assert "script-src 'self'" in response.headers.get("content-security-policy", ""), url
        page.wait_for_timeout(300)  # page scripts run, charts draw
        assert page.evaluate("window.__csp") == [], (url, page.evaluate("window.__csp"))
    assert errors == []


# Every node under a chart whose style attribute did not take (a refused inline
# style leaves `el.style` empty while the attribute text is there).
UNSTYLED = """() => [...document.querySelectorAll('.js-plotly-plot [style]')]
  .filter((el) => el.getAttribute('style').trim() && el.style.length === 0)
  .map((el) => `${el.tagName}.${el.getAttribute('class')} style="${el.getAttribute('style').slice(0, 60)}"`)"""
# Up to `n` points of each trace of a chart, and the middle of its plot area
# (a heatmap cell), in page coordinates.
HOVER_TARGETS = """([id, n]) => {
  const el = document.getElementById(id), targets = [];
  for (const layer of el.querySelectorAll('.trace')) {
    for (const p of [...layer.querySelectorAll('.point')].slice(0, n)) {
      const r = p.getBoundingClientRect();
      if (r.width || r.height) targets.push({ x: r.left + r.width / 2, y: r.top + r.height / 2 });
    }
  }
  const drag = el.querySelector('.nsewdrag');
  if (drag) { const r = drag.getBoundingClientRect(); targets.push({ x: r.left + r.width / 2, y: r.top + r.height / 2 }); }
  return targets;
}"""
HOVER_BOX = """(id) => {
  const box = document.querySelector(`#${id} .hoverlayer .hovertext path`);
  return box ? getComputedStyle(box).fill : null;
}"""
RICH_CHART = """() => {
  const div = document.createElement('div');
  div.id = 'csp-rich-text';
  div.className = 'chart';
  document.querySelector('main').prepend(div);
  return Plotly.newPlot(div, [
    { x: [1, 2, 3], y: [0.2, 0.9, 0.5], name: '<b>bold</b> <i>series</i>', mode: 'lines+markers', marker: { color: '#2f9e44' } },
    { x: [1, 2, 3], y: [0.4, 0.3, 0.7], name: 'x<sup>2</sup> other', type: 'bar', marker: { color: '#9c36b5' } },
  ], {
    title: { text: '<b>Bold title</b> and <i>italic</i> x<sub>i</sub>' },
    xaxis: { title: { text: '<b>metric calls</b>' } }, yaxis: { title: { text: 'score <span style="color:#e03131">red</span>' } },
    annotations: [{ x: 2, y: 0.9, text: '<b>peak</b> here', showarrow: true, arrowcolor: '#e03131', font: { color: '#e03131' },
                    bgcolor: '#fff3bf', bordercolor: '#f08c00' }],
    showlegend: true, hovermode: 'closest',
  }, { displaylogo: false }).then(() => true);
}"""


def _hover_every_chart(page, chart_ids: list[str]) -> dict:
    """Hover points of each chart; the hover box's fill per chart (None: no box)."""
    fills = {}
    for chart in chart_ids:
        page.locator(f"#{chart} .main-svg").first.wait_for()
        page.locator(f"#{chart}").scroll_into_view_if_needed()
        for target in page.evaluate(HOVER_TARGETS, [chart, 3]):
            page.mouse.move(target["x"], target["y"])
            page.wait_for_timeout(120)  # Plotly throttles hover
            fills[chart] = page.evaluate(HOVER_BOX, chart) or fills.get(chart)
        page.mouse.move(1, 1)
    return fills


def _use_legend_and_toolbar(page, chart: str) -> None:
    legend = page.locator(f"#{chart} .legend .traces").first
    if legend.count():
        legend.click()  # hide the trace…
        page.wait_for_timeout(400)  # (two clicks within 300 ms are Plotly's double click: isolate)
        legend.click()  # …and show it again
        page.wait_for_timeout(150)
    page.locator(f"#{chart} .main-svg").first.hover()
    button = page.locator(f"#{chart} .modebar-btn").first
    button.hover()
    for title in ("Zoom in", "Autoscale"):  # a relayout redraws axes, ticks and the toolbar
        page.locator(f"#{chart} .modebar-btn[data-title='{title}']").click()
        page.wait_for_timeout(150)


def test_charts_hovered_clicked_and_drawn_with_rich_text_keep_their_styles_under_the_policy(
    page, ids, frontier_server
):
    errors = policy_errors(page)
    page.add_init_script(RECORD_VIOLATIONS)
    ARTIFACTS.mkdir(exist_ok=True)

    page.goto(f"/runs/{ids['run_id']}/")
    charts = ["chart-score", "chart-lineage", "chart-front", "chart-scatter", "chart-verdicts"]
    fills = _hover_every_chart(page, charts)
    # Hover boxes take their trace's colour (the default, a refused style, is black).
    assert fills["chart-score"] not in (None, "rgb(0, 0, 0)"), fills
    assert fills["chart-lineage"] not in (None, "rgb(0, 0, 0)"), fills
    for chart in ("chart-score", "chart-verdicts"):
        _use_legend_and_toolbar(page, chart)
    page.mouse.move(*_first_point(page, "chart-lineage"))
    page.locator("#chart-lineage .hoverlayer .hovertext").wait_for()
    page.screenshot(path=str(ARTIFACTS / "csp-run-page.png"), full_page=True)
    assert page.evaluate(UNSTYLED) == []
    assert page.evaluate("window.__csp") == [], page.evaluate("window.__csp")

    # A run drawn live: events extend the charts in place while the mouse hovers them.
    api = Api(frontier_server.url, frontier_server.new_token())
    config = {
        "task_set_id": ids["example_set"],
        "verifier_ids": [ids["slug"]],
        "budget": {"max_metric_calls": 400},
        "task_lm": {"provider": "demo", "model": "demo-task", "simulated_latency_ms": 40},
    }
    status, run, _ = api.call("POST", "/api/runs/", {"config": config})
    assert status == 201, run
    page.goto(f"/runs/{run['id']}/")
    wait_for_js(
        page,
        "document.querySelectorAll('#candidate-rows tr').length >= 2",
        timeout=60,
        what="live candidates",
    )
    _hover_every_chart(page, ["chart-score", "chart-lineage"])
    api.call("POST", f"/api/runs/{run['id']}/stop")
    assert page.evaluate(UNSTYLED) == []
    assert page.evaluate("window.__csp") == [], page.evaluate("window.__csp")

    page.goto(f"/runs/compare/?a={ids['run_id']}&b={ids['run_id']}")
    compare_charts = page.evaluate(
        "() => [...document.querySelectorAll('.js-plotly-plot')].map((el) => el.id)"
    )
    assert compare_charts, "the compare page draws a chart"
    _hover_every_chart(page, compare_charts)
    page.screenshot(path=str(ARTIFACTS / "csp-compare.png"), full_page=True)
    assert page.evaluate(UNSTYLED) == []
    assert page.evaluate("window.__csp") == [], page.evaluate("window.__csp")

    # Rich text (<b>, <i>, <sub>, a coloured <span>), annotations, a legend of two kinds of trace.
    assert page.evaluate(RICH_CHART)
    _use_legend_and_toolbar(page, "csp-rich-text")
    fills = _hover_every_chart(page, ["csp-rich-text"])
    assert fills["csp-rich-text"] in ("rgb(47, 158, 68)", "rgb(156, 54, 181)"), fills
    weights = page.evaluate(
        "() => [...document.querySelectorAll('#csp-rich-text .gtitle tspan')]"
        ".map((t) => getComputedStyle(t).fontWeight)"
    )
    assert "700" in weights, weights
    annotation = page.evaluate(
        "() => getComputedStyle(document.querySelector('#csp-rich-text .annotation-text')).fill"
    )
    assert annotation == "rgb(224, 49, 49)", annotation
    page.mouse.move(*_first_point(page, "csp-rich-text"))
    page.locator("#csp-rich-text .hoverlayer .hovertext").wait_for()
    page.locator("#csp-rich-text").screenshot(path=str(ARTIFACTS / "csp-rich-text.png"))
    assert page.evaluate(UNSTYLED) == []
    assert page.evaluate("window.__csp") == [], page.evaluate("window.__csp")
    assert errors == []


BIG_RUN = """
from django.contrib.auth import get_user_model
from tests.factories import recorded_run
run = recorded_run(get_user_model().objects.get(username={username!r}), candidates=1001, val_tasks=2, name="WebGL sweep")
print(run.pk)
"""
RUN_CHARTS = ["chart-score", "chart-lineage", "chart-front", "chart-scatter", "chart-verdicts"]
CHARTS_STATE = """(ids) => ids.map((id) => {
  const el = document.getElementById(id);
  return { id, types: (el._fullData || []).map((t) => t.type), text: el.textContent };
})"""


def test_a_run_page_past_1000_candidates_draws_its_webgl_charts_under_the_policy(
    page, frontier_server
):
    """Past 1,000 points the run page's point charts are WebGL scatters
    (static/js/run/charts.js). Plotly compiles their WebGL programs with
    `new Function` unless the bundle has scattergl's strict variant: the policy
    refused that eval and the score and 2-D front charts read "WebGL is not
    supported by your browser" instead (the full plotly.min.js did)."""
    run_id = (
        frontier_server.manage("shell", "-c", BIG_RUN.format(username=E2E_USERNAME))
        .stdout.strip()
        .splitlines()[-1]
    )
    page.add_init_script(RECORD_VIOLATIONS)
    page.goto(f"/runs/{run_id}/")
    page.locator("[data-field=live]").filter(has_text="● live").wait_for()
    wait_for_js(
        page,
        "(ids) => ids.every((id) => document.querySelector(`#${id} .main-svg`))",
        RUN_CHARTS,
        timeout=30,
        what="every chart drawn",
    )
    page.wait_for_timeout(500)  # WebGL draws in the next frames
    charts = {chart["id"]: chart for chart in page.evaluate(CHARTS_STATE, RUN_CHARTS)}
    assert (
        "scattergl" in charts["chart-score"]["types"]
        and "scattergl" in charts["chart-scatter"]["types"]
    ), charts
    assert not [c["id"] for c in charts.values() if "WebGL is not supported" in c["text"]]
    assert page.evaluate("window.__csp") == [], page.evaluate("window.__csp")


def _first_point(page, chart: str) -> tuple[float, float]:
    page.locator(f"#{chart}").scroll_into_view_if_needed()
    target = page.evaluate(HOVER_TARGETS, [chart, 1])[0]
    return target["x"], target["y"]


def test_the_api_docs_render_and_run_an_operation_under_the_strict_policy(page, ids):
    # django-ninja's Swagger UI (its own static files): the settings are a JSON
    # data block, the init script a file; React writes styles through the CSSOM.
    errors = policy_errors(page)
    page.add_init_script(RECORD_VIOLATIONS)
    response = page.goto("/api/docs")
    assert "style-src 'self'" in response.headers.get("content-security-policy", "")
    page.locator(".opblock").first.wait_for()
    assert page.locator(".opblock").count() >= 15
    operation = page.locator(".opblock-get", has_text="/api/runs/").first
    operation.locator(".opblock-summary").click()
    operation.get_by_role("button", name="Try it out").click()
    operation.get_by_role("button", name="Execute").click()
    status = operation.locator(".live-responses-table tbody .response-col_status").first
    status.wait_for()
    assert status.inner_text().strip().startswith("200")
    operation.locator(
        ".live-responses-table .highlight-code"
    ).first.wait_for()  # the JSON, highlighted
    page.locator(".models, section.models").first.scroll_into_view_if_needed()
    page.locator("section.models h4").first.click()  # the schemas list opens
    page.wait_for_timeout(300)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "csp-api-docs.png"), full_page=True)
    assert page.evaluate("window.__csp") == [], page.evaluate("window.__csp")
    assert errors == []


SHIM_PROBE = """() => {
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  const rect = document.createElementNS('http://www.w3.org/2000/svg', 'rect');
  const div = document.createElement('div');
  svg.appendChild(rect);
  document.body.append(svg, div);
  rect.setAttribute('style', 'fill: rgb(224, 49, 49); stroke-width: 3px');
  div.setAttributeNS(null, 'STYLE', 'color: rgb(47, 158, 68)');
  rect.setAttribute('class', 'probe');
  const out = {
    fill: getComputedStyle(rect).fill, stroke: getComputedStyle(rect).strokeWidth,
    color: getComputedStyle(div).color, className: rect.getAttribute('class'),
    attribute: rect.getAttribute('style'),
  };
  const parsed = document.createElement('div');  // markup is not routed: still refused
  parsed.innerHTML = '<span style="color: rgb(1, 2, 3)">x</span>';
  document.body.append(parsed);
  out.parsed = getComputedStyle(parsed.firstChild).color;
  return out;
}"""


def test_style_attributes_set_by_script_apply_through_the_cssom_and_markup_styles_stay_refused(
    page, ids
):
    page.add_init_script(RECORD_VIOLATIONS)
    page.goto("/runs/")
    probe = page.evaluate(SHIM_PROBE)
    assert (
        probe["fill"] == "rgb(224, 49, 49)"
        and probe["stroke"] == "3px"
        and probe["color"] == "rgb(47, 158, 68)"
    )
    assert probe["className"] == "probe" and "fill" in probe["attribute"]
    assert probe["parsed"] != "rgb(1, 2, 3)"  # the policy still holds for style="…" in markup
    violations = page.evaluate("window.__csp")
    assert len(violations) == 1 and violations[0].startswith("style-src-attr"), violations
