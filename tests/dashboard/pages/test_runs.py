"""Run pages, the snapshot endpoint, the launch form's JSON endpoints and the controls."""

import html
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from optimizer.models import ModelEndpoint, Run, RunStatus
from optimizer.tasksets.models import Split, Task, TaskSet
from tests.factories import recorded_run
from verifiers_app.services import verifier_create

pytestmark = pytest.mark.django_db

SPEC = {
    "id": "refund-policy",
    "name": "Refund policy",
    "kind": "native",
    "checks": [{"id": "mentions", "type": "task_expectations"}],
}


@pytest.fixture
def task_set(user):
    task_set = TaskSet.objects.create(owner=user, name="refunds")
    for i in range(6):
        Task.objects.create(
            task_set=task_set,
            task_id=f"q{i}",
            position=i,
            input=f"Refund question {i}",
            metadata={
                "expectations": {
                    "mustMention": [{"text": "30 days", "message": "state the window"}]
                }
            },
            split=Split.TRAIN if i < 3 else Split.VAL,
        )
    return task_set


@pytest.fixture
def verifier(user):
    return verifier_create(owner=user, spec=SPEC)


def config(task_set, **overrides):
    return {
        "task_set_id": task_set.pk,
        "verifier_ids": ["refund-policy"],
        "task_lm": {"provider": "demo", "model": "demo-task"},
        "reflection_lm": {"provider": "demo", "model": "demo-reflection"},
        "seed_components": {"instructions": "Answer the refund question."},
        "budget": {"max_metric_calls": 60},
        **overrides,
    }


def post_json(client, name, data):
    return client.post(reverse(name), data=json.dumps(data), content_type="application/json")


# ---- pages -----------------------------------------------------------------------


def test_an_anonymous_visitor_is_sent_to_the_login_page_from_every_run_page(client, user):
    run = recorded_run(owner=user, candidates=2, val_tasks=2)
    for url in [
        reverse("runs:detail", args=[run.pk]),
        reverse("runs:snapshot", args=[run.pk]),
        reverse("runs:scores", args=[run.pk]),
        reverse("runs:candidate", args=[run.pk, 0]),
        reverse("runs:new"),
        reverse("runs:list_json"),
    ]:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login")), (
            url
        )


def test_another_user_gets_a_404_for_a_run_that_is_not_shared_with_them(other_client, user):
    run = recorded_run(owner=user, candidates=2, val_tasks=2)
    for url in [
        reverse("runs:detail", args=[run.pk]),
        reverse("runs:snapshot", args=[run.pk]),
        reverse("runs:scores", args=[run.pk]),
        reverse("runs:candidate", args=[run.pk, 0]),
    ]:
        assert other_client.get(url).status_code == 404, url


def test_a_running_run_offers_pause_beside_stop_and_a_paused_one_resume(user_client, user):
    run = recorded_run(owner=user, candidates=2, val_tasks=2, status=RunStatus.RUNNING)
    page = user_client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert (
        f'<form method="post" action="/runs/{run.pk}/pause/" data-control="pause" data-when="queued running" >'
        in page
    )
    response = user_client.post(reverse("runs:control", args=[run.pk, "pause"]))
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.pause_requested and run.phase == "pausing after this iteration (asked by alice)"
    Run.objects.filter(pk=run.pk).update(status=RunStatus.PAUSED)
    page = user_client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'data-control="pause" data-when="queued running" hidden' in page
    assert 'data-control="resume" data-when="finished" >' in page
    assert 'data-control="stop" data-when="active paused" >' in page


def test_an_external_run_offers_no_pause_and_says_why(user_client, user):
    run = recorded_run(owner=user, candidates=2, val_tasks=2, status=RunStatus.RUNNING)
    Run.objects.filter(pk=run.pk).update(kind="external")
    page = html.unescape(user_client.get(reverse("runs:detail", args=[run.pk])).content.decode())
    assert 'data-control="pause"' not in page and 'data-control="stop"' in page
    assert (
        "No Pause here: an external run's callbacks are observe-only: gepa runs in its owner's "
        "process, so Frontier can watch and stop it but not pause it" in page
    )


