"""`manage.py optimize rescore RUN --verifier ID|FILE`: a new scoring of a run's stored outputs.

A rescore that scores in its own thread while the command polls is tested on a
real SQLite file, in tests/integration/test_optimize_command.py: on the tests'
shared-cache in-memory SQLite the two threads' statements collide ("table is
locked") instead of waiting for each other."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.factories import WINDOW_ONLY, recorded_run

pytestmark = pytest.mark.django_db(transaction=True)


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


@pytest.mark.timeout(60)
def test_a_scoring_another_process_took_is_followed_to_its_end(user, tmp_path, monkeypatch):
    """The command's thread finds the scoring taken (a server's embedded worker
    got there first) and returns: the command goes on drawing the bar until the
    other process has scored it, here at the bar's second draw."""
    import types

    import optimizer.scorings.execute
    from optimizer.management.commands import optimize
    from optimizer.models import Scoring, ScoringStatus

    monkeypatch.setattr(optimizer.scorings.execute, "scoring_execute", lambda pk: "skipped")
    draws = []

    def sleep(seconds):  # the other process, between two draws (on this thread: no lock race)
        draws.append(seconds)
        if len(draws) == 2:
            Scoring.objects.update(status=ScoringStatus.DONE, done=4, total=4)

    monkeypatch.setattr(optimize, "time", types.SimpleNamespace(sleep=sleep))
    run = recorded_run(user, candidates=2, val_tasks=2)
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

    assert json.loads(out.getvalue())["status"] == "done"
    assert len(draws) == 2 and "4/4 outputs · done" in err.getvalue()
