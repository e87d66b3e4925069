import json

import pytest

from optimizer.tasksets.files import FieldMapping
from optimizer.tasksets.models import Task, TaskSet
from optimizer.tasksets.services import taskset_assign_split, taskset_import, taskset_split
from verifiers_app.engine import SpecError

pytestmark = pytest.mark.django_db


def jsonl(*rows):
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows)


ROWS = [
    {"task_id": f"t{i}", "input": f"Question {i}?", "split": "val" if i % 2 else "train"}
    for i in range(1, 9)
]

YAML = """\
- task_id: q0
  instruction: "What is 2 + 2? Put the answer in <answer></answer>."
  verifier:
    kind: in_process
    fn_name: contains
    expected: "<answer>4</answer>"
    params: { ignore_case: true }
  split: val
- task_id: q1
  instruction: "Capital of France?"
  expected: "Paris"
  verifier: {kind: in_process, fn_name: exact_match, params: {ignore_case: true}}
"""


def test_it_imports_jsonl_rows_with_their_splits(user):
    task_set, counts = taskset_import(
        owner=user, name="Support", filename="tasks.jsonl", content=jsonl(*ROWS)
    )
    assert counts == {"created": 8, "updated": 0, "unchanged": 0}
    assert list(task_set.tasks.values_list("task_id", "split")[:2]) == [
        ("t1", "val"),
        ("t2", "train"),
    ]


def test_it_imports_yaml_rows_with_row_verifiers(user):
    task_set, _ = taskset_import(owner=user, name="QA", filename="qa.yaml", content=YAML)
    q0 = task_set.tasks.get(task_id="q0")
    assert q0.input.startswith("What is 2 + 2?")
    assert q0.verifier["fn_name"] == "contains"
    assert q0.split == "val"
    assert task_set.tasks.get(task_id="q1").expected == "Paris"


def test_it_imports_csv_with_a_column_mapping(user):
    csv_text = 'id,question,answer,topic\nc1,Who wrote Hamlet?,Shakespeare,books\nc2,"Largest planet, by mass?",Jupiter,space\n'
    mapping = FieldMapping(input="question", task_id="id", expected="answer")
    task_set, _ = taskset_import(
        owner=user, name="Quiz", filename="quiz.csv", content=csv_text, mapping=mapping
    )
    c2 = task_set.tasks.get(task_id="c2")
    assert (c2.input, c2.expected, c2.metadata) == (
        "Largest planet, by mass?",
        "Jupiter",
        {"topic": "space"},
    )


def test_bad_json_on_line_7_names_the_line_and_saves_nothing(user):
    lines = [json.dumps(r) for r in ROWS[:6]] + ['{"task_id": "t7", "input": "x",}']
    with pytest.raises(SpecError, match=r"^tasks.jsonl line 7: invalid JSON \("):
        taskset_import(owner=user, name="Support", filename="tasks.jsonl", content=jsonl(*lines))
    assert not TaskSet.objects.exists() and not Task.objects.exists()


def test_a_missing_field_names_the_line_and_the_field(user):
    content = jsonl(ROWS[0], {"task_id": "t2", "split": "train"})
    with pytest.raises(SpecError, match=r"tasks.jsonl line 2: input: is required"):
        taskset_import(owner=user, name="S", filename="tasks.jsonl", content=content)


def test_an_unknown_fn_name_lists_the_registered_fns(user):
    content = jsonl(
        ROWS[0],
        ROWS[1],
        {"task_id": "t3", "input": "x", "verifier": {"kind": "in_process", "fn_name": "foo"}},
    )
    with pytest.raises(SpecError) as error:
        taskset_import(owner=user, name="S", filename="tasks.jsonl", content=content)
    assert error.value.problems[0].startswith(
        'tasks.jsonl line 3: verifier.fn_name: unknown fn "foo"'
    )
    assert "exact_match" in error.value.problems[0]
    assert not Task.objects.exists()


def test_wrong_types_are_reported_for_every_bad_row(user):
    content = jsonl(
        {"task_id": "a", "input": 42},
        {"task_id": "b", "input": "ok", "metadata": "urgent"},
        {"task_id": "c", "input": "ok", "split": "test"},
    )
    with pytest.raises(SpecError) as error:
        taskset_import(owner=user, name="S", filename="tasks.jsonl", content=content)
    assert error.value.problems == [
        "tasks.jsonl line 1: input: must be non-empty text",
        "tasks.jsonl line 2: metadata: must be an object, got str",
        "tasks.jsonl line 3: split: must be one of train, val, holdout, got 'test'",
    ]


def test_a_bad_expectation_in_yaml_names_its_line_and_path(user):
    content = "- task_id: a\n  input: hi\n- task_id: b\n  input: hi\n  metadata:\n    expectations:\n      mustMention: [{anyOf: []}]\n"
    with pytest.raises(
        SpecError, match=r"qa.yaml line 3: metadata\.expectations\.mustMention\[0\]\.anyOf"
    ):
        taskset_import(owner=user, name="S", filename="qa.yaml", content=content)


