"""The API as scripts use it: a real `manage.py serve` process, a plain HTTP
client (urllib) and only a token; sessions with their CSRF check; the CLI in
another process; docs/api.md's examples run verbatim; a client generated from
the OpenAPI document; the docs page offline in Chromium."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from websockets.sync.client import connect

from tests.e2e.conftest import ARTIFACTS, E2E_USERNAME, ROOT, Api, progress_only, session_login
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

SPEC = {
    "id": "script-refund",
    "name": "Script refund",
    "checks": [
        {"type": "contains", "params": {"value": "refund"}},
        {"type": "max_length", "params": {"value": 600}},
    ],
}
ROWS = [
    {
        "task_id": f"t{i}",
        "input": f"Customer {i} asks for a refund of order {i}.",
        "split": "train" if i < 3 else "val",
    }
    for i in range(6)
]
FINISHED = ("completed", "stopped", "failed")


@pytest.fixture(scope="module")
def token(frontier_server) -> str:
    return frontier_server.new_token()


@pytest.fixture
def api(frontier_server, token) -> Api:
    return Api(frontier_server.url, token)


def import_tasks(api: Api, name: str) -> int:
    status, body, _ = api.call(
        "POST",
        "/api/tasksets/import",
        {
            "name": name,
            "filename": "tasks.jsonl",
            "content": "".join(json.dumps(row) + "\n" for row in ROWS),
        },
    )
    assert status == 201, body
    return body["id"]


def run_status(api: Api, run_id: int) -> str:
    return api.call("GET", f"/api/runs/{run_id}")[1]["status"]


def test_a_script_with_only_a_token_creates_imports_launches_follows_stops_resumes_and_exports(
    api, frontier_server, token
):
    status, body, _ = api.call("POST", "/api/verifiers/", {"spec": SPEC})
    assert status == 201 and body["id"] == "script-refund", body
    task_set = import_tasks(api, "script tasks")
    config = {
        "task_set_id": task_set,
        "verifier_ids": ["script-refund"],
        "budget": {"max_metric_calls": 400},
        "task_lm": {"provider": "demo", "model": "demo-task", "simulated_latency_ms": 150},
    }
    status, body, _ = api.call("POST", "/api/runs/dry-run", {"config": config})
    assert status == 200 and (body["ok"], body["problems"], body["warnings"]) == (True, [], []), (
        body
    )
    assert body["plan"]["budget"]["metric_calls"] == 400 and body["plan"]["free"] is True
    status, run, _ = api.call("POST", "/api/runs/", {"config": config})
    assert (
        status == 201 and run["status"] == "queued" and run["url"].endswith(f"/runs/{run['id']}/")
    ), run

    # Follow the websocket with the same token (no cookie, no Origin header).
    ws_url = frontier_server.url.replace("http", "ws") + f"/ws/runs/{run['id']}/?after=0"
    seqs, types = [], []
    with connect(
        ws_url, additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=10
    ) as socket:
        while "candidate.new" not in types:
            message = json.loads(socket.recv(timeout=60))
            seqs.append(message["seq"])
            types.append(message["type"])
    assert seqs == list(range(1, len(seqs) + 1))

    status, body, _ = api.call("POST", f"/api/runs/{run['id']}/stop")
    assert status == 200 and body["status"] in ("stopping", "stopped"), body
    wait_until(lambda: run_status(api, run["id"]) == "stopped", what="the run to stop", timeout=60)
    status, body, _ = api.call("POST", f"/api/runs/{run['id']}/resume", {"extra_budget": 0})
    assert status == 200 and body["status"] == "queued", body
    wait_until(
        lambda: run_status(api, run["id"]) != "queued", what="the resumed run to start", timeout=30
    )
    status, body, _ = api.call("POST", f"/api/runs/{run['id']}/cancel")
    assert status == 200, body
    wait_until(lambda: run_status(api, run["id"]) in FINISHED, what="the run to end", timeout=60)

    status, events, _ = api.call("GET", f"/api/runs/{run['id']}/events?after=0&limit=5000")
    assert status == 200 and [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["type"] for e in events].count(
        "run.finished"
    ) == 2  # stopped, then cancelled after the resume
    status, detail, _ = api.call("GET", f"/api/runs/{run['id']}")
    best = api.call("GET", f"/api/runs/{run['id']}/candidates/{detail['best_candidate']}")[1]
    assert best["evaluations"] and all(e["split"] in ("train", "val") for e in best["evaluations"])
    status, document, headers = api.call("GET", f"/api/runs/{run['id']}/export")
    assert status == 200 and document["format"] == "frontier.run"
    assert len(document["candidates"]) == len(detail["candidates"]) and len(
        document["events"]
    ) == len(events)


def test_a_script_with_only_a_token_pauses_and_resumes_a_run_twice(api, frontier_server):
    """Pause asked mid-run: the run ends its iteration and says "paused" (no
    run.finished); a second pause changes nothing; resume needs no budget and
    the run goes on; after each pause budget_used equals the task calls the run
    counted. A finished run's pause is a 409 naming its status."""
    status, body, _ = api.call("POST", "/api/verifiers/", {"spec": {**SPEC, "id": "pause-refund"}})
    assert status == 201, body
    config = {
        "task_set_id": import_tasks(api, "pause tasks"),
        "verifier_ids": ["pause-refund"],
        "budget": {"max_metric_calls": 120},
        "task_lm": {"provider": "demo", "model": "demo-task", "simulated_latency_ms": 100},
    }
    status, run, _ = api.call("POST", "/api/runs/", {"config": config})
    assert status == 201, run
    run_id = run["id"]
    for _ in range(2):
        wait_until(
            lambda: (
                api.call("GET", f"/api/runs/{run_id}")[1]["status"] == "running"
                and len(api.call("GET", f"/api/runs/{run_id}")[1]["candidates"]) >= 1
            ),
            what="the run to be running",
            timeout=60,
        )
        status, body, _ = api.call("POST", f"/api/runs/{run_id}/pause")
        assert status == 200 and body["status"] in ("running", "paused"), body
        status, again, _ = api.call("POST", f"/api/runs/{run_id}/pause")
        assert status == 200, again
        wait_until(lambda: run_status(api, run_id) == "paused", what="the pause", timeout=60)
        status, paused, _ = api.call("GET", f"/api/runs/{run_id}")
        assert paused["budget_used"] == paused["usage"]["task"]["calls"], paused
        assert paused["phase"] == f"paused by {E2E_USERNAME}" and not paused["pause_requested"]
        status, body, _ = api.call("POST", f"/api/runs/{run_id}/resume", {})
        assert status == 200 and body["status"] == "queued", body
    wait_until(lambda: run_status(api, run_id) in FINISHED, what="the run to end", timeout=120)
    status, events, _ = api.call("GET", f"/api/runs/{run_id}/events?after=0&limit=5000")
    types = [e["type"] for e in events]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert types.count("run.paused") == 2 and types.count("run.finished") == 1
    status, body, _ = api.call("POST", f"/api/runs/{run_id}/pause")
    assert status == 409, body
    assert body["detail"].endswith("; only a queued or running run can be paused"), body


