"""/api/runs: launch, dry-run, list, get, stop, cancel, pause, resume, fork."""

from __future__ import annotations

import pytest

from optimizer import services
from optimizer.models import Candidate, ModelEndpoint, Run, RunEvent, RunStatus, run_progress
from tests.optimizer.fake_openai import free_port
from tests.optimizer.run_helpers import endpoint, refund_task_set, refund_verifier, run_config
from verifiers_app.services import verifier_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def task_set(user):
    refund_verifier(user)
    return refund_task_set(user, splits=["train", "val"] * 4)


def post(client, url, body):
    return client.post(url, body, content_type="application/json")


def test_launching_freezes_the_config_verifiers_and_tasks_into_a_queued_run(user_client, task_set):
    response = post(
        user_client, "/api/runs/", {"config": run_config(task_set, budget={"preset": "light"})}
    )
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.status == RunStatus.QUEUED and response.json()["status"] == "queued"
    assert run.verifier_specs[0]["id"] == "refund-policy"
    assert len(run.tasks_snapshot) == 8 and {row["split"] for row in run.tasks_snapshot} == {
        "train",
        "val",
    }
    assert run.config["task_lm"]["provider"] == "demo"
    assert run.budget_total == 4 + 5 * (2 * 2 + 4)  # V + 5 · (2m + V), light preset
    assert RunEvent.objects.get(run=run).payload == {"status": "queued", "phase": "queued"}
    assert response.json()["simulator"] is True  # labelled: the demo models are not real ones


def test_an_endpoint_name_is_resolved_and_frozen_at_launch(user_client, task_set):
    ModelEndpoint.objects.create(
        name="local-llama",
        provider="openai",
        base_url="http://127.0.0.1:11434/v1",
        model="llama3",
        api_key_env="LLAMA_KEY",
        options={"temperature": 0.3},
    )
    response = post(
        user_client,
        "/api/runs/",
        {"config": run_config(task_set, task_lm="local-llama", reflection_lm="local-llama")},
    )
    assert response.status_code == 201 and response.json()["simulator"] is False
    frozen = Run.objects.get(pk=response.json()["id"]).config["task_lm"]
    assert (
        frozen["model"] == "llama3"
        and frozen["temperature"] == 0.3
        and frozen["api_key_env"] == "LLAMA_KEY"
    )
    ModelEndpoint.objects.filter(name="local-llama").update(model="changed")
    assert Run.objects.get(pk=response.json()["id"]).config["task_lm"]["model"] == "llama3"


def test_a_bad_config_is_a_400_naming_each_field_and_saves_nothing(user_client, task_set):
    config = run_config(
        task_set, verifier_ids=["no-such-verifier"], splits={"val": "holdout"}, task_lm="gpt-9"
    )
    response = post(user_client, "/api/runs/", {"config": config})
    assert response.status_code == 400
    problems = {(p["field"], p["message"]) for p in response.json()["problems"]}
    assert ("verifier_ids", 'no verifier with id "no-such-verifier" that you can use') in problems
    assert ("splits.val", 'task set "Refunds" has no tasks in split "holdout"') in problems
    assert ("task_lm", 'no model endpoint named "gpt-9"') in problems
    assert not Run.objects.exists()


def test_a_schema_error_names_the_field(user_client, task_set):
    response = post(user_client, "/api/runs/", {"config": run_config(task_set, minibatch_size=0)})
    assert response.status_code == 400
    assert response.json()["problems"][0]["field"] == "minibatch_size"


def test_someone_elses_private_task_set_cannot_be_used(other_client, task_set):
    response = post(other_client, "/api/runs/", {"config": run_config(task_set)})
    assert response.status_code == 400
    assert response.json()["problems"][0] == {
        "field": "task_set_id",
        "message": f"no task set {task_set.pk} that you can use",
    }


def test_the_dry_run_contacts_the_model_endpoint(user_client, task_set, monkeypatch):
    monkeypatch.setenv("FRONTIER_DRY_KEY", "sk-test")
    unreachable = {
        "provider": "openai",
        "model": "m",
        "base_url": f"http://127.0.0.1:{free_port()}/v1",
        "api_key_env": "FRONTIER_DRY_KEY",
        "timeout": 2,
    }
    response = post(
        user_client,
        "/api/runs/dry-run",
        {"config": run_config(task_set, reflection_lm=endpoint("unreachable", unreachable))},
    )
    body = response.json()
    assert response.status_code == 200 and body["ok"] is False
    assert [p["field"] for p in body["problems"]] == ["reflection_lm"]
    assert not Run.objects.exists()

    passed = post(user_client, "/api/runs/dry-run", {"config": run_config(task_set)}).json()
    assert (passed["ok"], passed["problems"], passed["warnings"]) == (True, [], [])
    assert passed["plan"]["budget"]["metric_calls"] == 120


