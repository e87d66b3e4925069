"""/api/external: the tracker opens a run, sends numbered event batches and
polls for Stop. The batches land on the same rows and events as a native run."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.account_services import api_token_create
from optimizer import services
from optimizer.celery_tasks import requeue_orphaned_runs
from optimizer.external.services import external_runs_abandon_silent
from optimizer.models import Candidate, Evaluation, Run, RunEvent, RunKind, RunStatus, run_progress

pytestmark = pytest.mark.django_db


class Tracker:
    """What frontier_tracker does over HTTP, through Django's test client."""

    def __init__(self, user):
        self.client = Client()
        self.auth = {
            "HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=user, name='tracker')[1]}"
        }

    def post(self, path, body):
        return self.client.post(
            path, json.dumps(body), content_type="application/json", **self.auth
        )

    def get(self, path):
        return self.client.get(path, **self.auth)

    def open(self, **fields):
        body = {
            "key": "laptop-run-0001",
            "name": "my gepa run",
            "host": "laptop",
            "gepa_version": "0.1.4",
            **fields,
        }
        return self.post("/api/external/runs", body)

    def send(self, run_id, seq, *events):
        return self.post(
            f"/api/external/runs/{run_id}/events", {"seq": seq, "events": list(events)}
        )


def seed(index=0, score=0.5, **fields):
    return {
        "type": "candidate",
        "index": index,
        "origin": "seed",
        "components": {"instructions": "Answer the customer."},
        "val_score": score,
        "metric_calls": 2,
        "tasks": [
            {"task_key": "t1", "score": 1.0, "output": "Refund in 30 days."},
            {"task_key": "t2", "score": 0.0, "output": "No.", "feedback": 'must mention "receipt"'},
        ],
        **fields,
    }


def child(index=1, parent=0, score=1.0):
    return {
        "type": "candidate",
        "index": index,
        "parents": [parent],
        "components": {"instructions": 'Mention "receipt".'},
        "val_score": score,
        "metric_calls": 8,
        "iteration": 1,
        "reflection": "The feedback asks for receipts.",
        "tasks": [{"task_key": "t1", "score": 1.0}, {"task_key": "t2", "score": 1.0}],
    }


@pytest.fixture
def tracker(user):
    return Tracker(user)


@pytest.fixture
def run_id(tracker):
    return tracker.open().json()["id"]


def test_a_tracker_opens_a_running_external_run_that_says_where_it_runs(tracker, user_client):
    response = tracker.open()
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["kind"] == "external" and body["status"] == "running" and body["last_batch"] == 0
    assert body["external"]["host"] == "laptop" and body["external"]["gepa_version"] == "0.1.4"
    rows = user_client.get("/runs/list.json").json()["runs"]
    assert [(r["id"], r["kind"]) for r in rows] == [(body["id"], "external")]


def test_opening_twice_with_one_key_gives_the_same_run(tracker, run_id):
    again = tracker.open()
    assert again.status_code == 200 and again.json()["id"] == run_id
    assert Run.objects.count() == 1


def test_a_batch_becomes_the_candidates_evaluations_and_events_of_a_native_run(
    tracker, run_id, user_client
):
    rejected = {
        "type": "proposal",
        "iteration": 1,
        "parent": 0,
        "accepted": False,
        "before": 0.0,
        "after": 0.0,
        "minibatch": ["t2"],
        "texts": {"instructions": "Be brief."},
        "reasoning": "shorter is better",
    }
    accepted = {
        "type": "proposal",
        "iteration": 2,
        "parent": 0,
        "accepted": True,
        "candidate": 1,
        "before": 0.0,
        "after": 1.0,
        "minibatch": ["t2"],
        "texts": {"instructions": 'Mention "receipt".'},
    }
    response = tracker.send(
        run_id,
        1,
        {"type": "status", "phase": "optimizing"},
        seed(),
        {"type": "budget", "used": 4, "total": 40},
        {
            "type": "trials",
            "candidate": None,
            "items": [
                {"task_key": "t2", "score": 0.0, "output": "Be brief.", "feedback": "too short"}
            ],
        },
        rejected,
        child(),
        accepted,
        {"type": "finished", "status": "completed"},
    )
    assert response.status_code == 200, response.content
    assert response.json() == {"applied": True, "duplicate": False, "last_batch": 1, "stop": False}

    run = Run.objects.get(pk=run_id)
    assert (run.status, run.seed_score, run.best_score, run.best_candidate.index) == (
        RunStatus.COMPLETED,
        0.5,
        1.0,
        1,
    )
    assert (run.budget_used, run.budget_total) == (4, 40)
    assert list(
        Candidate.objects.filter(run=run).values_list("index", "parents", "origin", "on_front")
    ) == [
        (0, [], "seed", False),
        (1, [0], "reflection", True),
    ]  # #1 dominates the seed (optimizer/front.py)
    missed = Evaluation.objects.get(candidate__index=0, task_key="t2")
    assert (missed.output, missed.feedback, missed.verdict) == (
        "No.",
        'must mention "receipt"',
        "fail",
    )
    types = list(RunEvent.objects.filter(run=run).values_list("type", flat=True))
    assert (
        types.count("candidate.new") == 2
        and types.count("front.updated") == 2
        and types[-1] == "run.finished"
    )

    snapshot = user_client.get(f"/runs/{run_id}/snapshot.json").json()
    assert snapshot["tasks"] == ["t1", "t2"] and snapshot["scores"] == [[1.0, 0.0], [1.0, 1.0]]
    shown = [(p["accepted"], p["texts"]) for p in snapshot["proposals"]]
    assert (False, {"instructions": "Be brief."}) in shown  # rejected proposals keep their text
    assert snapshot["run"]["kind"] == "external"


