import json
from io import StringIO

import pytest

from optimizer.examples import EXAMPLES_DIR, TASK_SETS, VERIFIERS, load_examples
from optimizer.tasksets.files import parse_task_file
from optimizer.tasksets.models import Task, TaskSet
from verifiers_app.engine import compile_specs, score, validate_spec
from verifiers_app.models import Verifier, VerifierVersion


def example_spec(name):
    return json.loads((EXAMPLES_DIR / "verifiers" / f"{name}.json").read_text())


def example_rows(relative):
    path = EXAMPLES_DIR / relative
    return parse_task_file(path.name, path.read_bytes())


@pytest.mark.parametrize("relative", VERIFIERS)
def test_every_example_verifier_compiles(relative):
    spec = json.loads((EXAMPLES_DIR / relative).read_text())
    assert validate_spec(spec)["id"] == spec["id"]
    compile_specs([spec])


@pytest.mark.parametrize("relative", TASK_SETS.values())
def test_every_example_task_validates_and_the_sets_have_train_and_val_splits(relative):
    rows = example_rows(relative)
    splits = [row["split"] for row in rows]
    assert len(rows) == 20
    assert splits.count("train") >= 8 and splits.count("val") >= 6


def test_the_facility_verifier_weights_labels_4_json_2_keys_1():
    checks = {c["type"]: c["weight"] for c in example_spec("facility-extraction-quality")["checks"]}
    assert checks == {"task_expectations": 4, "json_valid": 2, "json_keys": 1}


def test_a_correct_facility_triage_scores_1_and_freeform_prose_scores_low():
    spec = example_spec("facility-extraction-quality")
    row = example_rows("tasks/facility-requests.jsonl")[0]
    labels = row["metadata"]["labels"]
    assert score(spec, json.dumps(labels), row).score == 1.0
    prose = "This sounds urgent, there is water in the server room; plumbing should go now."
    assert score(spec, prose, row).score < 0.3


def test_a_refund_reply_that_pushes_a_gift_card_loses_points_with_a_reason_gepa_can_act_on():
    spec = example_spec("refund-policy-quality")
    row = example_rows("tasks/refund-tickets.jsonl")[0]
    good = (
        "I'm sorry the headphones failed. You'll get a full refund; please send your order number."
    )
    bad = "Sorry about that! I can offer you a gift card for the amount."
    assert score(spec, good, row).score == 1.0
    result = score(spec, bad, row)
    assert result.score < 0.5
    assert "do not offer a gift card" in result.feedback


def test_the_qa_rows_are_scored_by_their_row_verifiers():
    rows = {r["task_id"]: r for r in example_rows("tasks/qa-basics.yaml")}
    assert {r["verifier"]["fn_name"] for r in rows.values()} == {
        "exact_match",
        "contains",
        "regex_match",
    }
    no_spec = []
    assert score(no_spec, "<answer>4</answer>", rows["qa-01"]).score == 1.0
    assert score(no_spec, " paris ", rows["qa-02"]).score == 1.0
    assert score(no_spec, "<answer> jupiter </answer>", rows["qa-05"]).score == 1.0
    assert score(no_spec, "Saturn", rows["qa-05"]).score == 0.0


@pytest.mark.django_db
def test_loading_the_examples_twice_changes_nothing(admin_user):
    out = StringIO()
    load_examples(user=admin_user, stdout=out)
    before = (
        list(Verifier.objects.values_list("slug", "version", "shared")),
        VerifierVersion.objects.count(),
        list(Task.objects.values_list("pk", "task_id", "split")),
        list(TaskSet.objects.values_list("name", "shared")),
    )
    load_examples(user=admin_user, stdout=out)
    after = (
        list(Verifier.objects.values_list("slug", "version", "shared")),
        VerifierVersion.objects.count(),
        list(Task.objects.values_list("pk", "task_id", "split")),
        list(TaskSet.objects.values_list("name", "shared")),
    )
    assert before == after
    assert len(before[2]) == 60 and all(shared for _, _, shared in before[0])
    assert "Unchanged example verifier refund-policy-quality" in out.getvalue()
