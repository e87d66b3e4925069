import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from optimizer.models import TaskSet

pytestmark = pytest.mark.django_db


def run(*args):
    out = StringIO()
    call_command("tasks", "import", *args, stdout=out)
    return out.getvalue().strip()


def test_it_imports_a_file_into_a_named_set_owned_by_the_first_superuser(admin_user, tmp_path):
    path = tmp_path / "tickets.jsonl"
    path.write_text("\n".join(json.dumps({"task_id": f"t{i}", "input": f"ticket {i}"}) for i in range(3)))
    output = run(str(path), "--set", "Tickets")
    task_set = TaskSet.objects.get()
    assert output == f"Imported tickets.jsonl into task set 'Tickets' (id {task_set.pk}): 3 created, 0 updated, 0 unchanged"
    assert task_set.owner == admin_user
    assert run(str(path), "--set", "Tickets").endswith("0 created, 0 updated, 3 unchanged")


def test_a_bad_file_exits_2_listing_line_and_field_and_imports_nothing(admin_user, tmp_path):
    path = tmp_path / "qa.yaml"
    path.write_text("- task_id: a\n  input: hi\n- task_id: b\n  input: hi\n  verifier: {kind: in_process, fn_name: foo}\n")
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
