"""Replaying a gepa run_dir made without the tracker (`optimize import-gepa`, the import page)."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
from io import StringIO
from pathlib import Path

import gepa
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from optimizer.external.replay import load_gepa_state, run_replay_gepa_state
from optimizer.external.services import ExternalRunError
from optimizer.models import Candidate, Run, RunEvent, RunKind

pytestmark = pytest.mark.django_db
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "external" / "track_gepa_run.py"


def _example():
    spec = importlib.util.spec_from_file_location("track_gepa_run", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A real gepa run (the example's offline adapter), no tracker: only its checkpoint is left."""
    example = _example()
    directory = tmp_path_factory.mktemp("gepa-run")

    class Quiet:
        def log(self, message):
            pass

    result = gepa.optimize(
        seed_candidate={"instructions": "Answer the customer."},
        trainset=example.TASKS,
        valset=example.TASKS,
        adapter=example.PhraseAdapter(),
        reflection_lm=example.reflection_lm,
        max_metric_calls=80,
        reflection_minibatch_size=2,
        run_dir=str(directory),
        logger=Quiet(),
        seed=0,
        display_progress_bar=False,
        track_best_outputs=True,
    )
    return directory, result


def test_a_checkpoint_replays_as_an_external_run_with_its_candidates_lineage_scores_and_proposals(
    run_dir, user
):
    directory, result = run_dir
    out = StringIO()
    call_command("optimize", "import-gepa", str(directory), "--user", user.username, stdout=out)
    summary = json.loads(out.getvalue())
    run = Run.objects.get(pk=summary["run_id"])
    assert (
        run.kind == RunKind.EXTERNAL
        and run.external["source"] == "replay"
        and run.status == "completed"
    )
    assert run.budget_used == result.total_metric_calls
    candidates = list(Candidate.objects.filter(run=run).order_by("index"))
    assert [c.components for c in candidates] == result.candidates
    assert [c.parents for c in candidates] == [
        [p for p in ps if p is not None] for ps in result.parents
    ]
    assert [c.val_score for c in candidates] == pytest.approx(result.val_aggregate_scores)
    assert summary["best_score"] == pytest.approx(max(result.val_aggregate_scores))
    proposals = [e.payload for e in RunEvent.objects.filter(run=run, type="proposal")]
    assert {p["accepted"] for p in proposals} == {
        True,
        False,
    }  # the example's reflection fails every third call
    best = candidates[result.best_idx]
    assert best.evaluations.exclude(output="").exists()  # gepa's tracked best outputs come along


def test_replaying_the_same_checkpoint_twice_gives_one_run(run_dir, user):
    directory, _ = run_dir
    for _ in range(2):
        call_command(
            "optimize",
            "import-gepa",
            str(directory / "gepa_state.bin"),
            "--user",
            user.username,
            stdout=StringIO(),
        )
    assert Run.objects.count() == 1


def test_uploading_a_checkpoint_on_the_import_page_replays_it(run_dir, user_client):
    directory, result = run_dir
    upload = SimpleUploadedFile("gepa_state.bin", (directory / "gepa_state.bin").read_bytes())
    response = user_client.post("/runs/import/", {"file": upload})
    run = Run.objects.get()
    assert response.status_code == 302 and response.url == f"/runs/{run.pk}/"
    assert run.candidates.count() == len(result.candidates)


class _Exploit:
    def __reduce__(self):
        return (os.system, ("touch /tmp/frontier-i18-pwned",))


def test_a_checkpoint_that_names_code_executes_nothing_and_is_refused(user, user_client):
    marker = Path("/tmp/frontier-i18-pwned")
    marker.unlink(missing_ok=True)
    hostile = pickle.dumps(
        {"program_candidates": [_Exploit()], "prog_candidate_val_subscores": [{0: 1.0}]}
    )
    with pytest.raises(ExternalRunError):
        run_replay_gepa_state(owner=user, raw=hostile)
    assert not marker.exists()
    response = user_client.post(
        "/runs/import/", {"file": SimpleUploadedFile("gepa_state.bin", hostile)}
    )
    assert response.status_code == 400 and "program_candidates.0" in response.content.decode()
    assert not marker.exists() and not Run.objects.exists()


def test_a_file_that_is_not_a_checkpoint_is_refused_naming_the_file():
    with pytest.raises(ExternalRunError, match="file: not a readable gepa_state.bin"):
        load_gepa_state(b"\x80\x04not really")