def test_a_resent_batch_is_acknowledged_and_creates_no_duplicates(tracker, run_id):
    assert tracker.send(run_id, 1, seed(), {"type": "budget", "used": 2}).status_code == 200
    events = RunEvent.objects.filter(run_id=run_id).count()
    again = tracker.send(run_id, 1, seed(), {"type": "budget", "used": 2})
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert RunEvent.objects.filter(run_id=run_id).count() == events
    assert Candidate.objects.filter(run_id=run_id).count() == 1


def test_a_batch_that_skips_one_is_refused_so_nothing_is_applied_out_of_order(tracker, run_id):
    response = tracker.send(run_id, 2, seed())
    assert response.status_code == 409
    assert response.json()["problems"][0]["field"] == "seq"
    assert not Candidate.objects.filter(run_id=run_id).exists()


@pytest.mark.parametrize(
    "event, field",
    [
        (seed(score="high"), "events.1.candidate.val_score"),
        (
            seed(components={"instructions": "x" * 200_001}),
            "events.1.candidate.components.instructions",
        ),
        ({"type": "teleport"}, "events.1"),
        (seed(surprise=1), "events.1.candidate.surprise"),
        ({"type": "error", "message": "bad\x00byte"}, "events.1.error.message"),
        ({"type": "status", "phase": "p" * 101}, "events.1.status.phase"),
        (child(index=1, parent=7), "events.1.candidate.parents"),
        ({"type": "budget", "used": 1_000_000_000, "total": 10}, "events.1.budget.used"),
        ({"type": "budget", "used": 2}, "events.1.budget.used"),
        (seed(index="0"), "events.1.candidate.index"),
    ],
)
def test_a_bad_event_is_a_400_naming_the_field_and_the_batch_saves_nothing(
    tracker, run_id, event, field
):
    response = tracker.send(run_id, 1, {"type": "budget", "used": 3}, event)
    assert response.status_code == 400, response.content
    assert response.json()["problems"][0]["field"] == field
    run = Run.objects.get(pk=run_id)
    assert (
        run.external_batch == 0
        and run.budget_used == 0
        and not Candidate.objects.filter(run=run).exists()
    )


def test_a_string_seq_is_refused_rather_than_read_as_a_number(tracker, run_id):
    response = tracker.send(run_id, "1", seed())
    assert response.status_code == 400, response.content
    assert response.json()["problems"][0]["field"] == "seq"
    assert Run.objects.get(pk=run_id).external_batch == 0


def test_an_event_after_finished_is_refused_and_the_run_stays_running(tracker, run_id):
    response = tracker.send(
        run_id, 1, seed(), {"type": "finished", "status": "completed"}, child(), child(index=2)
    )
    assert response.status_code == 400, response.content
    assert [p["field"] for p in response.json()["problems"]] == [
        "events.2.candidate",
        "events.3.candidate",
    ]
    run = Run.objects.get(pk=run_id)
    assert run.status == RunStatus.RUNNING and not Candidate.objects.filter(run=run).exists()


def test_a_parent_sent_in_an_earlier_batch_or_earlier_in_the_same_batch_is_known(tracker, run_id):
    assert tracker.send(run_id, 1, seed()).status_code == 200
    response = tracker.send(run_id, 2, child(index=1, parent=0), child(index=2, parent=1))
    assert response.status_code == 200, response.content
    assert Candidate.objects.filter(run_id=run_id).count() == 3