def test_a_check_type_typo_is_saved_with_a_warning_that_dry_run_and_launch_repeat(api):
    """Scoring skips an unknown check type (its weight gone): the script is told
    where it typed it and what it probably meant, wherever the spec is used."""
    spec = {
        "id": "typo-check",
        "checks": [{"id": "has-refund", "type": "containz", "params": {"value": "refund"}}],
    }
    warning = 'checks[0].type: unknown check type "containz" (did you mean "contains"? scoring skips this check)'
    status, body, _ = api.call("POST", "/api/verifiers/", {"spec": spec})
    assert status == 201 and body["warnings"] == [warning], body
    status, body, _ = api.call(
        "PUT", "/api/verifiers/typo-check", {"spec": {**spec, "name": "typo"}}
    )
    assert status == 200 and body["warnings"] == [warning], body
    config = {
        "task_set_id": import_tasks(api, "typo tasks"),
        "verifier_ids": ["typo-check"],
        "budget": {"max_metric_calls": 40},
        "task_lm": {"provider": "demo", "model": "demo-task"},
    }
    status, body, _ = api.call("POST", "/api/runs/dry-run", {"config": config})
    assert status == 200 and body["ok"] and f"verifier typo-check: {warning}" in body["warnings"], (
        body
    )
    status, body, _ = api.call("POST", "/api/runs/", {"config": config})
    assert status == 201 and f"verifier typo-check: {warning}" in body["warnings"], body