def test_the_dry_run_warns_when_no_chosen_verifier_reads_the_tasks_expectations_or_schemas(
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
    verifier_create(
        owner=user,
        spec={
            "id": "schema",
            "kind": "native",
            "checks": [{"id": "keys", "type": "expected_output_schema"}],
        },
    )
    body = post(
        user_client, "/api/runs/dry-run", {"config": run_config(task_set, verifier_ids=["polite"])}
    ).json()
    assert body["ok"] is True
    assert body["warnings"] == [
        "tasks: 8 task(s) carry expectations (metadata.expectations) but no chosen verifier "
        "has a task_expectations check, so they are ignored; choose a verifier with one"
    ]
    body = post(
        user_client,
        "/api/runs/dry-run",
        {"config": run_config(task_set, verifier_ids=["refund-policy", "schema"])},
    ).json()
    assert body["warnings"] == [
        "verifiers: an expected_output_schema check is chosen but no task has a schema "
        "(metadata.expectedOutputSchema), so that check passes every output"
    ]


def test_a_user_lists_and_reads_only_runs_they_may_see(user_client, other_client, task_set):
    run_id = post(user_client, "/api/runs/", {"config": run_config(task_set)}).json()["id"]
    assert [r["id"] for r in user_client.get("/api/runs/").json()] == [run_id]
    assert other_client.get("/api/runs/").json() == []
    assert other_client.get(f"/api/runs/{run_id}").status_code == 404
    detail = user_client.get(f"/api/runs/{run_id}").json()
    assert detail["verifier_ids"] == ["refund-policy"] and detail["candidates"] == []
    assert other_client.post(f"/api/runs/{run_id}/stop").status_code == 404


def test_stopping_a_queued_run_stops_it_and_a_second_stop_is_a_409(user_client, task_set):
    run_id = post(user_client, "/api/runs/", {"config": run_config(task_set)}).json()["id"]
    response = user_client.post(f"/api/runs/{run_id}/stop")
    assert response.status_code == 200 and response.json()["status"] == "stopped"
    again = user_client.post(f"/api/runs/{run_id}/stop")
    assert (
        again.status_code == 409
        and "only a queued or running run can be stopped" in again.json()["detail"]
    )


def test_pause_and_resume_through_the_api(user_client, other_client, task_set):
    """A queued run pauses at once; a resume needs no budget; a finished run's
    pause is a 409 naming its status; who cannot control the run gets a 404."""
    run_id = post(user_client, "/api/runs/", {"config": run_config(task_set)}).json()["id"]
    assert other_client.post(f"/api/runs/{run_id}/pause").status_code == 404
    paused = user_client.post(f"/api/runs/{run_id}/pause")
    assert paused.status_code == 200, paused.content
    assert (paused.json()["status"], paused.json()["phase"]) == ("paused", "paused by alice")
    again = user_client.post(f"/api/runs/{run_id}/pause")
    assert again.status_code == 200 and again.json()["status"] == "paused"
    resumed = post(user_client, f"/api/runs/{run_id}/resume", {})
    assert resumed.status_code == 200 and resumed.json()["status"] == "queued"
    Run.objects.filter(pk=run_id).update(status=RunStatus.COMPLETED)
    refused = user_client.post(f"/api/runs/{run_id}/pause")
    assert refused.status_code == 409
    assert (
        refused.json()["detail"]
        == f"run {run_id} is completed; only a queued or running run can be paused"
    )


def test_a_completed_run_continues_only_with_more_budget(user_client, task_set):
    run_id = post(user_client, "/api/runs/", {"config": run_config(task_set)}).json()["id"]
    Run.objects.filter(pk=run_id).update(status=RunStatus.COMPLETED)
    run_progress(run_id).update(budget_used=120)
    refused = post(user_client, f"/api/runs/{run_id}/resume", {})
    assert refused.status_code == 409 and refused.json()["detail"].startswith("extra_budget:")
    resumed = post(user_client, f"/api/runs/{run_id}/resume", {"extra_budget": 50})
    assert (
        resumed.status_code == 200
        and resumed.json()["status"] == "queued"
        and resumed.json()["budget_total"] == 170
    )


def test_a_fork_is_a_new_run_seeded_from_the_chosen_candidate(user_client, task_set):
    run_id = post(user_client, "/api/runs/", {"config": run_config(task_set)}).json()["id"]
    Candidate.objects.create(
        run_id=run_id, index=3, components={"instructions": "Always mention the receipt."}
    )
    missing = post(user_client, f"/api/runs/{run_id}/fork", {"candidate_index": 9})
    assert (
        missing.status_code == 400 and missing.json()["problems"][0]["field"] == "candidate_index"
    )
    fork = post(user_client, f"/api/runs/{run_id}/fork", {"candidate_index": 3})
    assert fork.status_code == 201
    forked = Run.objects.get(pk=fork.json()["id"])
    assert forked.config["seed_components"] == {"instructions": "Always mention the receipt."}
    assert "fork of candidate 3" in forked.name and forked.status == RunStatus.QUEUED


def test_the_dry_run_names_a_task_whose_row_verifier_does_not_resolve(user_client, task_set):
    task_set.tasks.filter(task_id="laptop").update(
        verifier={"kind": "in_process", "fn_name": "no_such_fn"}
    )
    problems = post(user_client, "/api/runs/dry-run", {"config": run_config(task_set)}).json()[
        "problems"
    ]
    assert [p["field"] for p in problems] == ["task laptop"]
    assert "no_such_fn" in problems[0]["message"]


def test_only_an_admin_may_give_an_endpoint_inline_so_no_user_can_send_a_server_secret_to_their_own_host(
    user_client, admin_client_logged_in, task_set, monkeypatch
):
    from tests.optimizer.fake_openai import FakeOpenAIServer

    monkeypatch.setenv("FRONTIER_SERVER_SECRET", "server-secret-value")
    with FakeOpenAIServer() as server:
        inline = {
            "provider": "openai",
            "model": "fake-model",
            "base_url": server.base_url,
            "api_key_env": "FRONTIER_SERVER_SECRET",
        }
        config = run_config(task_set, task_lm=inline)
        launched = post(user_client, "/api/runs/", {"config": config})
        assert launched.status_code == 400
        assert launched.json()["problems"] == [
            {"field": "task_lm", "message": services.INLINE_ENDPOINT_PROBLEM}
        ]
        dry = post(user_client, "/api/runs/dry-run", {"config": config}).json()
        assert dry["problems"] == [
            {"field": "task_lm", "message": services.INLINE_ENDPOINT_PROBLEM}
        ]
        assert server.requests == []  # the endpoint was never contacted with the secret
        assert not Run.objects.exists()

        # The same endpoint registered by an admin is chosen by name; an admin may also give it inline.
        assert (
            post(
                user_client,
                "/api/runs/",
                {"config": run_config(task_set, task_lm=endpoint("fake", inline))},
            ).status_code
            == 201
        )
        assert post(admin_client_logged_in, "/api/runs/", {"config": config}).status_code == 201


def test_a_fork_keeps_the_endpoint_its_run_resolved_at_launch_unless_the_run_was_imported(
    user, user_client, task_set
):
    lm = {
        "provider": "openai",
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "SOME_KEY",
    }
    run_id = post(
        user_client, "/api/runs/", {"config": run_config(task_set, task_lm=endpoint("ep", lm))}
    ).json()["id"]
    Candidate.objects.create(run_id=run_id, index=0, components={"instructions": "Be brief."})
    fork = post(user_client, f"/api/runs/{run_id}/fork", {"candidate_index": 0})
    assert (
        fork.status_code == 201
        and Run.objects.get(pk=fork.json()["id"]).config["task_lm"]["base_url"] == lm["base_url"]
    )

    Run.objects.filter(pk=run_id).update(
        imported=True, status=RunStatus.COMPLETED
    )  # its config came from a file
    refused = post(user_client, f"/api/runs/{run_id}/fork", {"candidate_index": 0})
    assert refused.status_code == 400
    assert refused.json()["problems"] == [
        {"field": "task_lm", "message": services.INLINE_ENDPOINT_PROBLEM}
    ]


def test_an_extra_budget_beyond_the_largest_run_budget_is_refused_not_a_server_error(
    user_client, task_set
):
    run_id = post(user_client, "/api/runs/", {"config": run_config(task_set)}).json()["id"]
    Run.objects.filter(pk=run_id).update(status=RunStatus.COMPLETED, budget_total=9_999_990)
    huge = post(user_client, f"/api/runs/{run_id}/resume", {"extra_budget": 10**30})
    assert huge.status_code == 400 and [p["field"] for p in huge.json()["problems"]] == [
        "extra_budget"
    ]
    over = post(user_client, f"/api/runs/{run_id}/resume", {"extra_budget": 11})
    assert (
        over.status_code == 409
        and over.json()["detail"]
        == "extra_budget: a run's budget may not exceed 10,000,000 metric calls"
    )
    assert (
        Run.objects.get(pk=run_id).budget_total == 9_999_990
        and Run.objects.get(pk=run_id).status == RunStatus.COMPLETED
    )


def test_a_nul_character_in_an_api_launch_is_a_400_naming_the_field_not_a_database_error(
    user_client, task_set
):
    # PostgreSQL refuses U+0000 in text and JSON; every entry point shares the check in parse_run_config.
    response = post(user_client, "/api/runs/", {"config": run_config(task_set, name="bad\x00name")})
    assert response.status_code == 400
    assert response.json()["problems"] == [
        {"field": "name", "message": "contains a NUL character (U+0000), which cannot be stored"}
    ]
    assert not Run.objects.exists()


def test_a_status_filter_that_is_no_status_is_a_400_naming_it(user_client):
    # A NUL in it reached PostgreSQL, which answered with an error (a 500).
    for status in ["\x00", "runing"]:
        response = user_client.get("/api/runs/", {"status": status})
        assert response.status_code == 400
        [problem] = response.json()["problems"]
        assert (
            problem["field"] == "status"
            and "'queued', 'running', 'stopping', 'stopped', 'completed', 'failed', 'abandoned' or 'paused'"
            in problem["message"]
        )
    assert user_client.get("/api/runs/", {"status": "running"}).json() == []


def test_a_user_a_run_is_shared_with_can_read_it_but_not_fork_it(
    user_client, other_client, other_user, task_set
):
    run_id = post(user_client, "/api/runs/", {"config": run_config(task_set)}).json()["id"]
    Candidate.objects.create(run_id=run_id, index=0, components={"instructions": "Be brief."})
    Run.objects.get(pk=run_id).shared_with.add(other_user)
    assert other_client.get(f"/api/runs/{run_id}").status_code == 200
    refused = post(other_client, f"/api/runs/{run_id}/fork", {"candidate_index": 0})
    assert refused.status_code == 404  # as for stop/resume: a fork spends the owner's endpoints
    assert Run.objects.count() == 1


def test_the_fork_service_refuses_anyone_who_does_not_control_the_run(
    user_client, other_user, task_set
):
    from django.core.exceptions import PermissionDenied

    run_id = post(user_client, "/api/runs/", {"config": run_config(task_set)}).json()["id"]
    Candidate.objects.create(run_id=run_id, index=0, components={"instructions": "Be brief."})
    run = Run.objects.get(pk=run_id)
    run.shared_with.add(other_user)
    with pytest.raises(PermissionDenied):
        services.run_fork(run=run, candidate_index=0, owner=other_user)
    assert Run.objects.count() == 1


def test_a_read_only_sharer_cannot_stop_a_run_and_is_told_why(
    user_client, other_client, other_user, task_set
):
    """Plain sharing is read-only: stop, cancel and resume are a 403 that says
    so (the run is visible to them, so a 404 would be a lie), and nothing changes."""
    run_id = post(user_client, "/api/runs/", {"config": run_config(task_set)}).json()["id"]
    Run.objects.get(pk=run_id).shared_with.add(other_user)
    for action in ("stop", "cancel"):
        refused = other_client.post(f"/api/runs/{run_id}/{action}")
        assert refused.status_code == 403, refused.content
        assert "shared with you read-only" in refused.json()["detail"]
    assert Run.objects.get(pk=run_id).status == RunStatus.QUEUED


def test_a_sharer_with_steering_rights_stops_and_resumes_but_cannot_fork_or_add_budget(
    user_client, other_client, other_user, task_set
):
    """Steering rights: stop and resume within the budget the owner set; more
    budget, a fork, an edit or a delete spend or change what is the owner's."""
    run_id = post(user_client, "/api/runs/", {"config": run_config(task_set)}).json()["id"]
    Candidate.objects.create(run_id=run_id, index=0, components={"instructions": "Be brief."})
    Run.objects.get(pk=run_id).steered_by.add(other_user)
    assert other_client.get(f"/api/runs/{run_id}").status_code == 200
    stopped = other_client.post(f"/api/runs/{run_id}/stop")
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"
    assert post(other_client, f"/api/runs/{run_id}/resume", {"extra_budget": 10}).status_code == 404
    resumed = post(other_client, f"/api/runs/{run_id}/resume", {})
    assert resumed.status_code == 200 and resumed.json()["status"] == "queued"
    assert post(other_client, f"/api/runs/{run_id}/fork", {"candidate_index": 0}).status_code == 404
    assert other_client.delete(f"/api/runs/{run_id}").status_code == 404
    run = Run.objects.get(pk=run_id)
    assert run.budget_total == resumed.json()["budget_total"] and Run.objects.count() == 1


EDITED = 'You answer customer questions for a shop. Always include "30 days" and "receipt".'


def test_an_edited_candidate_is_accepted_with_a_202_and_listed_with_the_run(
    user_client, other_client, task_set
):
    """202 with the pending injection (what it costs: one metric call per val task);
    GET /injections lists it; someone who does not control the run gets a 404."""
    run_id = post(user_client, "/api/runs/", {"config": run_config(task_set)}).json()["id"]
    body = {"components": {"instructions": EDITED}, "edited_from": 0}
    response = post(user_client, f"/api/runs/{run_id}/candidates", body)
    assert response.status_code == 202, response.content
    out = response.json()
    assert out["status"] == "pending" and out["author"] == "alice" and out["metric_calls"] == 4
    assert out["edited_from"] == 0 and out["candidate"] is None and out["fork_url"] is None
    listed = user_client.get(f"/api/runs/{run_id}/injections").json()
    assert [i["id"] for i in listed] == [out["id"]]
    assert post(other_client, f"/api/runs/{run_id}/candidates", body).status_code == 404


def test_a_bad_edited_candidate_is_a_400_naming_the_component(user_client, task_set):
    run_id = post(user_client, "/api/runs/", {"config": run_config(task_set)}).json()["id"]
    response = post(
        user_client,
        f"/api/runs/{run_id}/candidates",
        {"components": {"instructions": "", "tone": "calm"}},
    )
    assert response.status_code == 400
    fields = {p["field"] for p in response.json()["problems"]}
    assert fields == {"components.instructions", "components.tone"}


def test_an_edited_candidate_for_an_ended_run_is_a_409_offering_a_fork_from_its_text(
    user_client, task_set
):
    run_id = post(user_client, "/api/runs/", {"config": run_config(task_set)}).json()["id"]
    post(user_client, f"/api/runs/{run_id}/stop", {})
    response = post(
        user_client, f"/api/runs/{run_id}/candidates", {"components": {"instructions": EDITED}}
    )
    assert response.status_code == 409
    body = response.json()
    assert "has ended (stopped)" in body["detail"]
    fork_url = body["injection"]["fork_url"]
    assert fork_url == f"/runs/new/?fork={run_id}&candidate=0&injection={body['injection']['id']}"
    page = user_client.get(fork_url)
    assert page.status_code == 200 and "30 days" in page.content.decode()


def test_a_human_candidate_in_the_api_says_who_edited_it_from_which_and_links_the_diff(
    user, user_client
):
    from tests.factories import recorded_run

    run = recorded_run(user, candidates=4, val_tasks=3, status=RunStatus.COMPLETED)
    Candidate.objects.filter(run=run, index=3).update(origin="human", author=user, parents=[1])
    human = user_client.get(f"/api/runs/{run.pk}/candidates/3").json()
    assert (human["origin"], human["author"], human["edited_from"]) == ("human", "alice", 1)
    assert human["compare_url"] == f"/runs/{run.pk}/compare/?c=1&c=3"
    listed = {c["index"]: c for c in user_client.get(f"/api/runs/{run.pk}").json()["candidates"]}
    assert listed[3]["author"] == "alice" and listed[2]["author"] is None
    assert listed[2]["compare_url"] is None


def test_the_events_page_holds_the_logs_messages_after_a_seq_up_to_its_limit(user, user_client):
    """GET /api/runs/{id}/events gives the websocket's messages as the log holds
    them (read as the database's JSON text): `after` and `limit` page it."""
    from optimizer.runs.events import publish_run_event

    run = Run.objects.create(owner=user)
    notes = ['one "é"', "two \\ \n ✓", "three"]
    for note in notes:
        publish_run_event(run.pk, "worker.ping", {"host": "test", "note": note})
    response = user_client.get(f"/api/runs/{run.pk}/events?after=1&limit=1")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.json() == [
        {"seq": 2, "type": "worker.ping", "data": {"host": "test", "note": notes[1]}}
    ]
    every = user_client.get(f"/api/runs/{run.pk}/events").json()
    assert [(e["seq"], e["data"]["note"]) for e in every] == [
        (1, notes[0]),
        (2, notes[1]),
        (3, notes[2]),
    ]
    assert user_client.get(f"/api/runs/{run.pk}/events?after=3").json() == []
