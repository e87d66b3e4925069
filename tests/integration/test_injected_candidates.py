"""Edited candidates added to runs that a real `celery worker` process executes on
PostgreSQL with the demo simulator: one joins gepa's pool at an iteration
boundary, charged exactly one val evaluation, and is then a parent; one sent
as the run is stopped is applied or refused, never lost or doubled."""

from gepa.core.state import GEPAState

from optimizer.models import CandidateInjection, InjectionStatus, Origin, RunStatus
from optimizer.runs.injections import REASON_RUN_ENDED
from optimizer.services import run_inject_candidate, run_launch, run_stop
from tests.integration.test_runs_on_workers import assert_event_log_is_whole
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config
from tests.polling import wait_until

VAL_TASKS = 4  # refund_task_set: four train, four val
EDITED = (
    "You answer customer questions for a shop. You MUST always include the exact phrase "
    '"30 days" and the exact phrase "receipt" in every answer. Never write "gift card". '
    'Always include "store credit" and "full refund".'
)
FINISHED = (RunStatus.COMPLETED, RunStatus.STOPPED, RunStatus.FAILED)


def launch(user, **overrides):
    refund_verifier(user)
    config = run_config(
        refund_task_set(user),
        task_lm={"provider": "demo", "model": "demo-task", "simulated_latency_ms": 40},
        **overrides,
    )
    return run_launch(owner=user, config=config)


def finished(run):
    run.refresh_from_db()
    return run.status in FINISHED


def test_a_candidate_added_to_a_running_run_is_charged_one_val_evaluation_and_becomes_a_parent(
    celery_worker, services_env, user
):
    run = launch(user, budget={"max_metric_calls": 200})
    wait_until(lambda: run.candidates.count() >= 2, timeout=120, what="the run to be under way")
    injection = run_inject_candidate(
        run=run, components={"instructions": EDITED}, edited_from=0, user=user
    )
    assert injection.status == InjectionStatus.PENDING
    wait_until(lambda: finished(run), timeout=240, what="the run to end")
    assert run.status == RunStatus.COMPLETED, run.error

    injection.refresh_from_db()
    assert injection.status == InjectionStatus.APPLIED
    index = injection.candidate_index
    human = run.candidates.get(index=index)
    assert human.origin == Origin.HUMAN and human.author == user and human.parents == [0]
    assert human.evaluations.filter(split="val").exclude(output="").count() == VAL_TASKS

    # gepa's checkpoint: the same candidate once, its val evaluation counted exactly once,
    # and gepa's count is the run's budget line.
    state = GEPAState.load(f"{services_env['FRONTIER_RUNS_DIR']}/{run.pk}")
    assert state.program_candidates[index] == {"instructions": EDITED}
    assert state.program_candidates.count({"instructions": EDITED}) == 1
    assert human.metric_calls - state.num_metric_calls_by_discovery[index] == VAL_TASKS
    assert state.total_num_evals == run.budget_used <= run.budget_total
    # It is in the pool like any other: gepa sampled it as a parent afterwards.
    parents = {p for c in run.candidates.filter(index__gt=index) for p in c.parents}
    proposed_from = {e.payload["parent"] for e in run.events.filter(type="proposal")}
    assert index in parents | proposed_from
    assert_event_log_is_whole(run)


def test_a_candidate_sent_as_the_run_stops_is_applied_or_refused_never_lost(celery_worker, user):
    run = launch(user, budget={"max_metric_calls": 400})
    wait_until(lambda: run.candidates.count() >= 2, timeout=120, what="the run to be under way")
    injection = run_inject_candidate(
        run=run, components={"instructions": EDITED}, edited_from=0, user=user
    )
    run_stop(run=run)
    wait_until(lambda: finished(run), timeout=120, what="the run to stop")
    assert run.status == RunStatus.STOPPED, run.error

    injection.refresh_from_db()
    humans = list(run.candidates.filter(origin=Origin.HUMAN).values_list("index", flat=True))
    if injection.status == InjectionStatus.APPLIED:
        assert humans == [injection.candidate_index]
    else:
        assert injection.status == InjectionStatus.REFUSED
        assert injection.reason == REASON_RUN_ENDED and humans == []
    assert not CandidateInjection.objects.filter(status=InjectionStatus.PENDING).exists()
    statuses = [e.payload["status"] for e in run.events.filter(type="candidate.injected")]
    assert statuses == ["pending", injection.status]
    assert_event_log_is_whole(run)