def test_a_user_a_run_is_shared_with_can_watch_it_but_not_control_it(
    other_client, user, other_user
):
    run = recorded_run(owner=user, candidates=2, val_tasks=2, status=RunStatus.RUNNING)
    run.shared_with.add(other_user)
    page = other_client.get(reverse("runs:detail", args=[run.pk]))
    assert page.status_code == 200
    assert 'data-control="stop"' not in page.content.decode()
    assert other_client.post(reverse("runs:control", args=[run.pk, "stop"])).status_code == 403
    assert (
        other_client.post(
            reverse("runs:control", args=[run.pk, "fork"]), {"candidate": "0"}
        ).status_code
        == 403
    )
    run.refresh_from_db()
    assert not run.stop_requested
    assert Run.objects.count() == 1


def test_a_user_with_steering_rights_sees_stop_and_resume_but_not_fork_or_more_budget(
    other_client, user, other_user
):
    run = recorded_run(owner=user, candidates=2, val_tasks=2, status=RunStatus.RUNNING)
    run.steered_by.add(other_user)
    page = other_client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'data-control="stop"' in page and 'data-control="resume"' in page
    assert 'data-control="fork"' not in page and 'name="extra_budget"' not in page
    fork = other_client.post(reverse("runs:control", args=[run.pk, "fork"]), {"candidate": "0"})
    assert fork.status_code == 404 and Run.objects.count() == 1
    assert other_client.post(reverse("runs:control", args=[run.pk, "stop"])).status_code == 302
    run.refresh_from_db()
    assert run.stop_requested and run.status == RunStatus.STOPPING


def test_the_run_page_offers_note_for_gepa_to_who_steers_the_run_only(
    client, other_client, user, other_user, django_user_model
):
    """Steering rights include writing reviewer notes (Run.steerable_by): the run
    page's trials offer "Note for GEPA" to a steering sharer, not to a read-only one."""
    run = recorded_run(owner=user, candidates=2, val_tasks=2, status=RunStatus.RUNNING)
    run.steered_by.add(other_user)
    watcher = django_user_model.objects.create_user("watcher", password="x")
    run.shared_with.add(watcher)
    client.force_login(watcher)
    steering = other_client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    read_only = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'data-notes-writable="true"' in steering
    assert 'data-notes-writable="false"' in read_only


def test_the_run_page_carries_the_snapshot_and_websocket_addresses(user_client, user):
    run = recorded_run(owner=user, candidates=2, val_tasks=2)
    html = user_client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert f'data-snapshot-url="/runs/{run.pk}/snapshot.json"' in html
    assert f'data-ws-path="/ws/runs/{run.pk}/"' in html
    assert f'data-compare-url="/runs/{run.pk}/compare/"' in html
    assert "vendor/plotly-frontier.min." in html and "js/run-page." in html  # by their hashed names


def test_the_snapshot_endpoint_returns_the_run_as_json(user_client, user):
    run = recorded_run(owner=user, candidates=4, val_tasks=3)
    data = user_client.get(reverse("runs:snapshot", args=[run.pk])).json()
    assert data["run"]["id"] == run.pk and data["run"]["last_seq"] == run.last_seq
    assert len(data["candidates"]["index"]) == 4 and len(data["scores"][0]) == 3


