"""A re-scoring in distributed mode whose `celery worker` is killed (SIGKILL)
half-way: another worker's watchdog finds it silent and scores it again from
the start, and it ends done with every candidate, the run's own scores untouched."""

from __future__ import annotations

from optimizer.models import Candidate, Scoring, ScoringStatus
from optimizer.scorings.services import scoring_create
from tests.factories import WINDOW_ONLY
from tests.integration.conftest import start_worker
from tests.polling import wait_until


def test_a_scoring_whose_worker_is_killed_is_finished_by_another_worker(
    services_env, user, tmp_path
):
    from bench.rescore import build_run

    # Enough outputs that the first worker is still scoring when it is killed.
    run = build_run(user, candidates=1000, tasks=200)
    before = list(Candidate.objects.filter(run=run).values_list("index", "val_score"))
    first = start_worker(services_env, tmp_path / "first-worker.log")
    try:
        scoring = scoring_create(run=run, user=user, specs=[WINDOW_ONLY], source=[])
        wait_until(
            lambda: Scoring.objects.filter(
                pk=scoring.pk, status=ScoringStatus.RUNNING, done__gt=0
            ).exists(),
            timeout=120,
            what=f"the first worker to be scoring\n{first.log()}",
        )
        first.kill()
    finally:
        first.stop()
    scoring.refresh_from_db()
    # Nobody told it: its worker vanished while scoring, or (the engine scores
    # 200,000 of these outputs in a few seconds) while writing the results.
    assert scoring.status == ScoringStatus.RUNNING
    assert not scoring.candidates.exists()

    second = start_worker(services_env, tmp_path / "second-worker.log")
    try:
        wait_until(
            lambda: Scoring.objects.filter(
                pk=scoring.pk, status__in=[ScoringStatus.DONE, ScoringStatus.FAILED]
            ).exists(),
            timeout=240,
            what=f"the second worker to finish the scoring\n{second.log()}",
        )
    finally:
        second.stop()
    scoring.refresh_from_db()
    assert scoring.status == ScoringStatus.DONE, scoring.error
    assert scoring.done == scoring.total == 200_000
    assert scoring.candidates.count() == 1000
    assert "lost its worker: sending it again" in second.log()
    assert list(Candidate.objects.filter(run=run).values_list("index", "val_score")) == before
