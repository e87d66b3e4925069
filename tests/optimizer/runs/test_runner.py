"""Real gepa runs with the demo simulator (and the openai provider against a local
fake server) executed by optimizer.runs.runner, checked through the rows and events a
user's dashboard reads."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.lib.db_retry import retry_db
from optimizer.lm.simulator import DemoCandidateProposer, DemoLanguageModel
from optimizer.models import (
    Candidate,
    Evaluation,
    Run,
    RunEvent,
    RunStatus,
    run_progress,
)
from optimizer.runs import event_types as ev
from optimizer.runs import runner
from optimizer.runs.recorder import RunRecorder
from optimizer.runs.recording_thread import RecorderThread
from optimizer.runs.runner import execute_run
from optimizer.services import run_launch, run_resume, run_stop
from tests.optimizer.fake_openai import KEY_ENV, FakeOpenAIServer, completion, error_body
from tests.optimizer.run_helpers import (
    act_at_iterations,
    endpoint,
    refund_task_set,
    refund_verifier,
    run_config,
    run_outcome,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("runs_dir")]

CANDIDATE_KEYS = {
    "index",
    "parents",
    "origin",
    "iteration",
    "metric_calls",
    "val_score",
    "scored",
    "objective_scores",
    "task_scores",
    "verdicts",
    "prompt_chars",
    "prompt_tokens",
    "mean_output_tokens",
    "mean_latency_ms",
    "components",
    "usage",
    "cost",
}
PROPOSAL_KEYS = {
    "iteration",
    "parent",
    "components",
    "accepted",
    "candidate",
    "before",
    "after",
    "minibatch",
    "texts",
    "reasoning",
    "metric_calls",
    "usage",
    "cost",
    "notes",
}


@pytest.fixture
def task_set(user):
    refund_verifier(user)
    return refund_task_set(user, splits=["train", "val"] * 4)


def launch(user, task_set, **overrides) -> Run:
    return run_launch(owner=user, config=run_config(task_set, **overrides))


def events(run, type=None):
    rows = RunEvent.objects.filter(run=run).order_by("seq")
    return [e for e in rows if type is None or e.type == type]


def test_budget_updates_ride_with_the_iteration_s_batch_instead_of_one_event_each(
    user, task_set, monkeypatch
):
    from optimizer.runs import recorder

    updates = []
    monkeypatch.setattr(
        recorder, "BUDGET_PUBLISH_SECONDS", 3600
    )  # a fast run: no budget event goes out alone
    original = RunRecorder.on_budget_updated
    monkeypatch.setattr(
        RunRecorder,
        "on_budget_updated",
        lambda self, event: (updates.append(event), original(self, event))[1],
    )
    run = launch(user, task_set)
    assert execute_run(run.pk) == RunStatus.COMPLETED

    log = events(run)
    budgets = [n for n, e in enumerate(log) if e.type == ev.RUN_BUDGET]
    iterations = len({u["iteration"] for u in updates})
    assert (
        len(updates) > iterations and len(budgets) <= iterations + 2
    )  # one per iteration, not one per update
    assert log[budgets[-1]].payload["used"] == Run.objects.get(pk=run.pk).budget_used


def test_a_demo_run_records_candidates_evaluations_and_events_and_improves(user, task_set):
    run = launch(user, task_set)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    run.refresh_from_db()

    candidates = list(Candidate.objects.filter(run=run).order_by("index"))
    assert [c.index for c in candidates] == list(range(len(candidates)))
    assert len(candidates) >= 3
    assert run.best_score > run.seed_score  # the simulator's reflection genuinely helps
    assert run.best_candidate.val_score == run.best_score == max(c.val_score for c in candidates)
    assert candidates[0].origin == "seed" and all(c.origin == "reflection" for c in candidates[1:])
    assert all(c.parents and c.parents[0] < c.index for c in candidates[1:])
    assert Evaluation.objects.filter(candidate__run=run, split="val").count() == 4 * len(candidates)
    evaluation = Evaluation.objects.filter(candidate=run.best_candidate).first()
    assert evaluation.output and evaluation.result["verifiers"][0]["id"] == "refund-policy"
    assert evaluation.tokens_out > 0

    seqs = [e.seq for e in events(run)]
    assert seqs == list(range(1, len(seqs) + 1)) and run.last_seq == seqs[-1]
    new = events(run, ev.CANDIDATE_NEW)
    assert [e.payload["index"] for e in new] == [c.index for c in candidates]
    assert all(set(e.payload) == CANDIDATE_KEYS for e in new)
    assert set(new[0].payload["objective_scores"]) == {"refund-policy"}
    proposals = events(run, ev.PROPOSAL)
    assert all(set(e.payload) == PROPOSAL_KEYS for e in proposals)
    assert sorted(p.payload["candidate"] for p in proposals if p.payload["accepted"]) == list(
        range(1, len(candidates))
    )
    assert all(p.payload["reasoning"] for p in proposals)
    # front.updated carries deltas; folded in seq order they are the whole front.
    leaders, members = {}, set()
    for delta in (e.payload for e in events(run, ev.FRONT_UPDATED)):
        assert (
            len(delta["took"]) + len(delta["joined"]) <= 4
        )  # what changed, never the whole front again
        for key in delta["took"]:
            leaders[key] = [delta["index"]]
        for key in delta["joined"]:
            leaders[key].append(delta["index"])
        members = (members | set(delta["added"])) - set(delta["removed"])
    scores = Evaluation.objects.filter(candidate__run=run, split="val").values_list(
        "task_key", "candidate__index", "score"
    )
    top = {key: max(s for k, _, s in scores if k == key) for key, _, _ in scores}
    assert leaders == {
        key: sorted(i for k, i, s in scores if k == key and s == best) for key, best in top.items()
    }
    assert set(leaders) == {"laptop", "blender", "late", "phone"}
    assert events(run, ev.FRONT_UPDATED)[-1].payload["best_index"] == run.best_candidate.index
    assert sorted(
        Candidate.objects.filter(run=run, on_front=True).values_list("index", flat=True)
    ) == sorted(members)
    budget = events(run, ev.RUN_BUDGET)[-1].payload
    assert (budget["used"], budget["total"], budget["cost"]) == (
        run.budget_used,
        120,
        0,
    )  # the simulator is free
    finished = events(run)[-1]
    assert finished.type == ev.RUN_FINISHED and finished.payload["status"] == "completed"
    phases = [(e.payload["status"], e.payload["phase"]) for e in events(run, ev.RUN_STATUS)]
    assert phases == [
        ("queued", "queued"),
        ("running", "seed evaluation"),
        ("running", "optimizing"),
        ("completed", "finished: budget reached"),
    ]
    assert (
        run.stop_reason == "budget reached" and finished.payload["stop_reason"] == "budget reached"
    )


@pytest.mark.parametrize("frontier_type", ["objective", "hybrid"])
def test_objective_and_hybrid_frontiers_optimize_on_the_per_verifier_objectives(
    user, task_set, frontier_type
):
    run = launch(user, task_set, frontier_type=frontier_type, budget={"max_metric_calls": 60})
    assert execute_run(run.pk) == RunStatus.COMPLETED
    run.refresh_from_db()
    assert run.best_score > run.seed_score
    assert all(
        set(c.objective_scores) == {"refund-policy"} for c in Candidate.objects.filter(run=run)
    )


def test_a_finished_run_delivered_again_does_nothing(user, task_set):
    run = launch(user, task_set)
    execute_run(run.pk)
    count = RunEvent.objects.filter(run=run).count()
    assert execute_run(run.pk) is None
    assert RunEvent.objects.filter(run=run).count() == count


def test_a_run_held_by_a_live_worker_is_not_started_twice(user, task_set):
    run = launch(user, task_set)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    run_progress(run.pk).update(heartbeat_at=timezone.now())
    assert execute_run(run.pk) is None
    assert not Candidate.objects.filter(run=run).exists()


class WorkerDied(BaseException):
    """Stands in for kill -9: nothing in gepa or the runner catches it."""


def test_a_run_whose_worker_died_resumes_from_its_checkpoint_without_duplicates(
    user, task_set, monkeypatch
):
    run = launch(user, task_set, budget={"max_metric_calls": 160})
    calls = {"n": 0}
    original = DemoLanguageModel.complete

    def dying(self, messages):
        calls["n"] += 1
        if calls["n"] == 10:  # while the first proposal is scored on the valset
            raise WorkerDied()
        return original(self, messages)

    monkeypatch.setattr(DemoLanguageModel, "complete", dying)
    with pytest.raises(WorkerDied):
        execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    before = Candidate.objects.filter(run=run).count()
    assert before >= 1

    monkeypatch.setattr(DemoLanguageModel, "complete", original)
    # The broker redelivers once the worker is gone; the heartbeat has gone stale.
    run_progress(run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert execute_run(run.pk) == RunStatus.COMPLETED

    indices = list(
        Candidate.objects.filter(run=run).order_by("index").values_list("index", flat=True)
    )
    assert indices == list(range(len(indices))) and len(indices) > before
    new = [e.payload["index"] for e in events(run, ev.CANDIDATE_NEW)]
    assert sorted(new) == indices  # each candidate announced exactly once
    iterations = [e.payload["iteration"] for e in events(run, ev.PROPOSAL)]
    assert len(iterations) == len(set(iterations))
    seqs = [e.seq for e in events(run)]
    assert seqs == list(range(1, len(seqs) + 1))
    statuses = [e.payload["phase"] for e in events(run, ev.RUN_STATUS)]
    assert "resuming" in statuses


def test_a_new_run_starts_from_its_seed_though_its_directory_holds_another_runs_state(
    user, task_set
):
    """Reset the database and keep the runs directory, or let SQLite give a
    deleted run's id again, and a new run's directory can hold another run's
    gepa_state.bin. The new run resumed it: it finished at once, "budget
    reached" with its seed alone (4 of its 120 calls). It now sets that file
    aside and optimizes from its own seed."""
    earlier = launch(user, task_set, seed_components={"instructions": "An earlier run's seed."})
    assert execute_run(earlier.pk) == RunStatus.COMPLETED
    run = launch(user, task_set)
    left = runner.run_dir(run.pk)
    left.mkdir(parents=True)
    (left / "gepa_state.bin").write_bytes(
        (runner.run_dir(earlier.pk) / "gepa_state.bin").read_bytes()
    )

    assert execute_run(run.pk) == RunStatus.COMPLETED

    run.refresh_from_db()
    assert run.budget_used > 100 and Candidate.objects.filter(run=run).count() > 1
    seed = Candidate.objects.get(run=run, index=0)
    assert seed.components == {"instructions": "You answer customer questions for a shop."}
    assert [path.name.split(".another-run-")[0] for path in left.glob("*.another-run-*")] == [
        "gepa_state.bin"
    ]
    seqs = [e.seq for e in events(run)]
    assert seqs == list(range(1, len(seqs) + 1))
    assert "resuming" not in [e.payload["phase"] for e in events(run, ev.RUN_STATUS)]


def test_a_worker_that_lost_its_claim_to_another_worker_stops_without_writing_anything_more(
    user, task_set, monkeypatch
):
    run = launch(user, task_set, budget={"max_metric_calls": 2000})
    accepted = RunRecorder.on_candidate_accepted
    taken: dict = {}

    def taken_over_at_candidate_two(self, event):
        accepted(self, event)
        if event["new_candidate_idx"] == 2 and not taken:
            # The watchdog gave the run to another worker: this one looked dead (a long DB outage).
            # The test database locks whole tables, and the recorder may be writing: retry as it does.
            def take_over() -> None:
                Run.objects.filter(pk=run.pk).update(claim="another-worker")
                run_progress(run.pk).update(heartbeat_at=timezone.now())
                taken["last_seq"] = Run.objects.get(pk=run.pk).last_seq

            retry_db(take_over, what="take over")
            taken["checkpoint"] = (runner.run_dir(run.pk) / "gepa_state.bin").stat().st_mtime_ns

    monkeypatch.setattr(RunRecorder, "on_candidate_accepted", taken_over_at_candidate_two)
    assert execute_run(run.pk) is None  # it stopped: not its run any more

    run.refresh_from_db()
    assert (
        run.claim == "another-worker" and run.status == RunStatus.RUNNING
    )  # the new holder's state, untouched
    assert run.last_seq == taken["last_seq"]
    assert [e.seq for e in events(run)] == list(range(1, taken["last_seq"] + 1))
    assert not events(run, ev.RUN_FINISHED)
    assert sorted(Candidate.objects.filter(run=run).values_list("index", flat=True)) == [0, 1]
    assert run.budget_used < 2000
    # gepa's checkpoint is the new holder's too: the stopper raised before gepa could write it again.
    assert (runner.run_dir(run.pk) / "gepa_state.bin").stat().st_mtime_ns == taken["checkpoint"]


def test_stop_ends_the_run_after_the_iteration_in_flight(user, task_set, monkeypatch):
    run = launch(user, task_set, budget={"max_metric_calls": 2000})
    accepted = RecorderThread.on_candidate_accepted

    def stop_at_candidate_two(self, event):
        accepted(self, event)
        if event["new_candidate_idx"] == 2:
            # What the Stop button does, mid-iteration (while gepa reports the accepted candidate;
            # the recorder may be writing at that moment: the test database locks whole tables).
            retry_db(lambda: run_stop(run=run), what="stop")

    monkeypatch.setattr(RecorderThread, "on_candidate_accepted", stop_at_candidate_two)
    assert execute_run(run.pk) == RunStatus.STOPPED
    run.refresh_from_db()
    assert run.phase == "stopped by the user"
    assert (
        Candidate.objects.filter(run=run).count() == 3
    )  # the iteration finished, no new one started
    assert run.budget_used < 2000
    statuses = [e.payload["status"] for e in events(run, ev.RUN_STATUS)]
    assert statuses[-2:] == ["stopping", "stopped"]


@pytest.mark.parametrize("every_ms, reads", [(0, "every iteration"), (60_000, "once")])
def test_the_engine_reads_its_steering_at_most_as_often_as_set(
    user, task_set, monkeypatch, settings, every_ms, reads
):
    """Reading stop, pause and injections is a database round trip: at most one
    per FRONTIER_STEERING_CHECK_MS, the first before the first iteration."""
    settings.FRONTIER_STEERING_CHECK_MS = every_ms
    run = launch(user, task_set, budget={"max_metric_calls": 300})
    counted = {"reads": 0, "checks": 0}
    steer, limits_check = runner.InjectionBoundary.__call__, runner.BudgetGuard.__call__

    def read(self, state, **kwargs):  # what follows each read of the run's flags
        counted["reads"] += 1
        return steer(self, state, **kwargs)

    def check(self, state):
        counted["checks"] += 1
        return limits_check(self, state)

    monkeypatch.setattr(runner.InjectionBoundary, "__call__", read)
    monkeypatch.setattr(runner.BudgetGuard, "__call__", check)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    assert counted["checks"] > 3
    # gepa asks the limits first and the steering only while they let the run go on.
    expected = counted["checks"] - 1 if reads == "every iteration" else 1
    assert counted["reads"] == expected


def test_the_runs_stopper_asks_its_checks_in_order_up_to_the_first_that_stops():
    asked = []

    def check(name, stops):
        def asking(state):
            asked.append(name)
            return stops

        return asking

    stopper = runner.Stopper(
        300, check("barrier", False), check("limits", True), check("steering", False)
    )
    assert stopper(object()) is True
    assert asked == ["barrier", "limits"]
    assert runner.Stopper(300, check("barrier", False))(object()) is False


def test_every_budget_update_tells_the_budget_left(user, task_set, monkeypatch):
    """gepa reads the budget left from its first stopper that has one: the run's
    own stopper, which carries the run's budget."""
    run = launch(user, task_set, budget={"max_metric_calls": 300})
    updates = []
    relay = RecorderThread.on_budget_updated

    def noting(self, event):
        updates.append((event["metric_calls_used"], event["metric_calls_remaining"]))
        relay(self, event)

    monkeypatch.setattr(RecorderThread, "on_budget_updated", noting)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    assert updates
    assert all(left == max(0, 300 - used) for used, left in updates)


