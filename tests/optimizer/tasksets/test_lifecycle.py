"""Task sets as first-class objects: export (round-trips), duplicate, delete."""

import json
from pathlib import Path

import pytest

from optimizer.models import RunStatus
from optimizer.tasksets.models import Task, TaskSet
from optimizer.tasksets.services import taskset_import
from tests.factories import recorded_run

pytestmark = pytest.mark.django_db

DATASETS = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"
FIELDS = ("task_id", "position", "input", "expected", "params", "metadata", "verifier", "split")


def snapshot(task_set):
    return list(task_set.tasks.order_by("position").values_list(*FIELDS))


def test_an_exported_set_imports_back_into_an_identical_set(user, user_client):
    original, _ = taskset_import(
        owner=user,
        name="Mixed",
        filename="seed001.yaml",
        content=(DATASETS / "seed001.yaml").read_bytes(),
    )
    taskset_import(
        owner=user,
        name="Mixed",
        filename="array.json",
        content=(DATASETS / "array.json").read_bytes(),
    )
    Task.objects.filter(task_id="geo-1").update(
        expected={"city": "Paris", "score": 1.5}, params={"ignore_case": True}
    )
    response = user_client.get(f"/api/tasksets/{original.pk}/export.jsonl")
    exported = b"".join(response.streaming_content)
    assert response["Content-Type"] == "application/x-ndjson" and len(exported.splitlines()) == 6
    copy, counts = taskset_import(
        owner=user, name="Round trip", filename="export.jsonl", content=exported
    )
    assert counts["created"] == 6
    assert snapshot(copy) == snapshot(original)
    page = b"".join(user_client.get(f"/tasksets/{original.pk}/export.jsonl").streaming_content)
    assert page == exported


def test_a_shared_set_can_be_duplicated_into_a_private_copy_of_ones_own(user, other_client):
    original, _ = taskset_import(
        owner=user,
        name="Geo",
        filename="array.json",
        content=(DATASETS / "array.json").read_bytes(),
        shared=True,
    )
    first = other_client.post(
        f"/api/tasksets/{original.pk}/duplicate", json.dumps({}), content_type="application/json"
    )
    assert (
        first.status_code == 201
        and first.json()["name"] == "Geo (copy)"
        and first.json()["task_count"] == 3
    )
    second = other_client.post(f"/tasksets/{original.pk}/duplicate/", follow=True)
    assert "Duplicated Geo as Geo (copy 2)." in second.content.decode()
    copy = TaskSet.objects.get(name="Geo (copy)")
    assert copy.owner.username != user.username and not copy.shared
    assert [row[:1] + row[2:] for row in snapshot(copy)] == [
        row[:1] + row[2:] for row in snapshot(original)
    ]


def test_deleting_a_set_is_refused_while_an_active_run_uses_it_and_finished_runs_still_render(
    user, user_client, other_client
):
    run = recorded_run(owner=user, status=RunStatus.RUNNING)
    task_set = run.task_set
    refused = user_client.delete(f"/api/tasksets/{task_set.pk}")
    assert (
        refused.status_code == 409
        and f"used by active run #{run.pk}; stop it first" in refused.json()["detail"]
    )
    page = user_client.post(f"/tasksets/{task_set.pk}/delete/", follow=True).content.decode()
    assert f"Not deleted: task set: used by active run #{run.pk}" in page
    assert TaskSet.objects.filter(pk=task_set.pk).exists()

    run.status = RunStatus.COMPLETED
    run.save()
    assert other_client.delete(f"/api/tasksets/{task_set.pk}").status_code == 404  # not theirs
    assert user_client.delete(f"/api/tasksets/{task_set.pk}").status_code == 204
    assert (
        not TaskSet.objects.filter(pk=task_set.pk).exists()
        and not Task.objects.filter(task_set_id=task_set.pk).exists()
    )
    run.refresh_from_db()
    assert run.task_set is None and len(run.tasks_snapshot) == 5
    assert user_client.get(f"/runs/{run.pk}/").status_code == 200
