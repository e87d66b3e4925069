"""Task sets moved from the optimizer app to their own (optimizer/tasksets): a
database made before the move keeps every task set, task and the runs' and
evaluations' links to them, through the migration and back, with no change to
the tables."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType

from optimizer.models import Evaluation, Run
from optimizer.tasksets.models import Task, TaskSet
from tests.migrating import migrate, migrate_to_latest

BEFORE = [("optimizer", "0012_i16s_run_event_type_index"), ("tasksets", None)]
AFTER = [("optimizer", "0013_task_sets_move_to_their_own_app")]

pytestmark = pytest.mark.django_db(transaction=True)


def test_task_sets_made_before_the_move_keep_their_tasks_and_links_both_ways():
    apps = migrate(BEFORE)
    try:
        owner = apps.get_model("auth", "User").objects.create(username="old")
        task_set = apps.get_model("optimizer", "TaskSet").objects.create(
            owner_id=owner.pk, name="support", shared=True
        )
        task = apps.get_model("optimizer", "Task").objects.create(
            task_set_id=task_set.pk,
            task_id="t1",
            input="Where is my order?",
            expected={"a": 1},
            split="val",
            metadata={"expectations": {"mustMention": [{"text": "tracking"}]}},
        )
        run = apps.get_model("optimizer", "Run").objects.create(
            owner_id=owner.pk, task_set_id=task_set.pk, name="old run"
        )
        candidate = apps.get_model("optimizer", "Candidate").objects.create(
            run_id=run.pk, index=0, components={"i": "x"}
        )
        evaluation = apps.get_model("optimizer", "Evaluation").objects.create(
            candidate_id=candidate.pk,
            task_id=task.pk,
            task_key="t1",
            split="val",
            output="o",
            score=0.5,
            verdict="fail",
        )
        old_type = ContentType.objects.get_or_create(app_label="optimizer", model="taskset")[0]

        migrate(AFTER)
        migrate_to_latest()
        moved = TaskSet.objects.get(pk=task_set.pk)
        assert (moved.name, moved.shared, moved.owner.username) == ("support", True, "old")
        assert list(moved.tasks.values_list("task_id", "input", "expected", "split")) == [
            ("t1", "Where is my order?", {"a": 1}, "val")
        ]
        assert Run.objects.get(pk=run.pk).task_set == moved
        assert Evaluation.objects.get(pk=evaluation.pk).task == Task.objects.get(pk=task.pk)
        ContentType.objects.clear_cache()
        assert (
            ContentType.objects.get(pk=old_type.pk).model_class() is TaskSet
        )  # permissions and admin history kept

        apps = migrate(BEFORE)
        back = apps.get_model("optimizer", "TaskSet").objects.get(pk=task_set.pk)
        assert (
            back.name == "support"
            and apps.get_model("optimizer", "Task").objects.filter(task_set_id=back.pk).count() == 1
        )
        assert ContentType.objects.get(pk=old_type.pk).app_label == "optimizer"
    finally:
        migrate_to_latest()