def test_the_snapshot_and_its_score_pages_come_gzipped_to_a_browser_that_accepts_it(
    user_client, user
):
    import gzip
    import json

    run = recorded_run(owner=user, candidates=3, val_tasks=40)
    for url in (f"/runs/{run.pk}/snapshot.json", f"/runs/{run.pk}/scores.json?after=-1"):
        plain = user_client.get(url)
        packed = user_client.get(url, headers={"Accept-Encoding": "gzip, deflate, br"})
        assert "Content-Encoding" not in plain and packed["Content-Encoding"] == "gzip"
        assert json.loads(gzip.decompress(packed.content)) == json.loads(plain.content)
        assert len(packed.content) < len(plain.content) / 2 and "Accept-Encoding" in packed["Vary"]


def test_the_snapshot_is_built_and_encoded_with_the_cyclic_collector_paused_then_turned_back_on(
    user_client, user, monkeypatch
):
    import gc

    from dashboard import selectors

    run = recorded_run(owner=user, candidates=3, val_tasks=2)
    build = selectors.run_snapshot
    seen = []
    monkeypatch.setattr(
        selectors, "run_snapshot", lambda r: seen.append(gc.isenabled()) or build(r)
    )
    assert gc.isenabled()
    assert user_client.get(reverse("runs:snapshot", args=[run.pk])).status_code == 200
    assert seen == [False] and gc.isenabled()
    gc.disable()  # whoever turned it off turns it back on, not this view
    try:
        user_client.get(reverse("runs:snapshot", args=[run.pk]))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_candidate_page_escapes_prompts_and_outputs(user_client, user):
    run = recorded_run(
        owner=user, candidates=2, val_tasks=2, component_text="<script>alert('x')</script>"
    )
    run.candidates.get(index=1).evaluations.update(output="<img src=x onerror=alert(1)>")
    html = user_client.get(reverse("runs:candidate", args=[run.pk, 1])).content.decode()
    assert "<script>alert(" not in html and "&lt;script&gt;alert(" in html
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert user_client.get(reverse("runs:candidate", args=[run.pk, 99])).status_code == 404


def test_the_candidate_page_escapes_check_reasons_feedback_and_task_keys(user_client, user):
    run = recorded_run(owner=user, candidates=2, val_tasks=2)
    evaluation = run.candidates.get(index=1).evaluations.first()
    evaluation.result["verifiers"][0]["checks"][0].update(
        reason='<b onmouseover="x()">miss</b>', id="<i>c</i>"
    )
    evaluation.task_key = "<svg onload=y()>"
    evaluation.save()
    Evaluation = type(evaluation)
    Evaluation.objects.filter(
        pk=run.candidates.get(index=1).evaluations.exclude(pk=evaluation.pk).first().pk
    ).update(result={}, feedback="<script>z()</script>")
    html = user_client.get(reverse("runs:candidate", args=[run.pk, 1])).content.decode()
    assert (
        "<b onmouseover" not in html
        and "&lt;b onmouseover=&quot;x()&quot;&gt;miss&lt;/b&gt;" in html
    )
    assert "<i>c</i>" not in html and "<svg onload" not in html and "&lt;svg onload=y()&gt;" in html
    assert "<script>z()" not in html and "&lt;script&gt;z()&lt;/script&gt;" in html


def test_the_candidate_page_shows_parents_checks_and_its_place_on_the_front(user_client, user):
    run = recorded_run(owner=user, candidates=5, val_tasks=3)
    best = run.best_candidate
    html = user_client.get(reverse("runs:candidate", args=[run.pk, best.index])).content.decode()
    for parent in best.parents:
        assert f'href="/runs/{run.pk}/candidates/{parent}/"' in html
    assert "<code>policy/policy-mentions</code>" in html  # the per-check breakdown
    assert "best candidate" in html and "on the front" in html


def test_the_runs_list_shows_a_simulator_badge_and_filters_by_status(user_client, user):
    recorded_run(owner=user, name="finished one", candidates=2, val_tasks=2)
    recorded_run(
        owner=user, name="running one", candidates=2, val_tasks=2, status=RunStatus.RUNNING
    )
    html = user_client.get(reverse("runs:list")).content.decode()
    assert "finished one" in html and "running one" in html and "badge-sim" in html
    rows = user_client.get(reverse("runs:list_json"), {"status": "running"}).json()["runs"]
    assert [r["name"] for r in rows] == ["running one"]
    rows = user_client.get(reverse("runs:list_json"), {"q": "FINISHED"}).json()["runs"]
    assert [r["name"] for r in rows] == ["finished one"]


