"""Races that only a database with concurrent writers shows (SQLite serialises
them): several users importing into one task set, or creating one verifier id,
at the same moment."""

import threading

import pytest
from django.db import connection

from optimizer.tasksets.models import Task
from optimizer.tasksets.services import taskset_import
from tests.optimizer.tasksets.test_import import ROWS, jsonl
from tests.verifiers.test_services import SPEC
from verifiers_app.engine import SpecError
from verifiers_app.models import Verifier
from verifiers_app.services import verifier_create


def at_once(action, threads: int = 4) -> list[str]:
    """Run `action` in `threads` threads released together; what each one ended
    with: "ok", a SpecError's message, or the repr of any other exception."""
    outcomes, barrier = [], threading.Barrier(threads)

    def attempt():
        try:
            barrier.wait()
            action()
            outcomes.append("ok")
        except SpecError as exc:
            outcomes.append(str(exc))
        except Exception as exc:
            outcomes.append(repr(exc))
        finally:
            connection.close()

    workers = [threading.Thread(target=attempt) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return outcomes


@pytest.mark.django_db(transaction=True)
def test_simultaneous_imports_into_one_set_neither_fail_nor_duplicate(user):
    taskset_import(owner=user, name="S", filename="tasks.jsonl", content=jsonl(ROWS[0]))
    content = jsonl(*[{"task_id": f"new{i}", "input": "x"} for i in range(300)])
    outcomes = at_once(
        lambda: taskset_import(owner=user, name="S", filename="tasks.jsonl", content=content)
    )
    assert outcomes == ["ok"] * 4
    assert Task.objects.count() == 301


@pytest.mark.django_db(transaction=True)
def test_simultaneous_creates_of_one_id_make_one_verifier_and_clear_errors(user):
    outcomes = at_once(lambda: verifier_create(owner=user, spec=SPEC))
    assert sorted(outcomes) == [
        f'id: a verifier with id "{SPEC["id"]}" already exists; edit it or choose another id'
    ] * 3 + ["ok"]
    assert Verifier.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_batch_resent_while_the_first_copy_is_being_applied_is_applied_once(user):
    # The tracker resends a batch whose answer timed out, possibly while the
    # server still applies the first copy: the run row's lock makes one win.
    from optimizer.external.services import external_events_apply, external_run_open
    from optimizer.models import Candidate, RunEvent

    run, _ = external_run_open(owner=user, data={"key": "race-run-0001"})
    batch = {
        "seq": 1,
        "events": [
            {
                "type": "candidate",
                "index": 0,
                "origin": "seed",
                "components": {"p": "x"},
                "val_score": 0.5,
                "tasks": [{"task_key": f"t{i}", "score": 0.5} for i in range(50)],
            },
            {"type": "budget", "used": 50, "total": 500},
        ],
    }
    answers = []
    outcomes = at_once(lambda: answers.append(external_events_apply(run=run, data=batch)))
    assert outcomes == ["ok"] * 4
    assert sorted(a["duplicate"] for a in answers) == [False, True, True, True]
    assert Candidate.objects.filter(run=run).count() == 1
    assert RunEvent.objects.filter(run=run, type="run.budget").count() == 1
