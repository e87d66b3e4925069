"""The score chart's numbers of each rejected proposal are stored in a narrow
row (RejectedProposal) when the proposal event is written, by every writer of
events (the live publisher, the import), and filled in by a migration for the
runs recorded before; the run page reads them instead of the payloads."""

from __future__ import annotations

import json

import pytest

from dashboard import selectors
from optimizer.export import run_export, run_import
from optimizer.models import RejectedProposal, RunStatus, rejected_mark_fields
from optimizer.runs import event_types as ev
from optimizer.runs.events import publish_run_event, publish_run_events
from tests.factories import recorded_run
from tests.migrating import migrate, migrate_to_latest

MARK = ("metric_calls", "parent", "before", "after", "minibatch_size")


def proposal(accepted: bool, **fields) -> dict:
    return {
        "iteration": 5,
        "parent": 2,
        "components": ["p"],
        "accepted": accepted,
        "candidate": None if not accepted else 3,
        "before": 2.0,
        "after": 1.5,
        "minibatch": ["t000", "t001", "t002"],
        "texts": {"p": "rewrite " * 300},
        "reasoning": "why " * 300,
        "metric_calls": 77,
        **fields,
    }


def marks(run, model=RejectedProposal) -> list[tuple]:
    return list(model.objects.filter(run_id=run.pk).order_by("seq").values_list("seq", *MARK))


@pytest.mark.django_db
def test_a_rejected_proposal_is_stored_with_the_numbers_the_score_chart_draws_when_it_is_published(
    user,
):
    run = recorded_run(owner=user, candidates=2, val_tasks=2, status=RunStatus.RUNNING)
    before = marks(run)
    rejected = publish_run_event(run.pk, ev.PROPOSAL, proposal(False))
    publish_run_events(
        run.pk,
        [
            (ev.PROPOSAL, proposal(True, candidate=2)),
            (ev.ERROR, {"where": "reflection", "message": "x", "iteration": 5}),
        ],
    )

    assert marks(run) == [*before, (rejected.seq, 77, 2, 2.0, 1.5, 3)]


def test_numbers_an_external_client_got_wrong_are_stored_as_none_not_an_error():
    fields = rejected_mark_fields(
        ev.PROPOSAL,
        proposal(
            False, metric_calls="12", parent=True, before="n/a", after=2**80, minibatch="t000"
        ),
    )
    assert fields == {
        "metric_calls": 12,
        "parent": None,
        "before": None,
        "after": float(2**80),
        "minibatch_size": 0,
    }
    assert (
        rejected_mark_fields(ev.PROPOSAL, proposal(False, metric_calls=2**40))["metric_calls"]
        is None
    )
    assert rejected_mark_fields(ev.PROPOSAL, proposal(True)) is None
    assert (
        rejected_mark_fields(ev.PROPOSAL, proposal(0)) is None
    )  # only a JSON false is a rejection, as the page always read it
    assert rejected_mark_fields(ev.TRIALS, proposal(False)) is None


@pytest.mark.django_db
def test_an_imported_run_keeps_the_marks_of_its_rejected_proposals(user, other_user):
    run = recorded_run(owner=user, candidates=6, val_tasks=3)
    assert marks(run)  # the factory's run has rejected proposals

    imported = run_import(owner=other_user, data=json.loads(json.dumps(run_export(run))))

    assert marks(imported) == marks(run)
    assert selectors.run_snapshot(imported)["rejected"] == selectors.run_snapshot(run)["rejected"]


BEFORE = [("optimizer", "0010_i16n_run_progress")]
AFTER = [("optimizer", "0011_i16s_rejected_proposal")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_stores_the_marks_of_the_runs_recorded_before_and_the_page_draws_the_same():
    apps = migrate(BEFORE)
    try:
        owner = apps.get_model("auth", "User").objects.create(username="old")
        run = apps.get_model("optimizer", "Run").objects.create(owner_id=owner.pk, name="old run")
        payloads = [
            proposal(False, metric_calls=10, after=1.0),
            proposal(True, metric_calls=20),
            proposal(False, metric_calls=30, parent=None, minibatch=["t000"]),
            {"where": "x", "message": "y"},
        ]
        types = [ev.PROPOSAL, ev.PROPOSAL, ev.PROPOSAL, ev.ERROR]
        RunEvent = apps.get_model("optimizer", "RunEvent")
        RunEvent.objects.bulk_create(
            [
                RunEvent(run_id=run.pk, seq=seq, type=t, payload=p)
                for seq, (t, p) in enumerate(zip(types, payloads, strict=True), start=1)
            ]
        )
        apps.get_model("optimizer", "RunProgress").objects.create(run_id=run.pk, last_seq=4)

        apps = migrate(AFTER)
        stored = marks(run, apps.get_model("optimizer", "RejectedProposal"))
        assert stored == [(1, 10, 2, 2.0, 1.0, 3), (3, 30, None, 2.0, 1.5, 1)]
    finally:
        migrate_to_latest()
    from optimizer.models import Run

    assert selectors.run_snapshot(Run.objects.get(pk=run.pk))["rejected"] == {
        "metric_calls": [10, 30],
        "parent": [2, None],
        "before": [2.0, 2.0],
        "after": [1.0, 1.5],
        "minibatch_size": [3, 1],
    }
