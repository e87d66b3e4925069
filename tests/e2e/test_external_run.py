"""A GEPA run in the user's own process, watched live: a real `gepa.optimize`
(examples/external/track_gepa_run.py: the user's own adapter, offline) runs in
a subprocess with frontier_tracker against the embedded server. Chromium sees
the external run's page move; the server is stopped mid-run for 30 s and
restarted (gepa finishes while it is down, nothing is lost); Stop from the API
ends a run between iterations; and the run's run_dir replays as the same run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import ARTIFACTS, E2E_USERNAME, ROOT, _wait_for, session_login
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

EXAMPLE = ROOT / "examples" / "external" / "track_gepa_run.py"
OUTAGE_SECONDS = 30


@pytest.fixture(scope="module")
def token(frontier_server) -> str:
    return frontier_server.new_token()


def api(server, token, method, path, body=None):
    request = urllib.request.Request(
        server.url + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def start_example(server, token, tmp_path, *, name, budget, delay) -> subprocess.Popen:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "DATABASE", "FRONTIER"))
    }
    return subprocess.Popen(
        [
            sys.executable,
            str(EXAMPLE),
            "--url",
            server.url,
            "--token",
            token,
            "--name",
            name,
            "--budget",
            str(budget),
            "--delay",
            str(delay),
            "--run-dir",
            str(tmp_path / "run_dir"),
            "--done-file",
            str(tmp_path / "done"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "client.log", "w"),
        text=True,
    )


def external_run(server, token, name) -> dict | None:
    return next(
        (
            r
            for r in api(server, token, "GET", "/api/runs/")
            if r["name"] == name and r["kind"] == "external"
        ),
        None,
    )


def killed_after_its_seed(server, token, tmp_path, name) -> dict:
    """An external run whose tracker's process is killed once its seed is scored."""
    client = start_example(server, token, tmp_path, name=name, budget=5000, delay=0.2)
    try:
        return wait_until(
            lambda: (r := external_run(server, token, name)) and r["best_score"] is not None and r,
            timeout=60,
            what="the run's seed to be scored",
        )
    finally:
        client.kill()
        client.wait(timeout=30)


def restart(server) -> None:
    port = server.url.rsplit(":", 1)[1]
    with open(server.log_path, "a") as log:
        server.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", port],
            cwd=ROOT,
            env=server.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    _wait_for(server.url + "/login/", server.process, server)


def test_an_external_run_moves_live_survives_a_30_s_server_outage_and_replays_as_the_same_run(
    frontier_server, token, page, tmp_path
):
    client = start_example(
        frontier_server, token, tmp_path, name="outage run", budget=150, delay=0.25
    )
    try:
        run = wait_until(
            lambda: external_run(frontier_server, token, "outage run"),
            timeout=60,
            what="the run to appear",
        )
        page.goto(f"/runs/{run['id']}/")
        expect(page.locator(".badge-external")).to_be_visible()
        expect(page.locator("[data-field=live]")).to_have_text("● live")
        seen = page.evaluate("() => window.__frontierRun.candidates()")
        wait_until(
            lambda: page.evaluate("() => window.__frontierRun.candidates()") > max(seen, 1),
            timeout=60,
            what="the page to draw new candidates live",
        )
        assert page.locator("[data-field=client]").text_content().startswith("heard from")

        frontier_server.process.terminate()
        try:
            frontier_server.process.wait(timeout=30)
        except (
            subprocess.TimeoutExpired
        ):  # a server that takes its time to shut down is killed: an outage all the same
            frontier_server.process.kill()
            frontier_server.process.wait(timeout=30)
        down_at = time.monotonic()
        # gepa goes on without the server: it finishes while the server is still down.
        wait_until(
            (tmp_path / "done").exists,
            timeout=120,
            what="gepa.optimize to return during the outage",
        )
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_at)))
        assert client.poll() is None  # still holding its buffered events
        restart(frontier_server)
        stdout, _ = client.communicate(timeout=120)
    finally:
        if client.poll() is None:
            client.kill()
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["delivered"] and summary["dropped"] == 0, (tmp_path / "client.log").read_text()

    tracked = api(frontier_server, token, "GET", f"/api/runs/{run['id']}")
    assert tracked["status"] == "completed" and tracked["budget_used"] == summary["metric_calls"]
    assert (
        len(tracked["candidates"]) == summary["candidates"]
        and tracked["best_score"] == summary["best_score"]
    )

    # The page reconnected by itself and shows the end.
    expect(page.locator("[data-field=status]")).to_have_text("completed", timeout=30_000)
    assert page.evaluate("() => window.__frontierRun.candidates()") == summary["candidates"]
    expect(page.locator("[data-field=client]")).to_contain_text("finished")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "external-run.png"), full_page=True)

    # Its run_dir, replayed, is the same run: nothing was lost or doubled on the way.
    replay = json.loads(
        frontier_server.manage(
            "optimize", "import-gepa", str(tmp_path / "run_dir"), "--user", E2E_USERNAME
        ).stdout
    )
    replayed = api(frontier_server, token, "GET", f"/api/runs/{replay['run_id']}")

    def shape(detail):
        return [
            (c["index"], c["parents"], c["components"], round(c["val_score"], 6))
            for c in detail["candidates"]
        ]

    assert shape(replayed) == shape(tracked)
    proposals = {
        rid: [(p["iteration"], p["accepted"]) for p in proposals_of(frontier_server, rid)]
        for rid in (run["id"], replay["run_id"])
    }
    assert (
        proposals[run["id"]] == proposals[replay["run_id"]]
    )  # each accepted and rejected proposal, once, in order
    assert any(not accepted for _, accepted in proposals[run["id"]])


