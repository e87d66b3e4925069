"""Files people already have (tests/fixtures/datasets/): every format, the field
mapper, the seeded default split and the strict refusals, through the service
the browser, the API and the CLI share."""

from pathlib import Path

import pytest

from optimizer.tasksets.files import DefaultSplit, FieldMapping, deal_splits
from optimizer.tasksets.models import Task, TaskSet
from optimizer.tasksets.services import taskset_import, taskset_import_preview
from verifiers_app.engine import SpecError, score

pytestmark = pytest.mark.django_db

DATASETS = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"


def load(user, name, **options):
    path = DATASETS / name
    with path.open("rb") as handle:
        task_set, counts = taskset_import(
            owner=user, name=name, filename=name, content=handle, **options
        )
    return {t.task_id: t for t in task_set.tasks.all()}, counts


def test_alpaca_rows_put_the_instruction_first_then_a_blank_line_then_the_input(user):
    tasks, counts = load(user, "alpaca.jsonl")
    assert counts["created"] == 4
    assert (
        tasks["task-1"].input == "Give three tips for staying healthy."
    )  # an empty input is left out
    assert tasks["task-2"].input == "Translate the sentence into French.\n\nWhere is the station?"
    assert tasks["task-2"].expected == "Où est la gare ?"
    assert tasks["task-2"].metadata == {}


def test_a_json_array_maps_id_question_and_answer_and_keeps_other_fields_in_metadata(user):
    tasks, _ = load(user, "array.json")
    geo2 = tasks["geo-2"]
    assert (geo2.input, geo2.expected, geo2.metadata) == (
        "What is the capital of Australia?",
        "Canberra",
        {"difficulty": "medium"},
    )


def test_a_json_object_with_its_rows_under_examples_maps_prompt_and_completion(user):
    tasks, _ = load(user, "rows-object.json")
    assert next((t.input, t.expected) for t in tasks.values()) == (
        "Write a haiku about rain.",
        "Soft rain on the roof",
    )
    assert tasks["task-3"].metadata == {"source": "poetry-set"}
    assert (tasks["task-1"].split, tasks["task-2"].split) == ("train", "val")


def test_seed_001_yaml_rows_with_plain_phrase_expectations_import_and_score(user):
    tasks, _ = load(user, "seed001.yaml")
    row = tasks["refund-1"].as_row()
    assert row["metadata"]["expectations"]["mustMention"][0] == "refund"  # stored as written
    spec = {
        "id": "refund",
        "kind": "native",
        "checks": [{"id": "exp", "type": "task_expectations"}],
    }
    missed = score(spec, "Sorry, here is a gift card.", row)
    assert missed.feedback == (
        'refund/exp: output is missing an expected phrase (expected: "refund"); '
        'output contains a phrase it must not (found: "gift card")'
    )
    assert tasks["math-1"].verifier["fn_name"] == "contains"


def test_a_semicolon_csv_with_a_bom_and_a_tsv_are_read_with_their_delimiters(user):
    tasks, _ = load(user, "semicolon.csv")
    assert tasks["q1"].input == "Largest planet; by mass?"
    assert tasks["q3"].input == 'A "quoted" word?'
    assert next(iter(tasks)) == "q1"  # the BOM is not part of the first column name
    tsv, _ = load(user, "tasks.tsv")
    assert [(t.input, t.expected) for t in tsv.values()] == [
        ("Say hello", "hello"),
        ("Say goodbye", "goodbye"),
        ("Say thanks", "thanks"),
    ]


def test_each_mapped_field_can_be_overridden(user):
    content = '{"q": "Who?", "a": "Me", "question": "ignored", "key": "k1", "part": "val"}\n{"q": "Why?", "key": "k2"}\n'
    mapping = FieldMapping(input="q", expected="a", task_id="key", split="part")
    task_set, _ = taskset_import(
        owner=user, name="S", filename="x.jsonl", content=content, mapping=mapping
    )
    k1 = task_set.tasks.get(task_id="k1")
    assert (k1.input, k1.expected, k1.split, k1.metadata) == (
        "Who?",
        "Me",
        "val",
        {"question": "ignored"},
    )


def test_a_mapping_that_names_a_missing_csv_column_names_line_1_and_the_columns(user):
    with pytest.raises(
        SpecError,
        match=r"^semicolon.csv line 1: input: column 'prompt' not found \(columns: id, question, answer, split\)",
    ):
        load(user, "semicolon.csv", mapping=FieldMapping(input="prompt"))


