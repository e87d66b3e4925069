"""Races that only a database with concurrent writers shows (SQLite serialises
them): several users importing into one task set, or creating one verifier id,
at the same moment."""

import threading

import pytest
from django.db import connection

from optimizer.models import Task
from optimizer.taskset_services import taskset_import
from tests.optimizer.test_taskset_import import ROWS, jsonl
from tests.verifiers.test_services import SPEC
from verifiers_app.engine import SpecError
from verifiers_app.models import Verifier
from verifiers_app.services import verifier_create


@pytest.mark.django_db(transaction=True)
def test_simultaneous_imports_into_one_set_neither_fail_nor_duplicate(user):
    taskset_import(owner=user, name="S", filename="tasks.jsonl", content=jsonl(ROWS[0]))
    content = jsonl(*[{"task_id": f"new{i}", "input": "x"} for i in range(300)])
    errors, barrier = [], threading.Barrier(4)

    def import_it():
        try:
            barrier.wait()
            taskset_import(owner=user, name="S", filename="tasks.jsonl", content=content)
        except Exception as exc:  # noqa: BLE001 - the test reports whatever went wrong
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=import_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert Task.objects.count() == 301


@pytest.mark.django_db(transaction=True)
def test_simultaneous_creates_of_one_id_make_one_verifier_and_clear_errors(user):
    outcomes, barrier = [], threading.Barrier(4)

    def create_it():
        try:
            barrier.wait()
            verifier_create(owner=user, spec=SPEC)
            outcomes.append("created")
        except Exception as exc:  # noqa: BLE001 - the test reports whatever went wrong
            outcomes.append(str(exc) if isinstance(exc, SpecError) else repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=create_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["created"] + [f'id: a verifier with id "{SPEC["id"]}" already exists; edit it or choose another id'] * 3
    assert Verifier.objects.count() == 1
