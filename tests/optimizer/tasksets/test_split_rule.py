"""The default split of rows that name none: 50/30/20 (train/val/holdout) from
HOLDOUT_MIN_ROWS rows to deal, 60/40/0 below, seeded; ratios a user gives win."""

import json

import pytest

from optimizer.examples import EXAMPLES_DIR, TASK_SETS, load_examples
from optimizer.tasksets.files import HOLDOUT_MIN_ROWS, DefaultSplit, parse_task_file
from optimizer.tasksets.models import TaskSet
from optimizer.tasksets.services import taskset_import, taskset_import_preview

pytestmark = pytest.mark.django_db


def unsplit(n):
    return "".join(
        json.dumps({"task_id": f"t{i:02}", "input": f"Ticket {i}"}) + "\n" for i in range(n)
    )


def dealt(user, n, **options):
    task_set, counts = taskset_import(
        owner=user, name=f"S{n}", filename="t.jsonl", content=unsplit(n), **options
    )
    splits = list(task_set.tasks.order_by("task_id").values_list("split", flat=True))
    return {s: splits.count(s) for s in ("train", "val", "holdout")}, counts


def test_nine_rows_are_dealt_60_40_and_ten_rows_keep_a_fifth_held_out(user):
    assert HOLDOUT_MIN_ROWS == 10
    nine, counts = dealt(user, 9)
    assert nine == {"train": 5, "val": 4, "holdout": 0}
    assert counts.split_rule == (
        "9 rows without a split dealt by the rule: 60/40/0 below 10 rows, seed 0 (5 train, 4 val)"
    )
    ten, counts = dealt(user, 10)
    assert ten == {"train": 5, "val": 3, "holdout": 2}
    assert counts.split_rule == (
        "10 rows without a split dealt by the rule: 50/30/20 from 10 rows, seed 0 "
        "(5 train, 3 val, 2 holdout)"
    )


def test_ratios_the_user_gives_win_over_the_rule(user):
    counts, result = dealt(user, 20, default_split=DefaultSplit(ratios={"train": 0.6, "val": 0.4}))
    assert counts == {"train": 12, "val": 8, "holdout": 0}
    assert "dealt as asked: train 0.6, val 0.4, seed 0" in result.split_rule


def test_the_rule_deals_the_same_rows_the_same_way_for_the_same_seed_and_otherwise_for_another():
    def deal(seed):
        rows = parse_task_file("t.jsonl", unsplit(30), default_split=DefaultSplit(seed=seed))
        return [row["split"] for row in rows]

    assert deal(4) == deal(4)
    assert deal(4) != deal(5)
    assert deal(4).count("holdout") == deal(5).count("holdout") == 6


def test_only_the_new_rows_without_a_split_are_counted_against_the_threshold(user):
    """A re-import adding 4 rows to a set of 10 deals those 4 by the small-set branch:
    the existing rows keep their splits."""
    taskset_import(owner=user, name="S", filename="t.jsonl", content=unsplit(10))
    preview = taskset_import_preview(owner=user, name="S", filename="t.jsonl", content=unsplit(14))
    assert preview.dealt_rows == 4 and "60/40/0 below 10 rows" in preview.split_rule
    assert preview.split_counts["holdout"] == 2


@pytest.mark.parametrize("name", TASK_SETS)
def test_the_example_task_sets_come_with_a_holdout_split(admin_user, name):
    load_examples(user=admin_user)
    assert TaskSet.objects.get(name=name).tasks.filter(split="holdout").count() >= 2


@pytest.mark.parametrize("relative", TASK_SETS.values())
def test_an_example_task_set_stripped_of_its_splits_gets_a_holdout_split_on_import(user, relative):
    """As a newcomer's own file of the same size would: 20 rows, no split field."""
    path = EXAMPLES_DIR / relative
    rows = parse_task_file(path.name, path.read_bytes())
    content = "".join(
        json.dumps({k: v for k, v in row.items() if k != "split"}) + "\n" for row in rows
    )
    task_set, counts = taskset_import(
        owner=user, name="Mine", filename="mine.jsonl", content=content
    )
    splits = list(task_set.tasks.values_list("split", flat=True))
    assert (splits.count("train"), splits.count("val"), splits.count("holdout")) == (10, 6, 4)
    assert "dealt by the rule: 50/30/20 from 10 rows" in counts.split_rule
