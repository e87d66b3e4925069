import copy
import csv
import io
import json

import pytest

from optimizer.export import RunImportError, run_export, run_export_csv, run_import
from optimizer.models import Candidate, Evaluation, Run, RunEvent
from tests.dashboard.compare_factories import make_compare_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(user):
    return make_compare_run(user, candidates=4, val_tasks=5, holdout_tasks=3)


def _scores(run):
    return sorted(Evaluation.objects.filter(candidate__run=run).values_list("candidate__index", "split", "task_key", "score", "verdict"))


def test_an_exported_run_imports_back_with_identical_scores_lineage_and_events(run, other_user):
    data = json.loads(json.dumps(run_export(run)))  # through real JSON, as a downloaded file would be

    imported = run_import(owner=other_user, data=data)

    assert imported.pk != run.pk and imported.owner == other_user and imported.imported
    assert _scores(imported) == _scores(run)
    assert list(imported.candidates.values_list("index", "parents", "components", "val_score")) == list(
        run.candidates.values_list("index", "parents", "components", "val_score"))
    assert imported.best_candidate.index == run.best_candidate.index
    assert (imported.seed_score, imported.best_score) == (run.seed_score, run.best_score)
    assert list(imported.events.values_list("seq", "type", "payload")) == list(run.events.values_list("seq", "type", "payload"))
    assert imported.last_seq == run.last_seq


def test_exporting_an_imported_run_gives_the_same_document_again(run, other_user):
    first = run_export(run)
    second = run_export(run_import(owner=other_user, data=copy.deepcopy(first)))
    for doc in (first, second):
        for name in ("created_at", "task_set", "name"):
            doc["run"].pop(name)
        for event in doc["events"]:
            event.pop("created_at")
    assert second == first


def test_the_csv_has_one_row_per_task_and_one_score_column_per_candidate(run):
    rows = list(csv.reader(io.StringIO(run_export_csv(run))))
    header, body = rows[0], rows[1:]
    assert header == ["task_key", "split", "candidate_0", "candidate_1", "candidate_2", "candidate_3"]
    assert len(body) == Evaluation.objects.filter(candidate__run=run, candidate__index=0).count()
    stored = {(i, s, k): v for i, s, k, v, _ in _scores(run)}
    for key, split, *scores in body:
        assert [float(x) for x in scores] == [stored[(i, split, key)] for i in range(4)]


def test_a_task_key_that_looks_like_a_formula_is_defused_in_the_csv(run):
    Evaluation.objects.filter(candidate__run=run, task_key="val-000").update(task_key="=HYPERLINK(\"http://x\")")
    text = run_export_csv(run)
    assert "'=HYPERLINK" in text and "\n=HYPERLINK" not in text


def _broken(run, mutate):
    data = json.loads(json.dumps(run_export(run)))
    mutate(data)
    return data


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda d: d.update(format="something.else"), "format"),
    (lambda d: d["run"].update(status="exploded"), "run.status"),
    (lambda d: d["candidates"][1]["evaluations"][2].update(score=1.5), "candidates.1.evaluations.2.score"),
    (lambda d: d["candidates"][2]["evaluations"][0].update(verdict="great"), "candidates.2.evaluations.0.verdict"),
    (lambda d: d["candidates"][3].update(parents=[42]), "candidates.3.parents"),
    (lambda d: d["candidates"][1].update(index=0), "candidates.1.index"),
    (lambda d: d["candidates"][0].pop("components"), "candidates.0.components"),
    (lambda d: d["candidates"][0].update(run_code="__import__('os').system('true')"), "candidates.0.run_code"),
    (lambda d: d["run"].update(best_index=99), "run.best_index"),
    (lambda d: d["events"][1].update(seq=1), "events.1.seq"),
    (lambda d: d["candidates"][0]["components"].update(system_prompt="x" * 200_001), "candidates.0.components.system_prompt"),
])
def test_a_broken_file_is_rejected_naming_the_field_and_nothing_is_saved(run, other_user, mutate, field):
    data = _broken(run, mutate)
    counts = (Run.objects.count(), Candidate.objects.count(), Evaluation.objects.count(), RunEvent.objects.count())

    with pytest.raises(RunImportError) as err:
        run_import(owner=other_user, data=data)

    assert str(err.value).startswith(field), str(err.value)
    assert (Run.objects.count(), Candidate.objects.count(), Evaluation.objects.count(), RunEvent.objects.count()) == counts


def test_a_file_that_is_not_an_object_is_rejected_with_a_sentence(other_user):
    with pytest.raises(RunImportError, match="JSON object"):
        run_import(owner=other_user, data=[1, 2, 3])


def test_a_run_exported_while_running_is_imported_as_stopped(run, other_user):
    data = _broken(run, lambda d: d["run"].update(status="running"))
    assert run_import(owner=other_user, data=data).status == "stopped"
