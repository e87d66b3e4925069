"""`manage.py optimize rescore RUN --verifier ID|FILE`: a new scoring of a run's stored outputs."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from optimizer.models import Candidate
from tests.factories import WINDOW_ONLY, recorded_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_spec_file_rescores_the_run_and_prints_the_summary(user, tmp_path):
    run = recorded_run(user, candidates=5, val_tasks=3)
    before = list(Candidate.objects.filter(run=run).values_list("index", "val_score"))
    spec = tmp_path / "window.json"
    spec.write_text(json.dumps(WINDOW_ONLY))
    out, err = io.StringIO(), io.StringIO()

    call_command(
        "optimize",
        "rescore",
        str(run.pk),
        "--verifier",
        str(spec),
        "--wait",
        stdout=out,
        stderr=err,
    )

    printed = json.loads(out.getvalue())
    assert printed["run_id"] == run.pk and printed["status"] == "done"
    assert printed["name"] == "window-only v1"
    assert printed["summary"]["outputs"] == 15
    assert "15/15 outputs" in err.getvalue()
    assert list(Candidate.objects.filter(run=run).values_list("index", "val_score")) == before


def test_an_unknown_verifier_exits_2_naming_the_option(user):
    run = recorded_run(user, candidates=2, val_tasks=2)
    with pytest.raises(CommandError, match="^--verifier: no verifier") as error:
        call_command("optimize", "rescore", str(run.pk), "--verifier", "nope")
    assert error.value.returncode == 2


@pytest.mark.timeout(60)
def test_it_exits_1_when_scoring_here_raises_instead_of_waiting(user, tmp_path, monkeypatch):
    """In embedded mode the command scores in a thread of its own. When that thread
    raises before it takes the scoring (here a locked table), the scoring stays
    queued: the command says why and exits 1 rather than waiting for ever."""
    from django.db import OperationalError

    import optimizer.scorings.execute

    def locked(scoring_id):
        raise OperationalError("database table is locked: optimizer_scoring")

    monkeypatch.setattr(optimizer.scorings.execute, "scoring_execute", locked)
    run = recorded_run(user, candidates=2, val_tasks=2)
    spec = tmp_path / "window.json"
    spec.write_text(json.dumps(WINDOW_ONLY))

    with pytest.raises(CommandError) as error:
        call_command("optimize", "rescore", str(run.pk), "--verifier", str(spec), "--wait")

    assert error.value.returncode == 1
    assert "OperationalError: database table is locked" in str(error.value)
    assert str(error.value).strip().endswith("it is queued")