def test_a_budget_may_pass_its_total_by_one_iteration_as_gepa_does(tracker, run_id):
    response = tracker.send(run_id, 1, {"type": "budget", "used": 58, "total": 50})
    assert response.status_code == 200, response.content
    assert Run.objects.get(pk=run_id).budget_used == 58


def test_opening_an_external_run_past_the_active_runs_limit_is_refused(tracker, settings):
    settings.FRONTIER_MAX_ACTIVE_RUNS_PER_USER = 2
    assert tracker.open(key="laptop-run-0001").status_code == 201
    assert tracker.open(key="laptop-run-0002").status_code == 201
    refused = tracker.open(key="laptop-run-0003")
    assert refused.status_code == 400, refused.content
    problem = refused.json()["problems"][0]
    assert problem["field"] == "active_runs" and "limit is 2" in problem["message"]
    assert Run.objects.count() == 2
    assert tracker.open(key="laptop-run-0001").status_code == 200  # reopening is no new run


def test_a_user_past_the_events_per_minute_gets_a_429_with_retry_after(tracker, run_id, settings):
    settings.FRONTIER_EXTERNAL_EVENTS_PER_MINUTE = 3
    assert tracker.send(run_id, 1, seed(), {"type": "budget", "used": 2}).status_code == 200
    refused = tracker.send(run_id, 2, {"type": "budget", "used": 3}, {"type": "budget", "used": 4})
    assert refused.status_code == 429, refused.content
    assert 1 <= int(refused["Retry-After"]) <= 61
    assert refused.json()["problems"][0]["field"] == "events"
    assert Run.objects.get(pk=run_id).external_batch == 1


def test_a_run_whose_log_is_full_refuses_more_events_with_a_409(tracker, run_id, settings):
    assert tracker.send(run_id, 1, seed()).status_code == 200
    held = run_progress(run_id).values_list("last_seq", flat=True).get()
    settings.FRONTIER_EXTERNAL_EVENTS_PER_RUN = held + 1
    refused = tracker.send(run_id, 2, {"type": "budget", "used": 3}, {"type": "budget", "used": 4})
    assert refused.status_code == 409, refused.content
    assert "at most" in refused.json()["problems"][0]["message"]
    assert tracker.send(run_id, 2, {"type": "budget", "used": 3}).status_code == 200


def _silence(run_id, seconds):
    """As if the run's tracker was last heard from `seconds` ago."""
    run_progress(run_id).update(heartbeat_at=timezone.now() - timedelta(seconds=seconds))


def test_a_tracker_silent_past_the_limit_leaves_its_run_abandoned_and_its_slot_free(
    tracker, run_id, user_client, settings
):
    settings.FRONTIER_MAX_ACTIVE_RUNS_PER_USER = 1
    assert tracker.send(run_id, 1, seed()).status_code == 200
    _silence(run_id, settings.FRONTIER_EXTERNAL_SILENT_SECONDS - 5)
    assert external_runs_abandon_silent() == []
    _silence(run_id, settings.FRONTIER_EXTERNAL_SILENT_SECONDS + 5)
    assert external_runs_abandon_silent() == [run_id]

    run = Run.objects.get(pk=run_id)
    assert run.status == "abandoned" and run.phase.startswith("abandoned: its tracker was silent")
    assert run.finished_at is not None and "sent nothing" in run.stop_reason
    finished = RunEvent.objects.filter(run=run, type="run.finished").get().payload
    assert finished["status"] == "abandoned" and finished["best_index"] == 0
    assert tracker.open(key="laptop-run-0002").status_code == 201  # the slot is free

    # The tracker comes back: refused, nothing applied, and told why.
    refused = tracker.send(run_id, 2, {"type": "budget", "used": 9})
    assert refused.status_code == 409 and "abandoned" in refused.json()["problems"][0]["message"]
    assert tracker.get(f"/api/external/runs/{run_id}/control").json()["status"] == "abandoned"
    assert Run.objects.get(pk=run_id).budget_used == 0

    page = user_client.get(f"/runs/{run_id}/").content.decode()
    assert "abandoned" in page
    assert user_client.post(f"/runs/{run_id}/archive/", {"archived": "1"}).status_code == 302
    assert Run.objects.get(pk=run_id).archived
    assert user_client.post(f"/runs/{run_id}/delete/").status_code == 302
    assert not Run.objects.filter(pk=run_id).exists()


