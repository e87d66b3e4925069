"""A run's gepa checkpoint is gepa_state.bin alone: gepa's
run_log.json, candidates.json and candidate tree, rewritten whole on every
iteration, are not written for our runs; other gepa runs keep them."""

from __future__ import annotations

import pickle

import gepa
import pytest
from gepa import EvaluationBatch

from optimizer.models import Candidate, RunStatus
from optimizer.runs import runner
from optimizer.runs.checkpoint import HUMAN_READABLE_FILES
from optimizer.runs.runner import execute_run
from optimizer.services import run_launch
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def runs_dir(settings, tmp_path, monkeypatch):
    settings.RUNS_DIR = tmp_path / "runs"
    monkeypatch.setattr(
        runner, "HEARTBEAT_SECONDS", 3600
    )  # see tests/optimizer/runs/test_runner.py


def test_a_runs_directory_holds_only_the_checkpoint_gepa_resumes_from(user):
    refund_verifier(user)
    task_set = refund_task_set(user, splits=["train", "val"] * 4)
    run = run_launch(owner=user, config=run_config(task_set))
    assert execute_run(run.pk) == RunStatus.COMPLETED
    assert Candidate.objects.filter(run=run).count() >= 3  # several iterations wrote the checkpoint

    directory = runner.run_dir(run.pk)
    written = {p.name for p in directory.iterdir()}
    assert "gepa_state.bin" in written and not written & set(HUMAN_READABLE_FILES)
    with open(directory / "gepa_state.bin", "rb") as f:
        state = pickle.load(f)
    # The whole pool is in the checkpoint, and nothing of ours (it loads without this project).
    assert len(state["program_candidates"]) == Candidate.objects.filter(run=run).count()
    assert not {"_atomic_write_json", "save", "_EXCLUDED_FROM_SERIALIZATION"} & set(state)


class CountingAdapter:
    """A plain gepa user's adapter: the score is how often the prompt says 'please'."""

    propose_new_texts = None

    def evaluate(self, batch, candidate, capture_traces=False):
        score = min(1.0, candidate["instructions"].count("please") / 3)
        return EvaluationBatch(
            outputs=[""] * len(batch),
            scores=[score] * len(batch),
            trajectories=[{}] * len(batch) if capture_traces else None,
        )

    def make_reflective_dataset(self, candidate, eval_batch, components_to_update):
        return {name: [{"Feedback": "say please more"}] for name in components_to_update}


def test_another_gepa_run_in_the_same_process_still_writes_gepas_own_files(tmp_path):
    gepa.optimize(
        seed_candidate={"instructions": "Answer."},
        trainset=[{"n": n} for n in range(3)],
        valset=[{"n": n} for n in range(2)],
        adapter=CountingAdapter(),
        reflection_lm=lambda prompt: (
            "```\nAnswer, please, " + "please " * prompt.count("please") + "\n```"
        ),
        max_metric_calls=20,
        reflection_minibatch_size=2,
        run_dir=str(tmp_path),
        logger=type("Quiet", (), {"log": lambda self, message: None})(),
        display_progress_bar=False,
    )
    assert {p.name for p in tmp_path.iterdir()} >= {"gepa_state.bin", *HUMAN_READABLE_FILES}