def test_a_script_saves_test_cases_expecting_a_verdict_and_a_passed_and_a_bad_one_is_named(api):
    """A test case states what it expects of each judgment (docs/verifier-semantics.md
    "Passed and verdict"): `expect` (verdict, or any) and `expect_passed` (passed,
    failed or any). A bad value is a 400 naming the field; nothing is saved."""
    spec = {
        "id": "script-cases",
        "passThreshold": 0.9,
        "checks": [{"id": "refund", "type": "contains", "params": {"value": "refund"}}],
    }
    cases = [
        {"name": "offers", "output": "A refund.", "expect": "pass", "expect_passed": "passed"},
        {"name": "silent", "output": "No.", "expect": "any", "expect_passed": "failed"},
    ]
    status, body, _ = api.call("POST", "/api/verifiers/", {"spec": spec, "test_cases": cases})
    assert status == 201 and body["test_cases"] == [dict(c, task=None) for c in cases], body
    bad = [cases[0], dict(cases[1], expect_passed="pass")]
    status, body, _ = api.call(
        "PUT", "/api/verifiers/script-cases", {"spec": spec, "test_cases": bad}
    )
    assert status == 400, body
    assert body["detail"] == "test_cases[1].expect_passed: must be one of passed, failed, any"
    status, body, _ = api.call("GET", "/api/verifiers/script-cases")
    assert status == 200 and [c["expect_passed"] for c in body["test_cases"]] == [
        "passed",
        "failed",
    ]


def test_the_openapi_document_is_readable_with_a_token_and_refused_without(api, frontier_server):
    status, document, _ = api.call("GET", "/api/openapi.json")
    assert status == 200 and "/api/runs/" in document["paths"]
    status, body, _ = Api(frontier_server.url).call("GET", "/api/openapi.json")
    assert status == 401 and body["detail"].startswith("Authentication required")
    status, body, _ = Api(frontier_server.url, "ft_not-a-token").call(
        "POST", "/api/verifiers/lint", {"spec": SPEC}
    )
    assert status == 401 and body["problems"] == [], (
        body
    )  # a wrong token is a 401, not a CSRF failure


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "field"),
    [
        ("POST", "/api/runs", {"body": {"config": {"task_set_id": 999999}}}, 400, "task_set_id"),
        ("GET", "/api/runs/0", {}, 404, None),
        ("POST", "/api/verifiers/lint/", {"body": {"spec": {"id": "x"}}}, 200, None),
        ("DELETE", "/api/runs/", {}, 405, "method"),
        (
            "POST",
            "/api/verifiers/lint",
            {"raw": b"spec=x", "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
            415,
            "body",
        ),
        (
            "POST",
            "/api/verifiers/lint",
            {
                "raw": b'--b\r\nContent-Disposition: form-data; name="spec"\r\n\r\nx\r\n--b--\r\n',
                "headers": {"Content-Type": "multipart/form-data; boundary=b"},
            },
            415,
            "body",
        ),
        (
            "POST",
            "/api/verifiers/lint",
            {"raw": b'{"spec": ', "headers": {"Content-Type": "application/json"}},
            400,
            None,
        ),
        (
            "POST",
            "/api/runs/",
            {"body": {"config": {"task_set_id": "one", "budget": {"preset": "huge"}}}},
            400,
            "task_set_id",
        ),
        ("GET", "/api/no-such-thing", {}, 404, "path"),
        ("GET", "/api/runs/?status=sleeping", {}, 400, "status"),
    ],
)
def test_shape_mistakes_get_a_json_4xx_that_names_the_problem(
    api, method, path, kwargs, status, field
):
    got, body, headers = api.call(method, path, **kwargs)
    assert got == status, body
    assert headers["Content-Type"].startswith("application/json")
    if status >= 400:
        assert set(body) == {"detail", "problems"} and body["detail"]
        if field:
            assert field in [p["field"] for p in body["problems"]], body
    if status == 405:
        assert "GET" in headers["Allow"] and "DELETE" in body["detail"]


def test_a_trailing_slash_is_optional_for_every_operation(api):
    status, runs, _ = api.call("GET", "/api/runs")
    assert status == 200 and isinstance(runs, list)
    status, me, _ = api.call("GET", "/api/me/")
    assert status == 200 and me["username"] == E2E_USERNAME


def test_a_session_is_csrf_checked_and_a_cross_site_form_is_refused(frontier_server):
    browser = session_login(frontier_server.url)
    assert browser.call("GET", "/api/me")[0] == 200
    # Without the CSRF header a session write is refused …
    status, body, _ = browser.call("POST", "/api/verifiers/lint", {"spec": SPEC})
    assert status == 403 and "CSRF" in body["detail"]
    # … and so is a form another site posts with the user's cookie.
    status, _, _ = browser.call(
        "POST",
        "/runs/new/dry-run/",
        raw=b"{}",
        headers={"Content-Type": "text/plain", "Origin": "https://evil.example"},
    )
    assert status == 403
    status, body, _ = browser.call(
        "POST",
        "/api/verifiers/lint",
        {"spec": SPEC},
        headers={"X-CSRFToken": browser.cookie("csrftoken")},
    )
    assert status == 200 and body["valid"] is True


