"""Evaluation.run, the candidate's run stored again so one index led by the
run serves the CSV export, is the candidate's run on every path that writes
evaluations: a native run (its train and val evaluations and the holdout
scoring at its end), an external run's batches, an import, the test
factories; and every Evaluation the code builds names its run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from optimizer.export import run_export, run_import
from optimizer.models import Evaluation, Run
from tests.factories import recorded_run
from tests.optimizer.external.test_api import Tracker, child, seed
from tests.optimizer.run_helpers import run_demo_with_holdout

ROOT = Path(__file__).resolve().parents[2]


def assert_each_evaluation_has_its_run(run: Run) -> None:
    total = Evaluation.objects.filter(candidate__run=run).count()
    assert total
    assert Evaluation.objects.filter(run=run, candidate__run=run).count() == total
    assert not Evaluation.objects.filter(run=run).exclude(candidate__run=run).exists()


@pytest.mark.django_db(transaction=True)
def test_a_native_run_writes_its_run_on_every_evaluation_the_holdout_ones_too(
    user, settings, tmp_path, monkeypatch
):
    from optimizer.runs import runner

    settings.RUNS_DIR = tmp_path / "runs"
    monkeypatch.setattr(runner, "HEARTBEAT_SECONDS", 3600)  # tests/optimizer/runs/test_runner.py
    run = run_demo_with_holdout(user)
    splits = set(Evaluation.objects.filter(run=run).values_list("split", flat=True))
    assert {"val", "holdout"} <= splits
    assert_each_evaluation_has_its_run(run)


@pytest.mark.django_db
def test_an_external_runs_batches_write_its_run_on_every_evaluation(user):
    tracker = Tracker(user)
    run_id = tracker.open().json()["id"]
    response = tracker.send(run_id, 1, seed(), child())
    assert response.status_code == 200, response.content
    assert_each_evaluation_has_its_run(Run.objects.get(pk=run_id))


@pytest.mark.django_db
def test_an_imported_run_writes_the_new_run_on_every_evaluation(user, other_user):
    original = recorded_run(user, candidates=3, val_tasks=4, holdout_tasks=2)
    imported = run_import(owner=other_user, data=run_export(original))
    assert_each_evaluation_has_its_run(imported)
    assert_each_evaluation_has_its_run(original)


@pytest.mark.django_db
def test_the_factories_runs_have_their_run_on_every_evaluation(user):
    assert_each_evaluation_has_its_run(
        recorded_run(user, candidates=3, val_tasks=4, holdout_tasks=2)
    )


def _evaluation_calls(tree: ast.AST):
    """Calls of `Evaluation(...)` and `Evaluation.objects.create(...)`."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Name) and func.id == "Evaluation") or (
            isinstance(func, ast.Attribute)
            and func.attr in ("create", "get_or_create", "update_or_create")
            and isinstance(func.value, ast.Attribute)
            and func.value.attr == "objects"
            and isinstance(func.value.value, ast.Name)
            and func.value.value.id == "Evaluation"
        ):
            yield node


def test_every_evaluation_the_code_builds_names_its_run():
    """Any new writer of evaluations must set run (the column is NOT NULL, so
    one that forgets fails at its first insert; one that sets it from
    anything but the candidate's run is what this asks a reader to check).
    A call that spreads a comprehension of another row's fields
    (`**{f.attname: ... for f in concrete_fields}`) copies its run along."""
    missing = []
    for folder in ("optimizer", "dashboard", "verifiers_app", "bench", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for call in _evaluation_calls(ast.parse(path.read_text(), str(path))):
                names = {k.arg for k in call.keywords}
                copies = any(
                    k.arg is None and isinstance(k.value, ast.DictComp) for k in call.keywords
                )
                if not copies and not names & {"run", "run_id"}:
                    missing.append(f"{path.relative_to(ROOT)}:{call.lineno}")
    assert not missing, f"Evaluation built without its run at {missing}"