def proposals_of(server, run_id) -> list[dict]:
    code = (
        "import json; from optimizer.models import RunEvent; "
        f"print('P=' + json.dumps([e.payload for e in RunEvent.objects.filter(run_id={run_id}, type='proposal').order_by('seq')]))"
    )
    out = server.manage("shell", "-c", code).stdout
    return json.loads(
        next(line for line in out.splitlines() if line.startswith("P=")).removeprefix("P=")
    )


def test_stop_from_the_api_ends_the_external_run_between_iterations(
    frontier_server, token, tmp_path
):
    client = start_example(
        frontier_server, token, tmp_path, name="stopped run", budget=5000, delay=0.2
    )
    try:
        run = wait_until(
            lambda: (
                (r := external_run(frontier_server, token, "stopped run"))
                and r["best_score"] is not None
                and r
            ),
            timeout=60,
            what="the run's seed to be scored",
        )
        assert (
            api(frontier_server, token, "POST", f"/api/runs/{run['id']}/stop")["status"]
            == "stopping"
        )
        stdout, _ = client.communicate(timeout=60)
    finally:
        if client.poll() is None:
            client.kill()
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["stopped"] and summary["metric_calls"] < 5000
    stopped = api(frontier_server, token, "GET", f"/api/runs/{run['id']}")
    assert (stopped["status"], stopped["phase"]) == ("stopped", "stopped by the user")
    assert stopped["budget_used"] == summary["metric_calls"]


def test_a_session_post_typed_multipart_without_a_boundary_is_refused_not_a_server_error(
    frontier_server, token
):
    # Found by schemathesis on a running (external) run: Django cannot parse such a
    # body, and the session path's CSRF check reads the form (a 500 if nothing refuses it first).
    run = api(frontier_server, token, "POST", "/api/external/runs", {"key": "no-boundary-0001"})
    browser = session_login(frontier_server.url)
    status, body, _ = browser.call(
        "POST",
        f"/api/runs/{run['id']}/stop",
        raw=b"",
        headers={"Content-Type": "multipart/form-data", "X-CSRFToken": browser.cookie("csrftoken")},
    )
    assert status in (400, 415) and body["problems"][0]["field"] == "body", body


def test_a_killed_trackers_run_reads_honestly_and_stop_on_the_page_ends_it_at_once(
    frontier_server, token, page, tmp_path
):
    """The tracker's process is killed mid-run. Its page never says "demo
    simulator" (the run used the user's own models) nor "0 tokens", its 2-D
    front is not drawn on prompt length (0 for every external candidate), and
    once the page calls the tracker silent, Stop ends the run at once and the
    page says why."""
    run = killed_after_its_seed(frontier_server, token, tmp_path, "killed run")
    page.goto(f"/runs/{run['id']}/")
    expect(page.locator("[data-field=cost]")).to_have_text("not reported")
    expect(page.locator("[data-field=tokens]")).to_have_text("tokens not reported")
    expect(page.locator("body")).not_to_contain_text("demo simulator")
    page.locator("#chart-scatter").scroll_into_view_if_needed()
    expect(page.locator("#chart-scatter .scatterlayer .trace")).not_to_have_count(0)
    assert page.locator("#axis-x").input_value() == "metric_calls"

    expect(page.locator("[data-field=client]")).to_contain_text("silent for", timeout=60_000)
    page.locator("[data-control=stop] button").click()
    expect(page.locator("[data-field=status]")).to_have_text("stopped", timeout=15_000)
    expect(page.locator("[data-field=stop-reason]")).to_have_text("stopped by the user")
    ended = api(frontier_server, token, "GET", f"/api/runs/{run['id']}")
    assert ended["status"] == "stopped" and "silent" in ended["phase"]


def test_a_killed_trackers_run_is_abandoned_after_the_silence_limit(
    frontier_server, token, page, tmp_path
):
    """Nobody presses Stop: once its tracker was silent for
    FRONTIER_EXTERNAL_SILENT_SECONDS (6 s here; the server restarted with it),
    the watchdog ends the run abandoned, the page says so, and the run can be
    deleted like any finished run."""
    frontier_server.process.terminate()
    frontier_server.process.wait(timeout=60)
    frontier_server.env.update(FRONTIER_EXTERNAL_SILENT_SECONDS="6", FRONTIER_RUN_STALE_SECONDS="4")
    restart(frontier_server)
    run = killed_after_its_seed(frontier_server, token, tmp_path, "abandoned run")
    page.goto(f"/runs/{run['id']}/")
    expect(page.locator("[data-field=status]")).to_have_text("abandoned", timeout=60_000)
    ended = api(frontier_server, token, "GET", f"/api/runs/{run['id']}")
    assert ended["status"] == "abandoned"
    assert ended["phase"].startswith("abandoned: its tracker was silent")
    deleted = urllib.request.Request(
        f"{frontier_server.url}/api/runs/{run['id']}",
        method="DELETE",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(deleted, timeout=10) as response:
        assert response.status == 204
    assert external_run(frontier_server, token, "abandoned run") is None