def test_demo_names_the_simulator_in_the_api_the_cli_and_the_form(api, frontier_server):
    task_set = import_tasks(api, "vocabulary tasks")
    api.call("POST", "/api/verifiers/", {"spec": {**SPEC, "id": "vocab-refund"}})
    config = {
        "task_set_id": task_set,
        "verifier_ids": ["vocab-refund"],
        "task_lm": "demo",
        "reflection_lm": "demo",
        "budget": {"preset": "light"},
    }
    status, body, _ = api.call("POST", "/api/runs/dry-run", {"config": config})
    assert status == 200 and body["ok"], body
    status, body, _ = api.call("GET", "/api/openapi.json")
    run_config = body["components"]["schemas"]["RunConfig"]["properties"]
    assert run_config["task_lm"]["default"] == "demo"
    assert body["components"]["schemas"]["Budget"]["properties"]["preset"]["anyOf"][0]["enum"] == [
        "light",
        "medium",
        "heavy",
    ]
    result = frontier_server.manage(
        "optimize",
        "run",
        "--verifier",
        "vocab-refund",
        "--tasks",
        "vocabulary tasks",
        "--model",
        "demo",
        "--budget",
        "light",
        "--wait",
    )
    assert json.loads(result.stdout)["status"] == "completed"


def test_a_run_the_cli_queues_without_wait_is_started_by_the_running_server(frontier_server, api):
    import_tasks(api, "cli queued tasks")
    api.call("POST", "/api/verifiers/", {"spec": {**SPEC, "id": "cli-refund"}})
    queued = frontier_server.manage(
        "optimize",
        "run",
        "--verifier",
        "cli-refund",
        "--tasks",
        "cli queued tasks",
        "--model",
        "demo",
        "--budget",
        "30",
    )
    assert "the running Frontier server starts it" in queued.stderr
    run_id = json.loads(queued.stdout)["run_id"]
    started = time.monotonic()
    wait_until(
        lambda: run_status(api, run_id) != "queued",
        what="the server to start the CLI's run",
        timeout=30,
    )
    print(f"started {time.monotonic() - started:.2f} s after the CLI queued it")
    wait_until(lambda: run_status(api, run_id) in FINISHED, what="the run to finish", timeout=120)
    # Resume from another process: queued again, and started again by the server.
    resumed = frontier_server.manage("optimize", "resume", str(run_id), "--extra-budget", "10")
    assert json.loads(resumed.stdout)["status"] == "queued"
    wait_until(
        lambda: run_status(api, run_id) != "queued",
        what="the server to start the resumed run",
        timeout=30,
    )


def test_stop_and_cancel_from_the_cli_reach_a_run_the_server_executes(frontier_server, api):
    task_set = import_tasks(api, "cli stop tasks")
    api.call("POST", "/api/verifiers/", {"spec": {**SPEC, "id": "cli-stop-refund"}})
    config = {
        "task_set_id": task_set,
        "verifier_ids": ["cli-stop-refund"],
        "budget": {"max_metric_calls": 400},
        "task_lm": {"provider": "demo", "model": "demo-task", "simulated_latency_ms": 200},
    }
    for action, phase in (("stop", "stopped by the user"), ("cancel", "cancelled")):
        run_id = api.call("POST", "/api/runs/", {"config": config})[1]["id"]
        wait_until(
            lambda: api.call("GET", f"/api/runs/{run_id}")[1]["candidates"],
            what="the seed candidate",
            timeout=60,
        )
        result = frontier_server.manage("optimize", action, str(run_id))
        assert json.loads(result.stdout)["status"] in (
            "stopping",
            "stopped",
        )  # it may end its iteration at once
        wait_until(
            lambda: run_status(api, run_id) == "stopped", what=f"the run to {action}", timeout=60
        )
        assert api.call("GET", f"/api/runs/{run_id}")[1]["phase"] == phase