@pytest.mark.parametrize(
    ("name", "problems"),
    [
        (
            "broken-unterminated-quote.csv",
            [
                "broken-unterminated-quote.csv line 3: unterminated quote: the quoted value that starts on this line never ends"
            ],
        ),
        (
            "broken-ragged.csv",
            [
                "broken-ragged.csv line 3: row: 4 values but the header has 3 columns (delimiter ','; a value holding it must be quoted)",
                "broken-ragged.csv line 4: row: 2 values but the header has 3 columns (delimiter ','; a value holding it must be quoted)",
            ],
        ),
        (
            "broken-latin1.csv",
            [
                "broken-latin1.csv line 3: not UTF-8 text (byte 7 of the line); save the file as UTF-8"
            ],
        ),
        (
            "broken-duplicate-ids.jsonl",
            ["broken-duplicate-ids.jsonl line 3: task_id: duplicate id 'd1' (first on line 1)"],
        ),
    ],
)
def test_a_broken_file_is_refused_naming_the_line_and_nothing_is_saved(user, name, problems):
    with pytest.raises(SpecError) as error:
        load(user, name)
    assert error.value.problems == problems
    assert not TaskSet.objects.exists() and not Task.objects.exists()


def test_rows_without_a_split_are_dealt_by_a_seeded_default_so_train_and_val_are_never_empty(user):
    tasks, _ = load(user, "alpaca.jsonl")
    assert sorted(t.split for t in tasks.values()) == ["train", "train", "val", "val"]
    two = '{"input": "a"}\n{"input": "b"}\n'
    task_set, _ = taskset_import(
        owner=user,
        name="Two",
        filename="two.jsonl",
        content=two,
        default_split=DefaultSplit(ratios={"train": 0.9, "val": 0.1}, seed=3),
    )
    assert sorted(task_set.tasks.values_list("split", flat=True)) == ["train", "val"]


def test_the_same_seed_deals_the_same_way_and_rounding_never_drops_a_row():
    ids = [f"t{i}" for i in range(101)]
    first = deal_splits(ids, {"train": 0.5, "val": 0.3, "holdout": 0.2}, seed=9)
    assert first == deal_splits(ids, {"train": 0.5, "val": 0.3, "holdout": 0.2}, seed=9)
    assert sorted(task for dealt in first.values() for task in dealt) == sorted(ids)
    assert {s: len(v) for s, v in first.items()} == {"train": 50, "val": 30, "holdout": 21}


def test_a_reimport_keeps_the_split_of_existing_rows_that_name_none(user):
    _, _ = load(user, "alpaca.jsonl")
    Task.objects.filter(task_id="task-1").update(split="holdout")
    _, counts = load(user, "alpaca.jsonl", default_split=DefaultSplit(seed=42))
    assert counts == {"created": 0, "updated": 0, "unchanged": 4}
    assert Task.objects.get(task_id="task-1").split == "holdout"


def test_the_preview_shows_rows_as_stored_with_counts_and_problems_and_saves_nothing(user):
    content = (DATASETS / "alpaca.jsonl").read_bytes() + b'{"instruction": 5}\n'
    preview = taskset_import_preview(
        owner=user, name="A", filename="a.jsonl", content=content, page=2, page_size=2
    )
    report = preview.as_json()
    assert report["ok"] is False
    assert report["problems"] == [
        {"field": "a.jsonl line 5", "message": "instruction: must be text, got int"}
    ]
    assert [(r["task_id"], r["split"], r["line"]) for r in report["rows"]] == [
        ("task-3", "train", 3),
        ("task-4", "val", 4),
    ]
    assert (report["rows_total"], report["pages"], report["created"]) == (5, 3, 4)
    assert report["mapping"] == {
        "expected": ["output"],
        "input": ["input"],
        "instruction": ["instruction"],
    }
    assert not TaskSet.objects.exists()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('[\n{"input": "x"},\n]', "bad.json line 3: invalid JSON (a comma before ']')"),
        (
            '{"rows": [{"input": "x"}]}\n{"rows": []}',
            "bad.json line 2: invalid JSON (extra data after the rows)",
        ),
        (
            '{"items": [{"input": "x"}]}',
            "bad.json line 1: a JSON object needs its rows in a list under rows, data, examples, tasks",
        ),
    ],
)
def test_json_that_is_not_one_array_of_rows_is_refused_naming_the_line(user, content, problem):
    with pytest.raises(SpecError) as error:
        taskset_import(owner=user, name="S", filename="bad.json", content=content)
    assert error.value.problems == [problem]