def test_the_runs_list_costs_the_same_queries_for_two_runs_or_six(user_client, user):
    counts = []
    for total in (2, 6):
        while Run.objects.count() < total:
            recorded_run(owner=user, candidates=1, val_tasks=1, seed=Run.objects.count())
        with CaptureQueriesContext(connection) as queries:
            assert len(user_client.get(reverse("runs:list_json")).json()["runs"]) == total
        counts.append(len(queries))
    assert counts[0] == counts[1]


# ---- launch and dry run ------------------------------------------------------------


def test_the_launch_form_offers_task_sets_verifiers_and_the_demo_simulator(
    user_client, task_set, verifier
):
    html = user_client.get(reverse("runs:new")).content.decode()
    assert "refunds (6 tasks)" in html and 'value="refund-policy"' in html
    assert "demo simulator (offline, not a real model)" in html


def test_a_dry_run_of_a_valid_config_reports_no_problems_and_creates_nothing(
    user_client, task_set, verifier
):
    response = post_json(user_client, "runs:dry_run", config(task_set))
    body = response.json()
    assert (body["problems"], body["warnings"]) == ([], [])
    assert (
        body["plan"]["free"] is True and body["plan"]["budget"]["metric_calls"] == 60
    )  # the plan of the run
    assert Run.objects.count() == 0


def test_a_dry_run_names_each_field_with_a_problem(user_client, task_set, verifier):
    bad = config(
        task_set,
        splits={"train": "train", "val": "holdout"},
        verifier_ids=["nope"],
        task_lm="no-such-endpoint",
    )
    problems = post_json(user_client, "runs:dry_run", bad).json()["problems"]
    fields = {p["field"] for p in problems}
    assert {"splits.val", "verifier_ids", "task_lm"} <= fields
    assert any('no verifier with id "nope"' in p["message"] for p in problems)


def test_a_dry_run_warns_when_the_budget_buys_too_few_proposals(user_client, task_set, verifier):
    data = post_json(
        user_client, "runs:dry_run", config(task_set, budget={"max_metric_calls": 5})
    ).json()
    assert data["problems"] == []
    assert data["warnings"] and data["warnings"][0].startswith(
        "budget: 5 metric calls allow only 0 proposal(s)"
    )


def test_a_launch_whose_verifiers_ignore_the_task_expectations_says_so_on_the_run_page(
    user, user_client, task_set
):
    verifier_create(
        owner=user,
        spec={
            "id": "polite",
            "kind": "native",
            "checks": [{"id": "thanks", "type": "contains", "params": {"value": "thank"}}],
        },
    )
    response = post_json(user_client, "runs:new", config(task_set, verifier_ids=["polite"]))
    assert response.status_code == 201
    page = user_client.get(response.json()["redirect"]).content.decode()
    assert (
        "Launched with a warning: tasks: 6 task(s) carry expectations (metadata.expectations) but no chosen verifier"
        in page
    )


class ModelListing(BaseHTTPRequestHandler):
    """A local OpenAI-compatible endpoint that serves one model."""

    def do_GET(self):
        body = json.dumps(
            {"object": "list", "data": [{"id": "served-model", "object": "model"}]}
        ).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_openai():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ModelListing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()