def test_without_a_server_the_cli_says_how_to_start_one(frontier_server):
    data_dir = Path(tempfile.mkdtemp(prefix="frontier-no-server-"))
    env = dict(frontier_server.env, FRONTIER_DATA_DIR=str(data_dir))

    def run(*args):
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    assert run("migrate", "--noinput", "-v", "0").returncode == 0
    spec = data_dir / "spec.json"
    spec.write_text(json.dumps(SPEC))
    tasks = data_dir / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    result = run(
        "optimize",
        "run",
        "--verifier",
        str(spec),
        "--tasks",
        str(tasks),
        "--model",
        "demo",
        "--budget",
        "30",
    )
    assert result.returncode == 0, result.stderr
    assert (
        "no Frontier server is running" in result.stderr
        and "python manage.py serve" in result.stderr
    )


def test_run_wait_prints_a_clean_progress_bar_and_a_summary_with_the_run_url(frontier_server, api):
    import_tasks(api, "wait tasks")
    api.call("POST", "/api/verifiers/", {"spec": {**SPEC, "id": "wait-refund"}})
    result = frontier_server.manage(
        "optimize",
        "run",
        "--verifier",
        "wait-refund",
        "--tasks",
        "wait tasks",
        "--model",
        "demo",
        "--budget",
        "40",
        "--wait",
    )
    assert progress_only(result.stderr), result.stderr
    summary = json.loads(result.stdout)
    assert summary["run_url"].endswith(f"/runs/{summary['run_id']}/")
    detail = api.call("GET", f"/api/runs/{summary['run_id']}")[1]
    assert summary["best_candidate_index"] == detail["best_candidate"]


def _docs_block(kind: str) -> str:
    page = (ROOT / "docs" / "api.md").read_text()
    match = re.search(rf"<!-- api-example:{kind} -->\n```\w+\n(.*?)```", page, re.S)
    assert match, f"docs/api.md has no api-example:{kind} block"
    return match.group(1)


@pytest.mark.parametrize(
    ("kind", "command"),
    [("sh", ["bash", "-euo", "pipefail", "-c"]), ("python", [sys.executable, "-c"])],
)
def test_the_api_page_examples_run_verbatim_and_again(frontier_server, token, kind, command):
    """Each block of docs/api.md, as written, run twice: a reader runs an
    example, changes something and runs it again, and the second run updates
    what the first created (the verifier id is unique per server) instead of
    failing on it. The Python quickstart's run must improve on its seed (it
    prints `completed <seed> -> <best> <url>`), as the page says it does."""
    env = dict(os.environ, FRONTIER_URL=frontier_server.url, FRONTIER_TOKEN=token)
    for attempt in ("first", "second"):
        result = subprocess.run(
            [*command, _docs_block(kind)], env=env, capture_output=True, text=True, timeout=240
        )
        assert result.returncode == 0, f"{attempt} run: {result.stdout}{result.stderr}"
        if kind == "python":
            status, seed, arrow, best, _url = result.stdout.splitlines()[0].split()
            assert (status, arrow) == ("completed", "->"), f"{attempt} run: {result.stdout}"
            assert float(best) > float(seed), f"{attempt} run: {result.stdout}"