def test_a_run_stopped_and_resumed_spends_and_finds_what_the_uninterrupted_run_does(
    user, task_set, monkeypatch
):
    """Stop at iteration 3, then Resume (no extra budget): the same candidates
    (texts, parents, scores, metric calls at birth), budget used, task calls and
    tokens as the same seeded run straight through; budget_used equals the task
    calls counted after the stop and at the end (gepa 0.1.4 evaluates the seed
    again on resume: answered from its records, and the generator, the
    minibatch sampler and the simulator's memory carried in the checkpoint)."""
    straight = launch(user, task_set, budget={"max_metric_calls": 150})
    assert execute_run(straight.pk) == RunStatus.COMPLETED
    expected = run_outcome(straight)
    assert expected["budget_used"] == expected["task_calls"]

    run = launch(user, task_set, budget={"max_metric_calls": 150})
    act_at_iterations(monkeypatch, {3}, lambda _: run_stop(run=run))
    assert execute_run(run.pk) == RunStatus.STOPPED
    stopped = run_outcome(run)
    assert stopped["budget_used"] == stopped["task_calls"] < expected["budget_used"]
    run_resume(run=run)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    assert run_outcome(run) == expected


def test_a_failing_reflection_model_surfaces_as_error_events(user, task_set, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeOpenAIServer() as server:
        server.default = (
            500,
            {"error": {"message": "reflection backend down", "type": "server_error"}},
            0.0,
        )
        reflection = {
            "provider": "openai",
            "model": "fake-model",
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "max_retries": 0,
            "timeout": 5,
        }
        run = launch(
            user,
            task_set,
            reflection_lm=endpoint("failing", reflection),
            budget={"max_metric_calls": 20},
        )
        assert execute_run(run.pk) == RunStatus.COMPLETED
    errors = [e.payload for e in events(run, ev.ERROR)]
    assert errors and all(e["where"] == "reflection" for e in errors)
    assert "Reflection failed" in errors[0]["message"] and "500" in errors[0]["message"]
    assert Candidate.objects.filter(run=run).count() == 1  # nothing was proposed


def test_a_task_model_with_a_bad_configuration_fails_the_run_with_a_clear_error(
    user, task_set, monkeypatch
):
    monkeypatch.delenv("FRONTIER_MISSING_KEY", raising=False)
    task_lm = {
        "provider": "openai",
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "FRONTIER_MISSING_KEY",
    }
    run = launch(user, task_set, task_lm=endpoint("keyless", task_lm))
    assert execute_run(run.pk) == RunStatus.FAILED
    run.refresh_from_db()
    assert "FRONTIER_MISSING_KEY" in run.error
    assert events(run, ev.RUN_STATUS)[-1].payload["error"] == run.error
    assert events(run)[-1].type == ev.RUN_FINISHED


def test_the_openai_provider_drives_a_whole_run_through_the_real_client(
    user, task_set, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeOpenAIServer() as server:
        lm = {
            "provider": "openai",
            "model": "fake-model",
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "timeout": 5,
        }
        run = launch(user, task_set, task_lm=endpoint("fake", lm), budget={"max_metric_calls": 12})
        assert execute_run(run.pk) == RunStatus.COMPLETED
        task_calls = [
            r for r in server.requests if r["body"] and r["body"]["messages"][0]["role"] == "system"
        ]
    assert (
        task_calls[0]["body"]["messages"][0]["content"]
        == "You answer customer questions for a shop."
    )
    assert task_calls[0]["headers"]["authorization"] == "Bearer sk-test"
    seed = Candidate.objects.get(run=run, index=0)
    evaluation = seed.evaluations.first()
    assert (
        evaluation.output == "Hi there."
        and evaluation.tokens_in == 11
        and evaluation.tokens_out == 3
    )


def test_a_holdout_split_scores_the_seed_and_the_best_candidate(user):
    refund_verifier(user)
    task_set = refund_task_set(user, splits=["train", "val", "holdout"] * 3)
    run = launch(user, task_set, splits={"holdout": "holdout"})
    assert execute_run(run.pk) == RunStatus.COMPLETED
    run.refresh_from_db()
    holdout = Evaluation.objects.filter(candidate__run=run, split="holdout")
    assert set(holdout.values_list("candidate__index", flat=True)) == {0, run.best_candidate.index}
    report = events(run, ev.HOLDOUT_SCORED)[0].payload
    assert report["best_index"] == run.best_candidate.index and report["tasks"] == 2


def test_the_verify_loop_records_its_attempts_per_evaluation(user, task_set):
    run = launch(
        user,
        task_set,
        verify={"enabled": True, "judge": "verifiers", "max_verify": 2},
        budget={"max_metric_calls": 8},
    )
    assert execute_run(run.pk) == RunStatus.COMPLETED
    evaluations = list(Evaluation.objects.filter(candidate__run=run))
    assert evaluations and all(1 <= len(e.attempts) <= 2 for e in evaluations)
    retried = [e for e in evaluations if len(e.attempts) == 2]
    assert retried and all(e.attempts[0]["verdict"].startswith("rejected: ") for e in retried)


def test_a_completed_run_continues_with_more_budget_from_where_it_ended(user, task_set):
    run = launch(user, task_set, budget={"max_metric_calls": 12})
    assert execute_run(run.pk) == RunStatus.COMPLETED
    run.refresh_from_db()
    used, candidates = run.budget_used, Candidate.objects.filter(run=run).count()

    run_resume(run=run, extra_budget=60)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    run.refresh_from_db()
    assert run.budget_total == 72 and run.budget_used > used
    indices = list(
        Candidate.objects.filter(run=run).order_by("index").values_list("index", flat=True)
    )
    assert indices == list(range(len(indices))) and len(indices) > candidates
    assert sorted(e.payload["index"] for e in events(run, ev.CANDIDATE_NEW)) == indices
    assert [e.payload["status"] for e in events(run, ev.RUN_FINISHED)] == ["completed", "completed"]


def test_parallel_proposals_record_every_proposal_of_a_round_with_its_own_parent_and_minibatch(
    user, task_set
):
    run = launch(user, task_set, parallel_proposals=4, budget={"max_metric_calls": 120})
    assert execute_run(run.pk) == RunStatus.COMPLETED
    run.refresh_from_db()
    candidates = list(Candidate.objects.filter(run=run).order_by("index"))
    assert [c.index for c in candidates] == list(range(len(candidates)))
    assert run.best_score > run.seed_score

    proposals = [e.payload for e in events(run, ev.PROPOSAL)]
    assert all(set(p) == PROPOSAL_KEYS for p in proposals)
    by_iteration: dict[int, list[dict]] = {}
    for p in proposals:
        by_iteration.setdefault(p["iteration"], []).append(p)
    # A full round publishes four proposals; each names its own minibatch, scored before and after.
    assert max(len(round_) for round_ in by_iteration.values()) == 4
    assert all(len(p["minibatch"]) == 2 and p["texts"] and p["reasoning"] for p in proposals)
    accepted = sorted(p["candidate"] for p in proposals if p["accepted"])
    assert accepted == list(
        range(1, len(candidates))
    )  # every accepted child announced once, none lost
    for p in proposals:
        if p["accepted"]:
            child = candidates[p["candidate"]]
            assert child.parents == [p["parent"]] and child.iteration == p["iteration"]
            assert {name: text[:100] for name, text in child.components.items()} == {
                name: text[:100] for name, text in p["texts"].items()
            }
    seqs = [e.seq for e in events(run)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_round_of_parallel_proposals_asks_the_demo_reflection_at_once(
    user, task_set, monkeypatch
):
    """The four reflections of a round wait out one reflection latency together,
    not one after another (gepa would call a custom proposer once per proposal)."""
    lock, in_flight, peak = threading.Lock(), [0], [0]
    original = DemoCandidateProposer.propose

    def propose(self, *args):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        try:
            return original(self, *args)
        finally:
            with lock:
                in_flight[0] -= 1

    monkeypatch.setattr(DemoCandidateProposer, "propose", propose)
    reflection = {"provider": "demo", "model": "demo", "simulated_latency_ms": 200}
    run = launch(
        user,
        task_set,
        parallel_proposals=4,
        reflection_lm=reflection,
        budget={"max_metric_calls": 60},
    )
    assert execute_run(run.pk) == RunStatus.COMPLETED
    assert peak[0] == 4


def test_each_parallel_proposal_keeps_its_own_reasoning(user, task_set):
    """The demo reflection states each rule it writes ("… → rule"): every rule a
    proposal's reasoning names is in that proposal's own texts, and a round's
    proposals do not all share one reasoning."""
    run = launch(user, task_set, parallel_proposals=4, budget={"max_metric_calls": 120})
    assert execute_run(run.pk) == RunStatus.COMPLETED
    proposals = [e.payload for e in events(run, ev.PROPOSAL)]
    by_iteration: dict[int, list[dict]] = {}
    for p in proposals:
        by_iteration.setdefault(p["iteration"], []).append(p)
        written = "\n".join(p["texts"].values())
        rules = [
            line.split(" → ", 1)[1]
            for line in p["reasoning"].splitlines()
            if " → " in line and not line.endswith("…")
        ]
        assert rules, p["reasoning"]
        assert all(rule in written for rule in rules), (p["reasoning"], written)
    distinct = [
        round_
        for round_ in by_iteration.values()
        if len({tuple(sorted(p["texts"].items())) for p in round_}) > 1
    ]
    assert distinct and all(len({p["reasoning"] for p in round_}) > 1 for round_ in distinct)


def test_a_run_whose_model_only_answers_empty_text_fails_and_says_so_once(
    user, task_set, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeOpenAIServer() as server:
        server.default = (200, completion(""), 0.0)
        lm = {
            "provider": "openai",
            "model": "fake-model",
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "timeout": 5,
        }
        run = launch(user, task_set, task_lm=endpoint("mute", lm), budget={"max_metric_calls": 40})
        assert execute_run(run.pk) == RunStatus.FAILED
    run.refresh_from_db()
    assert "empty output" in run.error
    errors = [e.payload for e in events(run, ev.ERROR)]
    assert (
        len(errors) == 1
        and errors[0]["where"] == "runner"
        and "empty output" in errors[0]["message"]
    )


def test_a_seed_the_model_answered_some_val_tasks_for_keeps_its_score_when_the_run_fails(
    user, task_set, monkeypatch
):
    """The boundary of "no score": one answered val task is enough. The seed's other
    tasks failed (0, their error as feedback) and the run then failed on 8 failed
    calls in a row, but its val score is a score, and the run's seed and best."""
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeOpenAIServer() as server:
        server.script = [(200, completion("A full refund within 30 days with a receipt."), 0.0)] * 2
        server.default = (500, error_body("down", "server_error"), 0.0)
        lm = {
            "provider": "openai",
            "model": "fake-model",
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "max_retries": 0,
        }
        run = launch(user, task_set, task_lm=endpoint("flaky", lm), concurrency=1)
        assert execute_run(run.pk) == RunStatus.FAILED
    run.refresh_from_db()
    seed = Candidate.objects.get(run=run, index=0)
    assert run.best_candidate == seed and run.seed_score == run.best_score == seed.val_score > 0
    assert run.budget_used >= 4  # the seed's four val tasks at least


WARM_UP_PROBE = """
import gc, sys, django
django.setup()
import optimizer.celery_tasks
from celery.signals import worker_init
from verifiers_app.engine import linear_regexes
def loaded():
    return (
        "dashboard.urls" in sys.modules,
        linear_regexes._unicode_classes.cache_info().currsize,
        gc.get_freeze_count() > 0,
    )
before = loaded()
worker_init.send(sender=None)
print(before, loaded())
"""


def _warm_up_probe(**env: str) -> str:
    """What a new interpreter has loaded before and after Celery's worker_init (its last line)."""
    environ = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    environ.update(DJANGO_SETTINGS_MODULE="dashboard.settings", **env)
    probe = subprocess.run(
        [sys.executable, "-c", WARM_UP_PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    return probe.stdout.split("\n")[-2]


def test_a_worker_loads_what_runs_need_before_it_makes_its_pool():
    """A Celery worker (any pool: prefork children inherit it, a solo or
    threads pool runs tasks in the worker's own process) loads the URLconf
    (which a run's list-row pushes reverse, and which imports the whole API)
    and RE2's Unicode classes as it starts, not inside its first run, where
    the imports took CPU from the run's threads, then freezes them out of the
    garbage collector's full collections. Checked in a new interpreter: this
    one has long loaded both. The worker's broker URL is never dialled here."""
    worker = _warm_up_probe(REDIS_URL="redis://127.0.0.1:9/0", SECRET_KEY="probe")
    assert worker == "(False, 0, False) (True, 1, True)"


def test_an_embedded_worker_leaves_its_web_process_as_it_is():
    """Embedded mode (no Redis): the worker runs in the web process, which
    loads its URLconf itself; nothing is frozen out of its collections."""
    assert _warm_up_probe() == "(False, 0, False) (False, 0, False)"