def test_a_dry_run_contacts_each_endpoint_and_names_the_model_field_that_cannot_work(
    user_client, task_set, verifier, fake_openai, monkeypatch
):
    monkeypatch.setenv("FRONTIER_TEST_KEY", "sk-test")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    ModelEndpoint.objects.create(
        name="wrong-model",
        base_url=fake_openai,
        model="missing-model",
        api_key_env="FRONTIER_TEST_KEY",
    )
    ModelEndpoint.objects.create(
        name="nobody-home",
        base_url=f"http://127.0.0.1:{closed_port}/v1",
        model="m",
        api_key_env="FRONTIER_TEST_KEY",
    )
    ModelEndpoint.objects.create(
        name="good", base_url=fake_openai, model="served-model", api_key_env="FRONTIER_TEST_KEY"
    )

    problems = post_json(
        user_client,
        "runs:dry_run",
        config(task_set, task_lm="wrong-model", reflection_lm="nobody-home"),
    ).json()["problems"]
    by_field = {p["field"]: p["message"] for p in problems}
    assert (
        "'missing-model' is not served" in by_field["task_lm"]
        and "served-model" in by_field["task_lm"]
    )
    assert by_field["reflection_lm"].startswith("Could not connect to")
    assert (
        post_json(
            user_client, "runs:dry_run", config(task_set, task_lm="good", reflection_lm="good")
        ).json()["problems"]
        == []
    )
    assert Run.objects.count() == 0


def test_a_dry_run_rejects_a_body_that_is_not_json(user_client):
    response = user_client.post(
        reverse("runs:dry_run"), data="{not json", content_type="application/json"
    )
    assert response.json()["problems"][0]["field"] == "config"


def test_launching_a_valid_config_queues_a_run_and_returns_its_page(
    user_client, task_set, verifier
):
    response = post_json(user_client, "runs:new", config(task_set, name="first try"))
    assert response.status_code == 201
    run = Run.objects.get()
    assert response.json()["redirect"] == f"/runs/{run.pk}/"
    assert (run.name, run.status, run.budget_total) == ("first try", RunStatus.QUEUED, 60)
    assert run.verifier_specs[0]["id"] == "refund-policy"


def test_launching_an_invalid_config_saves_nothing_and_names_the_field(
    user_client, task_set, verifier
):
    response = post_json(
        user_client, "runs:new", config(task_set, minibatch_size=0, seed_components={})
    )
    assert response.status_code == 400
    fields = {p["field"] for p in response.json()["problems"]}
    assert {"minibatch_size", "seed_components"} <= fields
    assert Run.objects.count() == 0


def test_a_nul_character_anywhere_in_a_config_is_refused_naming_its_field_and_saves_nothing(
    user_client, task_set, verifier
):
    # PostgreSQL refuses U+0000 in text and JSON values, so the config says where it is instead of failing on save.
    bad = config(task_set, name="a\x00b", seed_components={"instructions": "ok", "extra": "x\x00"})
    response = post_json(user_client, "runs:new", bad)
    assert response.status_code == 400
    assert sorted(p["field"] for p in response.json()["problems"]) == [
        "name",
        "seed_components.extra",
    ]
    assert (
        response.json()["problems"][0]["message"]
        == "contains a NUL character (U+0000), which cannot be stored"
    )
    problems = post_json(
        user_client, "runs:dry_run", config(task_set, seed_components={"instructions": "x\x00"})
    ).json()["problems"]
    assert problems == [
        {
            "field": "seed_components.instructions",
            "message": "contains a NUL character (U+0000), which cannot be stored",
        }
    ]
    assert Run.objects.count() == 0


def test_a_nul_character_in_the_runs_list_search_is_dropped(user_client, user):
    recorded_run(owner=user, name="alpha", candidates=1, val_tasks=1)
    rows = user_client.get(reverse("runs:list_json"), {"q": "al\x00pha"}).json()["runs"]
    assert [r["name"] for r in rows] == ["alpha"]
    assert user_client.get(reverse("runs:list"), {"q": "\x00"}).status_code == 200


# ---- controls ------------------------------------------------------------------------


