import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from optimizer.tasksets.models import TaskSet

pytestmark = pytest.mark.django_db


def run(*args):
    out = StringIO()
    call_command("tasks", "import", *args, stdout=out)
    return out.getvalue().strip()


def test_it_imports_a_file_into_a_named_set_owned_by_the_first_superuser(admin_user, tmp_path):
    path = tmp_path / "tickets.jsonl"
    path.write_text(
        "\n".join(json.dumps({"task_id": f"t{i}", "input": f"ticket {i}"}) for i in range(3))
    )
    output = run(str(path), "--set", "Tickets")
    task_set = TaskSet.objects.get()
    assert (
        output
        == f"Imported tickets.jsonl into task set 'Tickets' (id {task_set.pk}): 3 created, 0 updated, 0 unchanged; "
        "3 rows without a split dealt by the rule: 60/40/0 below 10 rows, seed 0 (2 train, 1 val)"
    )
    assert task_set.owner == admin_user
    assert run(str(path), "--set", "Tickets").endswith(
        "0 created, 0 updated, 3 unchanged; no row to deal: each names its split or keeps the one it has"
    )


def test_a_bad_file_exits_2_listing_line_and_field_and_imports_nothing(admin_user, tmp_path):
    path = tmp_path / "qa.yaml"
    path.write_text(
        "- task_id: a\n  input: hi\n- task_id: b\n  input: hi\n  verifier: {kind: in_process, fn_name: foo}\n"
    )
    with pytest.raises(CommandError) as error:
        run(str(path), "--set", "QA")
    assert error.value.returncode == 2
    assert 'qa.yaml line 3: verifier.fn_name: unknown fn "foo"' in str(error.value)
    assert not TaskSet.objects.exists()


def test_csv_columns_are_mapped_from_options(admin_user, tmp_path):
    path = tmp_path / "quiz.csv"
    path.write_text("q,a,level\nWhat is 7 x 6?,42,easy\n")
    run(str(path), "--set", "Quiz", "--input-column", "q", "--expected-field", "a")
    task = TaskSet.objects.get().tasks.get()
    assert (task.input, task.expected, task.metadata) == ("What is 7 x 6?", "42", {"level": "easy"})


DATASETS = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"


def test_dry_run_prints_the_preview_report_and_writes_nothing(admin_user):
    out = StringIO()
    call_command(
        "tasks",
        "import",
        str(DATASETS / "rows-object.json"),
        "--set",
        "Haiku",
        "--dry-run",
        stdout=out,
        stderr=StringIO(),
    )
    report = json.loads(out.getvalue())
    assert (report["ok"], report["format"], report["rows_total"], report["created"]) == (
        True,
        "json",
        3,
        3,
    )
    assert report["split_counts"] == {"train": 2, "val": 1, "holdout": 0}
    assert report["mapping"] == {
        "expected": ["completion"],
        "input": ["prompt"],
        "split": ["split"],
    }
    assert not TaskSet.objects.exists()


@pytest.mark.parametrize(
    ("name", "line"),
    [
        (
            "broken-unterminated-quote.csv",
            "broken-unterminated-quote.csv line 3: unterminated quote",
        ),
        ("broken-latin1.csv", "broken-latin1.csv line 3: not UTF-8 text"),
    ],
)
def test_a_broken_fixture_exits_2_naming_its_line_with_or_without_dry_run(admin_user, name, line):
    for extra in ((), ("--dry-run",)):
        with pytest.raises(CommandError) as error:
            call_command(
                "tasks", "import", str(DATASETS / name), "--set", "X", *extra, stdout=StringIO()
            )
        assert error.value.returncode == 2 and line in str(error.value)
    assert not TaskSet.objects.exists()


def test_export_then_import_gives_the_same_tasks_and_split_reseeds(admin_user, tmp_path):
    run(
        str(DATASETS / "alpaca.jsonl"),
        "--set",
        "Alpaca",
        "--split-ratios",
        "train=0.5,val=0.5",
        "--split-seed",
        "4",
    )
    out = tmp_path / "alpaca-export.jsonl"
    call_command("tasks", "export", "Alpaca", "--out", str(out), stderr=StringIO())
    run(str(out), "--set", "Copy")
    fields = ("task_id", "input", "expected", "metadata", "split")
    original, copy = (
        list(TaskSet.objects.get(name=n).tasks.values_list(*fields)) for n in ("Alpaca", "Copy")
    )
    assert original == copy and len(copy) == 4
    said = StringIO()
    call_command("tasks", "split", "Copy", "--split-ratios", "train=0.75,val=0.25", stdout=said)
    assert (
        said.getvalue().strip()
        == "Split 'Copy' as asked: train 0.75, val 0.25, seed 0: 3 train, 1 val"
    )


def test_an_import_of_ten_rows_says_it_dealt_a_fifth_to_holdout_by_the_rule(admin_user, tmp_path):
    path = tmp_path / "ten.jsonl"
    path.write_text("".join(json.dumps({"input": f"Ticket {i}"}) + "\n" for i in range(10)))
    said = run(str(path), "--set", "Ten")
    assert said.endswith(
        "10 rows without a split dealt by the rule: 50/30/20 from 10 rows, seed 0 "
        "(5 train, 3 val, 2 holdout)"
    )
    assert TaskSet.objects.get(name="Ten").tasks.filter(split="holdout").count() == 2


def test_a_dry_run_states_the_rule_and_split_ratios_given_on_the_command_line_win(
    admin_user, tmp_path
):
    path = tmp_path / "ten.jsonl"
    path.write_text("".join(json.dumps({"input": f"Ticket {i}"}) + "\n" for i in range(10)))
    out, err = StringIO(), StringIO()
    call_command("tasks", "import", str(path), "--set", "T", "--dry-run", stdout=out, stderr=err)
    report = json.loads(out.getvalue())
    assert report["default_split"]["by_rule"] is True
    assert report["split_counts"] == {"train": 5, "val": 3, "holdout": 2}
    assert "dealt by the rule: 50/30/20 from 10 rows, seed 0" in err.getvalue()
    out = StringIO()
    call_command(
        "tasks",
        "import",
        str(path),
        "--set",
        "T",
        "--dry-run",
        "--split-ratios",
        "train=0.7,val=0.3",
        stdout=out,
        stderr=StringIO(),
    )
    report = json.loads(out.getvalue())
    assert report["split_counts"] == {"train": 7, "val": 3, "holdout": 0}
    assert report["default_split"]["rule"] == (
        "10 rows without a split dealt as asked: train 0.7, val 0.3, seed 0 (7 train, 3 val)"
    )