@pytest.mark.parametrize(
    ("kind", "command"),
    [("sh", ["bash", "-euo", "pipefail", "-c"]), ("python", [sys.executable, "-c"])],
)
def test_the_api_page_examples_show_the_servers_error_when_a_request_fails(
    frontier_server, kind, command
):
    """With a token the server does not know, the example stops at the first request
    and shows the server's JSON error (what is wrong), not just the status code as
    `curl -f` or a bare urllib HTTPError would."""
    env = dict(os.environ, FRONTIER_URL=frontier_server.url, FRONTIER_TOKEN="ft_not-a-token")
    result = subprocess.run(
        [*command, _docs_block(kind)], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "Authentication required" in result.stdout + result.stderr, result.stdout + result.stderr


def test_a_client_generated_from_the_openapi_document_launches_a_run(
    frontier_server, api, token, tmp_path
):
    document = tmp_path / "openapi.json"
    document.write_text(json.dumps(api.call("GET", "/api/openapi.json")[1]))
    generator = Path(sys.executable).with_name("openapi-python-client")
    result = subprocess.run(
        [
            str(generator),
            "generate",
            "--path",
            str(document),
            "--output-path",
            str(tmp_path / "client"),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    task_set = import_tasks(api, "generated client tasks")
    api.call("POST", "/api/verifiers/", {"spec": {**SPEC, "id": "generated-refund"}})
    script = f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
from client import AuthenticatedClient
from client.api.runs import optimizer_api_launch_run
from client.models import ConfigIn, RunConfig, Budget
client = AuthenticatedClient(base_url={frontier_server.url!r}, token={token!r})
config = RunConfig(task_set_id={task_set}, verifier_ids=["generated-refund"], budget=Budget(max_metric_calls=20))
run = optimizer_api_launch_run.sync(client=client, body=ConfigIn(config=config))
print(type(run).__name__, run.id, run.status.value)
"""
    launched = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert launched.returncode == 0, launched.stdout + launched.stderr
    kind, run_id, status = launched.stdout.split()
    assert kind == "LaunchedOut" and status == "queued"  # RunOut and the launch's warnings
    wait_until(
        lambda: run_status(api, int(run_id)) in FINISHED,
        what="the generated client's run",
        timeout=120,
    )


def test_the_api_docs_work_offline_for_a_logged_in_browser(page, frontier_server):
    outside = []

    def offline(route):
        outside.append(route.request.url)
        route.abort()

    page.route(re.compile(r"^(?!" + re.escape(frontier_server.url) + ")"), offline)
    page.goto("/api/docs")
    page.locator(".opblock").first.wait_for()
    assert page.locator(".opblock").count() >= 15
    assert outside == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "api-docs-offline.png"))


def test_a_script_adds_an_edited_candidate_to_a_running_run_and_sees_it_join_the_pool(api):
    """With only a token: a running run takes the edited seed (202, pending); it is
    evaluated on the 3 val tasks at the next boundary (budget_used up by exactly 3
    over what gepa spent), recorded as origin human with its author, and exported;
    the ended run then refuses another edit with a 409 that offers a fork."""
    status, body, _ = api.call("POST", "/api/verifiers/", {"spec": {**SPEC, "id": "inject-refund"}})
    assert status == 201, body
    task_set = import_tasks(api, "script inject tasks")
    config = {
        "task_set_id": task_set,
        "verifier_ids": ["inject-refund"],
        "budget": {"max_metric_calls": 60},
        "task_lm": {"provider": "demo", "model": "demo-task", "simulated_latency_ms": 100},
    }
    status, run, _ = api.call("POST", "/api/runs/", {"config": config})
    assert status == 201, run
    wait_until(lambda: run_status(api, run["id"]) == "running", what="the run to start", timeout=60)
    edited = {"instructions": "Always offer a refund, and say the refund takes 5 days."}
    status, injection, _ = api.call(
        "POST", f"/api/runs/{run['id']}/candidates", {"components": edited, "edited_from": 0}
    )
    assert status == 202 and injection["status"] == "pending", injection
    assert injection["metric_calls"] == 3

    def applied():
        listed = api.call("GET", f"/api/runs/{run['id']}/injections")[1]
        return listed[0] if listed[0]["status"] != "pending" else None

    done = wait_until(applied, what="the edited candidate to be evaluated", timeout=90)
    assert done["status"] == "applied", done
    index = done["candidate"]
    assert done["compare_url"] == f"/runs/{run['id']}/compare/?c=0&c={index}"
    status, human, _ = api.call("GET", f"/api/runs/{run['id']}/candidates/{index}")
    assert human["origin"] == "human" and human["edited_from"] == 0 and human["author"]
    assert human["compare_url"] == done["compare_url"]
    assert human["components"] == edited
    assert sorted(e["task_key"] for e in human["evaluations"] if e["split"] == "val") == [
        "t3",
        "t4",
        "t5",
    ]
    wait_until(lambda: run_status(api, run["id"]) in FINISHED, what="the run to end", timeout=120)
    status, detail, _ = api.call("GET", f"/api/runs/{run['id']}")
    assert detail["budget_used"] <= detail["budget_total"]
    status, document, _ = api.call("GET", f"/api/runs/{run['id']}/export")
    exported = next(c for c in document["candidates"] if c["index"] == index)
    assert exported["origin"] == "human" and exported["author"] == human["author"]

    status, refused, _ = api.call(
        "POST", f"/api/runs/{run['id']}/candidates", {"components": edited, "edited_from": index}
    )
    assert status == 400 and refused["problems"][0]["field"] == "components", refused
    status, refused, _ = api.call(
        "POST",
        f"/api/runs/{run['id']}/candidates",
        {"components": {"instructions": "Say refund twice."}, "edited_from": index},
    )
    assert status == 409 and "has ended" in refused["detail"], refused
    assert refused["injection"]["fork_url"].startswith(
        f"/runs/new/?fork={run['id']}&candidate={index}&injection="
    )