def test_the_owner_stops_a_running_run_from_its_page(user_client, user):
    run = recorded_run(owner=user, candidates=2, val_tasks=2, status=RunStatus.RUNNING)
    response = user_client.post(reverse("runs:control", args=[run.pk, "stop"]))
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    run.refresh_from_db()
    assert (run.status, run.stop_requested) == (RunStatus.STOPPING, True)


def test_stopping_a_finished_run_shows_why_it_cannot(user_client, user):
    run = recorded_run(owner=user, candidates=2, val_tasks=2)
    response = user_client.post(reverse("runs:control", args=[run.pk, "stop"]), follow=True)
    assert "only a queued or running run can be stopped" in response.content.decode()


def test_resume_with_a_negative_budget_is_refused_with_the_field_named(user_client, user):
    run = recorded_run(owner=user, candidates=2, val_tasks=2)
    response = user_client.post(
        reverse("runs:control", args=[run.pk, "resume"]), {"extra_budget": "-5"}, follow=True
    )
    assert "extra_budget: must not be negative" in response.content.decode()


def test_a_fork_from_a_candidate_that_is_not_a_number_is_refused_with_the_field_named(
    user_client, user
):
    run = recorded_run(owner=user, candidates=2, val_tasks=2)
    count = Run.objects.count()
    response = user_client.post(
        reverse("runs:control", args=[run.pk, "fork"]), {"candidate": "best"}, follow=True
    )
    assert "candidate: must be a whole number" in response.content.decode()
    assert Run.objects.count() == count
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED


def test_forking_from_a_candidate_opens_the_new_run_seeded_with_its_prompt(
    user_client, user, task_set, verifier
):
    response = post_json(user_client, "runs:new", config(task_set))
    parent = Run.objects.get(pk=response.json()["run_id"])
    candidate = parent.candidates.create(
        index=0, components={"instructions": "Mention 30 days."}, origin="seed"
    )
    response = user_client.post(
        reverse("runs:control", args=[parent.pk, "fork"]), {"candidate": "0"}
    )
    fork = Run.objects.exclude(pk=parent.pk).get()
    assert response["Location"] == f"/runs/{fork.pk}/"
    assert fork.config["seed_components"] == candidate.components


def test_an_unknown_control_is_not_routed(user_client, user):
    run = recorded_run(owner=user, candidates=1, val_tasks=1)
    assert user_client.post(f"/runs/{run.pk}/explode/").status_code == 404


def test_a_launch_body_nested_ten_thousand_deep_is_a_400_naming_config_not_a_500(
    user_client, task_set, verifier
):
    body = '{"task_set_id": ' + "[" * 10_000 + "]" * 10_000 + "}"
    response = user_client.post(reverse("runs:new"), data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["problems"] == [
        {"field": "config", "message": "nested more than 100 levels deep"}
    ]
    # Shallow enough for json.loads, too deep for us: the field it is under is named.
    deep = "x"
    for _ in range(150):
        deep = [deep]
    response = post_json(
        user_client, "runs:new", config(task_set, seed_components={"instructions": deep})
    )
    assert response.status_code == 400
    assert response.json()["problems"] == [
        {"field": "seed_components.instructions[0]", "message": "nested more than 100 levels deep"},
    ]
    assert Run.objects.count() == 0


def test_the_pages_answer_head_like_get_so_the_live_pages_can_tell_a_refusal_from_a_drop(
    user_client, other_client, user
):
    from django.test import Client

    # live-socket.js asks with HEAD after a refused handshake; a 405 meant "denied" was never shown.
    run = recorded_run(owner=user, candidates=2, val_tasks=2)
    for url in [
        reverse("runs:detail", args=[run.pk]),
        reverse("runs:list"),
        reverse("compare:runs"),
    ]:
        assert user_client.head(url).status_code == 200, url
    detail = reverse("runs:detail", args=[run.pk])
    assert other_client.head(detail).status_code == 404
    assert Client().head(detail).status_code == 302
