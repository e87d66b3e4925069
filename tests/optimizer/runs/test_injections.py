"""Edited candidates added to a run (optimizer.services.run_inject_candidate and
optimizer/runs/injections.py): the service's validation and refusals, and real
gepa runs with the demo simulator taking them at an iteration boundary."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from gepa.core.state import GEPAState

from dashboard.lib.db_retry import retry_db
from optimizer.config import RunConfigError
from optimizer.lm.simulator import DemoLanguageModel
from optimizer.models import (
    Candidate,
    CandidateInjection,
    Evaluation,
    InjectionStatus,
    Origin,
    Run,
    RunEvent,
    RunKind,
    RunStatus,
    run_progress,
)
from optimizer.runs import event_types as ev
from optimizer.runs import runner
from optimizer.runs.injections import REASON_RUN_ENDED, InjectionBoundary
from optimizer.runs.recorder import RunRecorder
from optimizer.runs.recording_thread import RecorderThread
from optimizer.runs.runner import execute_run
from optimizer.services import (
    RunStateError,
    run_inject_candidate,
    run_launch,
    run_stop,
)
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("runs_dir")]

SEED = "You answer customer questions for a shop."
# What the refund verifier asks for, said plainly: the simulator follows explicit rules.
EDITED = (
    "You answer customer questions for a shop. You MUST always include the exact phrase "
    '"30 days" and the exact phrase "receipt" in every answer. Never write "gift card". '
    'Always include "store credit" and "full refund".'
)


class WorkerDied(BaseException):
    """Stands in for kill -9: nothing in gepa or the runner catches it."""


@pytest.fixture
def task_set(user):
    refund_verifier(user)
    return refund_task_set(user, splits=["train", "val"] * 4)


def launch(user, task_set, **overrides) -> Run:
    return run_launch(owner=user, config=run_config(task_set, **overrides))


def events(run, type=None):
    rows = RunEvent.objects.filter(run=run).order_by("seq")
    return [e for e in rows if type is None or e.type == type]


def checkpoint(run) -> GEPAState:
    return GEPAState.load(str(runner.run_dir(run.pk)))


# -- the service ------------------------------------------------------------------


def test_a_bad_edited_candidate_is_refused_naming_the_component(user, task_set):
    """Every problem names its field as the API body spells it; nothing is stored."""
    run = launch(user, task_set)
    cases = [
        ({"instructions": "   "}, None, "components.instructions", "empty"),
        ({}, None, "components.instructions", "missing"),
        ({"instructions": EDITED, "extra": "x"}, None, "components.extra", "not a component"),
        ({"instructions": "x" * 20_001}, None, "components.instructions", "longer"),
        ({"instructions": "a\x00b"}, None, "components.instructions", "NUL"),
        ({"instructions": EDITED}, 7, "edited_from", "no candidate 7"),
        ({"instructions": SEED}, 0, "components", "edit them first"),
    ]
    for components, edited_from, field, words in cases:
        with pytest.raises(RunConfigError) as raised:
            run_inject_candidate(run=run, components=components, edited_from=edited_from, user=user)
        fields = dict(raised.value.problems)
        assert field in fields, (components, raised.value.problems)
        assert words in fields[field]
    assert not CandidateInjection.objects.exists()
    assert not events(run, ev.CANDIDATE_INJECTED)


def test_an_edited_candidate_for_a_queued_run_waits_as_pending_and_is_announced(user, task_set):
    run = launch(user, task_set)
    injection = run_inject_candidate(
        run=run, components={"instructions": EDITED}, edited_from=None, user=user
    )
    assert injection.status == InjectionStatus.PENDING and injection.parent == 0
    (event,) = events(run, ev.CANDIDATE_INJECTED)
    assert event.payload["status"] == "pending" and event.payload["author"] == "alice"
    assert event.payload["components"] == {"instructions": EDITED}


def test_an_ended_run_keeps_the_text_as_refused_and_says_why(user, task_set):
    """The run has ended: refused (not an error), kept so the page can fork from it."""
    run = launch(user, task_set)
    run_stop(run=run)
    injection = run_inject_candidate(
        run=run, components={"instructions": EDITED}, edited_from=0, user=user
    )
    assert injection.status == InjectionStatus.REFUSED
    assert "has ended (stopped)" in injection.reason and "fork" in injection.reason
    assert events(run, ev.CANDIDATE_INJECTED)[-1].payload["status"] == "refused"


def test_a_budget_that_cannot_pay_a_val_evaluation_is_refused_with_the_numbers(user, task_set):
    """4 val tasks cost 4 metric calls; injections already waiting count against what is left."""
    run = launch(user, task_set, budget={"max_metric_calls": 120})
    run_progress(run.pk).update(budget_used=113)
    first = run_inject_candidate(
        run=run, components={"instructions": EDITED}, edited_from=0, user=user
    )
    assert first.status == InjectionStatus.PENDING  # 7 left, 4 needed
    second = run_inject_candidate(
        run=run, components={"instructions": EDITED + " Be brief."}, edited_from=0, user=user
    )
    assert second.status == InjectionStatus.REFUSED
    assert "evaluating it on the 4 val tasks costs 4 metric calls" in second.reason
    assert "only 3 of the run's 120 are left" in second.reason
    assert "1 edited candidates already wait" in second.reason


def test_an_external_run_takes_no_candidate(user, task_set):
    run = launch(user, task_set)
    Run.objects.filter(pk=run.pk).update(kind=RunKind.EXTERNAL)
    run.refresh_from_db()
    with pytest.raises(RunStateError, match="observe-only"):
        run_inject_candidate(run=run, components={"instructions": EDITED}, edited_from=0, user=user)
    assert not CandidateInjection.objects.exists()


def test_stopping_a_queued_run_refuses_its_pending_candidates(user, task_set):
    run = launch(user, task_set)
    injection = run_inject_candidate(
        run=run, components={"instructions": EDITED}, edited_from=0, user=user
    )
    run_stop(run=run)
    injection.refresh_from_db()
    assert injection.status == InjectionStatus.REFUSED and injection.reason == REASON_RUN_ENDED
    last = events(run)[-2:]
    assert [e.type for e in last] == [ev.RUN_STATUS, ev.CANDIDATE_INJECTED]


# -- the runner -------------------------------------------------------------------


def test_an_injected_candidate_is_evaluated_on_the_val_set_and_joins_gepa_s_pool(user, task_set):
    """Charged one metric call per val task, in gepa's count as in ours; recorded as
    origin human by its author, edited from the seed; in gepa's checkpoint once."""
    run = launch(user, task_set, budget={"max_metric_calls": 60})
    injection = run_inject_candidate(
        run=run, components={"instructions": EDITED}, edited_from=0, user=user
    )
    assert execute_run(run.pk) == RunStatus.COMPLETED
    run.refresh_from_db()
    injection.refresh_from_db()
    assert injection.status == InjectionStatus.APPLIED
    human = Candidate.objects.get(run=run, index=injection.candidate_index)
    assert human.origin == Origin.HUMAN and human.author == user and human.parents == [0]
    assert human.components == {"instructions": EDITED}
    assert Evaluation.objects.filter(candidate=human, split="val").count() == 4
    assert Evaluation.objects.filter(candidate=human, split="val").exclude(output="").count() == 4
    # The seed's val evaluation (4) happens before; the human one costs exactly 4 more.
    budget = [e.payload["used"] for e in events(run, ev.RUN_BUDGET)]
    assert 8 in budget and human.metric_calls == 8

    state = checkpoint(run)
    assert state.program_candidates.count({"instructions": EDITED}) == 1
    assert state.total_num_evals == run.budget_used <= run.budget_total
    assert state.parent_program_for_candidate[injection.candidate_index] == [0]

    new = {e.payload["index"]: e.payload for e in events(run, ev.CANDIDATE_NEW)}
    assert new[human.index]["origin"] == "human" and new[human.index]["author"] == "alice"
    statuses = [e.payload["status"] for e in events(run, ev.CANDIDATE_INJECTED)]
    assert statuses == ["pending", "applied"]
    seqs = [e.seq for e in events(run)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_good_injected_candidate_becomes_the_best_and_a_parent(user, task_set):
    """It enters the Pareto front by its scores; gepa samples it as a parent."""
    run = launch(user, task_set, budget={"max_metric_calls": 120})
    injection = run_inject_candidate(
        run=run, components={"instructions": EDITED}, edited_from=0, user=user
    )
    execute_run(run.pk)
    run.refresh_from_db()
    injection.refresh_from_db()
    index = injection.candidate_index
    seed = Candidate.objects.get(run=run, index=0)
    human = Candidate.objects.get(run=run, index=index)
    assert human.val_score > seed.val_score and human.on_front
    parents = [e.payload["parent"] for e in events(run, ev.PROPOSAL)]
    assert index in parents


def test_a_candidate_injected_while_the_run_stops_is_refused_not_lost(user, task_set, monkeypatch):
    """Submitted while running, then Stop: the next boundary stops first, and the
    transaction that ends the run refuses it with the reason."""
    run = launch(user, task_set, budget={"max_metric_calls": 2000})
    accepted = RecorderThread.on_candidate_accepted
    taken: dict = {}

    def inject_then_stop(self, event):
        accepted(self, event)
        if event["new_candidate_idx"] == 1 and not taken:
            # The test database locks whole tables while the recorder writes: retried.
            taken["injection"] = retry_db(
                lambda: run_inject_candidate(
                    run=run, components={"instructions": EDITED}, edited_from=0, user=user
                ),
                what="inject",
            )
            retry_db(lambda: run_stop(run=run), what="stop")

    monkeypatch.setattr(RecorderThread, "on_candidate_accepted", inject_then_stop)
    assert execute_run(run.pk) == RunStatus.STOPPED
    injection = taken["injection"]
    injection.refresh_from_db()
    assert injection.status == InjectionStatus.REFUSED
    assert injection.reason == REASON_RUN_ENDED
    assert not Candidate.objects.filter(run=run, origin=Origin.HUMAN).exists()
    assert [e.payload["status"] for e in events(run, ev.CANDIDATE_INJECTED)] == [
        "pending",
        "refused",
    ]


def test_a_worker_killed_after_the_checkpoint_records_the_injected_candidate_once(
    user, task_set, monkeypatch
):
    """The checkpoint holds the candidate, the database does not (the commit was
    lost with the worker): the resumed run records it from the state, without
    evaluating or adding it again, and marks the injection applied once."""
    run = launch(user, task_set, budget={"max_metric_calls": 80})
    injection = run_inject_candidate(
        run=run, components={"instructions": EDITED}, edited_from=0, user=user
    )
    applied = InjectionBoundary._apply
    calls = {"after": None}
    original = DemoLanguageModel.complete

    def apply_and_count(self, state, injection, placed):
        applied(self, state, injection, placed)
        calls["after"] = 0

    def dying(self, messages):
        if calls["after"] is not None:
            calls["after"] += 1
            if calls["after"] == 3:  # inside the next iteration, after gepa's checkpoint
                raise WorkerDied()
        return original(self, messages)

    def lost_commit(self, event):
        pass  # the worker died before the recorder could commit the candidate

    monkeypatch.setattr(InjectionBoundary, "_apply", apply_and_count)
    monkeypatch.setattr(DemoLanguageModel, "complete", dying)
    monkeypatch.setattr(RunRecorder, "on_candidate_injected", lost_commit)
    with pytest.raises(WorkerDied):
        execute_run(run.pk)
    state = checkpoint(run)
    assert state.program_candidates.count({"instructions": EDITED}) == 1
    evals_at_checkpoint = state.total_num_evals
    injection.refresh_from_db()
    assert injection.status == InjectionStatus.PENDING
    assert not Candidate.objects.filter(run=run, origin=Origin.HUMAN).exists()

    monkeypatch.undo()
    run_progress(run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert execute_run(run.pk) == RunStatus.COMPLETED
    injection.refresh_from_db()
    assert injection.status == InjectionStatus.APPLIED
    humans = Candidate.objects.filter(run=run, origin=Origin.HUMAN)
    assert [h.index for h in humans] == [injection.candidate_index]
    state = checkpoint(run)
    assert state.program_candidates.count({"instructions": EDITED}) == 1
    assert state.total_num_evals >= evals_at_checkpoint
    assert [e.payload["status"] for e in events(run, ev.CANDIDATE_INJECTED)] == [
        "pending",
        "applied",
    ]