@pytest.mark.parametrize("action, how", [("stop", "stopped by the user"), ("cancel", "cancelled")])
def test_stop_or_cancel_on_a_silent_external_run_ends_it_at_once(
    tracker, run_id, user_client, action, how
):
    assert user_client.post(f"/runs/{run_id}/stop/").status_code == 302  # the tracker was alive
    assert Run.objects.get(pk=run_id).status == RunStatus.STOPPING
    _silence(run_id, 60)  # then its process died
    assert user_client.post(f"/runs/{run_id}/{action}/").status_code == 302
    run = Run.objects.get(pk=run_id)
    assert (run.status, run.stop_reason) == (RunStatus.STOPPED, how)
    assert "its tracker had been silent for 1 min" in run.phase
    assert user_client.post(f"/runs/{run_id}/delete/").status_code == 302
    assert not Run.objects.filter(pk=run_id).exists()


def test_stop_on_a_live_external_run_waits_for_its_tracker(tracker, run_id, user_client):
    _silence(run_id, 5)
    assert user_client.post(f"/runs/{run_id}/stop/").status_code == 302
    assert Run.objects.get(pk=run_id).status == RunStatus.STOPPING


def test_an_external_run_is_never_called_simulated_and_says_its_cost_was_not_reported(
    tracker, run_id, user_client
):
    run = tracker.get(f"/api/runs/{run_id}").json()
    assert (run["pricing"], run["simulator"]) == ("not_reported", False)
    page = user_client.get(f"/runs/{run_id}/").content.decode()
    assert "demo simulator" not in page
    assert ">not reported<" in page and "tokens not reported" in page


def test_the_usage_a_tracker_reports_is_the_runs_cost_and_tokens(tracker, run_id, user_client):
    usage = {"type": "usage", "calls": 3, "tokens_in": 1200, "tokens_out": 300, "cost": 0.0123}
    assert tracker.send(run_id, 1, seed(), usage).status_code == 200
    run = tracker.get(f"/api/runs/{run_id}").json()
    total = run["usage"]["total"]
    assert (run["pricing"], run["cost"], total["tokens_in"], total["tokens_out"]) == (
        "priced",
        0.0123,
        1200,
        300,
    )
    assert (
        '<span data-field="cost">$0.01</span>'
        in user_client.get(f"/runs/{run_id}/").content.decode()
    )
    budget = RunEvent.objects.filter(run_id=run_id, type="run.budget").last().payload
    assert budget["usage"]["total"] == {
        "calls": 3,
        "tokens_in": 1200,
        "tokens_out": 300,
        "cost": 0.0123,
    }
    tokens_only = {"type": "usage", "calls": 4, "tokens_in": 1300, "tokens_out": 310}
    assert tracker.send(run_id, 2, tokens_only).status_code == 200
    assert tracker.get(f"/api/runs/{run_id}").json()["usage"]["total"]["tokens_in"] == 1300


def test_another_users_token_can_neither_write_into_the_run_nor_see_it(
    tracker, run_id, other_user, other_client
):
    intruder = Tracker(other_user)
    assert intruder.send(run_id, 1, seed()).status_code == 404
    assert intruder.get(f"/api/external/runs/{run_id}/control").status_code == 404
    assert intruder.get(f"/api/runs/{run_id}").status_code == 404
    assert other_client.get(f"/runs/{run_id}/").status_code == 404
    assert other_client.get("/runs/list.json").json()["runs"] == []
    assert not Candidate.objects.exists()


def test_stop_on_the_page_reaches_the_stopper_and_the_run_ends_stopped(
    tracker, run_id, user_client
):
    assert tracker.get(f"/api/external/runs/{run_id}/control").json() == {
        "stop": False,
        "status": "running",
    }
    assert user_client.post(f"/runs/{run_id}/stop/").status_code == 302
    assert tracker.get(f"/api/external/runs/{run_id}/control").json() == {
        "stop": True,
        "status": "stopping",
    }
    assert tracker.send(run_id, 1, seed()).json()["stop"] is True
    tracker.send(run_id, 2, {"type": "finished", "status": "stopped"})
    run = Run.objects.get(pk=run_id)
    assert (run.status, run.phase) == (RunStatus.STOPPED, "stopped by the user")
    refused = tracker.send(run_id, 3, {"type": "budget", "used": 9})
    assert refused.status_code == 409 and refused.json()["problems"][0]["field"] == "run"


def test_a_failed_optimization_shows_its_error(tracker, run_id):
    tracker.send(
        run_id,
        1,
        {"type": "error", "message": "ValueError: boom", "iteration": 3},
        {"type": "finished", "status": "failed", "error": "ValueError: boom"},
    )
    run = Run.objects.get(pk=run_id)
    assert run.status == RunStatus.FAILED and "boom" in run.error