def test_values_the_database_cannot_store_name_their_line_and_field_and_save_nothing(user):
    content = (
        "- {task_id: a, input: hi, expected: 2024-05-01}\n"
        "- {task_id: b, input: hi, metadata: {blob: !!binary aGk=}}\n"
        "- {task_id: c, input: hi, params: {temperature: .nan}}\n"
        '- {task_id: d, input: "nul \\0 here"}\n'
    )
    with pytest.raises(SpecError) as error:
        taskset_import(owner=user, name="S", filename="odd.yaml", content=content)
    assert error.value.problems == [
        "odd.yaml line 1: expected: a date value is not JSON; quote it as text",
        "odd.yaml line 2: metadata.blob: a bytes value is not JSON; quote it as text",
        "odd.yaml line 3: params.temperature: nan is not a JSON number; use a finite number",
        "odd.yaml line 4: input: contains a NUL character (U+0000), which cannot be stored",
    ]
    with pytest.raises(SpecError, match=r"^tasks.jsonl line 2: expected: nan is not a JSON number"):
        taskset_import(
            owner=user,
            name="S",
            filename="tasks.jsonl",
            content=jsonl(ROWS[0], '{"task_id": "x", "input": "hi", "expected": NaN}'),
        )
    assert not TaskSet.objects.exists() and not Task.objects.exists()


def test_json_nested_too_deeply_names_its_line(user):
    content = jsonl(ROWS[0], "[" * 100_000 + "]" * 100_000)
    with pytest.raises(
        SpecError, match=r"^tasks.jsonl line 2: invalid JSON \(nested more than 100 levels deep\)$"
    ):
        taskset_import(owner=user, name="S", filename="tasks.jsonl", content=content)
    assert not Task.objects.exists()


def test_yaml_aliases_that_multiply_into_a_huge_document_are_refused_quickly(user):
    lines = [
        "- task_id: a",
        "  input: x",
        "  metadata:",
        '    l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
    ]
    lines += [
        f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)
    ]  # 10^9 values in 500 bytes
    with pytest.raises(
        SpecError, match=r"^bomb.yaml line 10: YAML aliases expand to more than 2,000,000 values"
    ):
        taskset_import(owner=user, name="S", filename="bomb.yaml", content="\n".join(lines))
    assert not TaskSet.objects.exists()


def test_a_yaml_row_that_contains_itself_is_refused_naming_its_line(user):
    content = "- task_id: a\n  input: x\n- task_id: b\n  input: y\n  metadata: &m\n    self: *m\n"
    with pytest.raises(
        SpecError, match=r"^loop.yaml line 5: a YAML alias refers to a value that contains it"
    ):
        taskset_import(owner=user, name="S", filename="loop.yaml", content=content)


def test_yaml_aliases_that_only_share_a_value_still_import(user):
    content = "- {task_id: a, input: x, params: &p {ignore_case: true}}\n- {task_id: b, input: y, params: *p}\n"
    task_set, counts = taskset_import(owner=user, name="S", filename="shared.yaml", content=content)
    assert counts["created"] == 2
    assert [t.params for t in task_set.tasks.order_by("task_id")] == [{"ignore_case": True}] * 2


def test_yaml_nested_too_deeply_is_a_clear_error(user):
    with pytest.raises(SpecError, match=r"^deep.yaml: invalid YAML \(nested too deeply\)$"):
        taskset_import(
            owner=user, name="S", filename="deep.yaml", content="- " + "[" * 50_000 + "]" * 50_000
        )


def test_a_failed_reimport_leaves_the_existing_set_untouched(user):
    taskset_import(owner=user, name="S", filename="tasks.jsonl", content=jsonl(*ROWS))
    changed = [{**ROWS[0], "input": "changed"}, {"task_id": "bad", "input": ""}]
    with pytest.raises(SpecError):
        taskset_import(owner=user, name="S", filename="tasks.jsonl", content=jsonl(*changed))
    assert Task.objects.get(task_id="t1").input == "Question 1?"


def test_importing_the_same_file_twice_changes_nothing(user):
    taskset_import(owner=user, name="S", filename="tasks.jsonl", content=jsonl(*ROWS))
    _, counts = taskset_import(owner=user, name="S", filename="tasks.jsonl", content=jsonl(*ROWS))
    assert counts == {"created": 0, "updated": 0, "unchanged": 8}


def test_duplicate_task_ids_are_refused(user):
    with pytest.raises(SpecError, match=r"line 2: task_id: duplicate id 't1' \(first on line 1\)"):
        taskset_import(
            owner=user, name="S", filename="tasks.jsonl", content=jsonl(ROWS[0], ROWS[0])
        )


def test_a_seeded_random_split_is_repeatable_and_follows_the_ratios(user):
    task_set, _ = taskset_import(owner=user, name="S", filename="tasks.jsonl", content=jsonl(*ROWS))
    counts = taskset_split(
        task_set=task_set, ratios={"train": 0.5, "val": 0.25, "holdout": 0.25}, seed=7
    )
    first = dict(task_set.tasks.values_list("task_id", "split"))
    taskset_split(task_set=task_set, ratios={"train": 0.5, "val": 0.25, "holdout": 0.25}, seed=7)
    assert counts == {"train": 4, "val": 2, "holdout": 2}
    assert dict(task_set.tasks.values_list("task_id", "split")) == first


def test_splits_can_be_assigned_by_hand(user):
    task_set, _ = taskset_import(owner=user, name="S", filename="tasks.jsonl", content=jsonl(*ROWS))
    assert taskset_assign_split(task_set=task_set, task_ids=["t1", "t2"], split="holdout") == 2
    assert set(task_set.tasks.filter(split="holdout").values_list("task_id", flat=True)) == {
        "t1",
        "t2",
    }