def test_the_run_page_marks_the_run_external_and_no_worker_ever_runs_or_resumes_it(
    tracker, run_id, user_client
):
    page = user_client.get(f"/runs/{run_id}/").content.decode()
    assert "badge-external" in page and "laptop" in page and "gepa 0.1.4" in page
    assert 'data-control="resume"' not in page and 'data-control="stop"' in page
    run_progress(run_id).update(heartbeat_at=None)  # the client went silent
    assert user_client.get(f"/runs/{run_id}/client.json").json()["client_silent"] is True
    assert requeue_orphaned_runs() == []
    tracker.send(run_id, 1, {"type": "finished", "status": "completed"})
    with pytest.raises(services.RunStateError):
        services.run_resume(run=Run.objects.get(pk=run_id), extra_budget=10)
    assert Run.objects.get(pk=run_id).kind == RunKind.EXTERNAL


def test_an_external_run_compares_with_a_native_run_of_its_task_set_and_its_best_prompt_downloads(
    tracker, user, user_client
):
    from tests.factories import recorded_run

    native = recorded_run(owner=user, candidates=3, val_tasks=3)
    keys = [row["task_id"] for row in native.tasks_snapshot]
    opened = tracker.open(task_set_id=native.task_set_id, key="same-task-set-01")
    assert opened.status_code == 201, opened.content
    external_id = opened.json()["id"]
    tasks = [{"task_key": key, "score": 1.0, "output": f"answer {key}"} for key in keys]
    tracker.send(
        external_id,
        1,
        seed(tasks=[dict(t, score=0.0) for t in tasks], score=0.0),
        dict(child(), tasks=tasks),
        {"type": "finished", "status": "completed"},
    )

    page = user_client.get(f"/runs/compare/?a={native.pk}&b={external_id}")
    html = page.content.decode()
    assert page.status_code == 200, html[:500]
    assert all(key in html for key in keys)  # best vs best, task by task, across the two kinds
    best = user_client.get(f"/runs/{external_id}/best/download.txt")
    assert best.status_code == 200 and 'Mention "receipt".' in best.content.decode()
    for page in (
        f"/runs/{external_id}/compare/?c=0&c=1",
        f"/runs/{external_id}/promotion/",
        f"/runs/{external_id}/export.json",
    ):
        assert user_client.get(page).status_code == 200, page


def test_a_task_set_the_user_cannot_see_is_refused_naming_the_field(tracker, other_user):
    from optimizer.tasksets.models import TaskSet

    hidden = TaskSet.objects.create(owner=other_user, name="theirs")
    response = tracker.open(task_set_id=hidden.pk)
    assert response.status_code == 400 and response.json()["problems"][0]["field"] == "task_set_id"
    assert not Run.objects.exists()


def test_the_candidate_page_shows_outputs_and_feedback_where_the_adapter_gave_them(
    tracker, run_id, user_client
):
    tracker.send(run_id, 1, seed(), child())
    page = user_client.get(f"/runs/{run_id}/candidates/0/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Refund in 30 days." in html and "must mention &quot;receipt&quot;" in html
    assert (
        user_client.get(f"/runs/{run_id}/candidates/1/").status_code == 200
    )  # no outputs at all: still a page


def test_a_run_with_no_candidate_yet_has_nothing_to_export(tracker, run_id):
    # Found by schemathesis: an export document holds at least one candidate.
    response = tracker.get(f"/api/runs/{run_id}/export")
    assert response.status_code == 409 and "no candidate yet" in response.json()["detail"]
    tracker.send(run_id, 1, seed())
    document = json.loads(b"".join(tracker.get(f"/api/runs/{run_id}/export").streaming_content))
    assert document["candidates"][0]["index"] == 0


def test_a_score_outside_0_1_from_the_users_adapter_is_exported_as_documented(
    tracker, run_id, user_client
):
    """The tracker takes any finite score (a user's metric may give -5 or 3.2);
    the export's documented shape allowed only [0, 1], so its answer broke the
    OpenAPI document (schemathesis found it)."""
    from optimizer.export import CandidateIn, EvaluationIn

    task = {"task_key": "t1", "score": 3.2, "output": "Refund in 30 days."}
    assert tracker.send(run_id, 1, {**seed(score=-5.0), "tasks": [task]}).status_code == 200
    exported = user_client.get(f"/api/runs/{run_id}/export")
    assert exported.status_code == 200
    candidate = json.loads(b"".join(exported.streaming_content))["candidates"][0]
    assert candidate["val_score"] == -5.0
    CandidateIn.model_validate(candidate)  # the documented shape holds
    EvaluationIn.model_validate(candidate["evaluations"][0])
