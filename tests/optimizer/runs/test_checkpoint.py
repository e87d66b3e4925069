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
from optimizer.runs.checkpoint import HUMAN_READABLE_FILES, ThrottledSave
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


def test_the_checkpoint_does_not_grow_with_the_iterations(user):
    """gepa appends an entry to its trace every iteration and pickles the whole
    trace with each save; our runs keep only the current iteration's entry, in
    the checkpoint and in the worker's memory."""
    refund_verifier(user)
    task_set = refund_task_set(user, splits=["train", "val"] * 4)
    run = run_launch(owner=user, config=run_config(task_set, budget={"max_metric_calls": 400}))
    assert execute_run(run.pk) == RunStatus.COMPLETED

    with open(runner.run_dir(run.pk) / "gepa_state.bin", "rb") as f:
        state = pickle.load(f)
    assert state["i"] >= 20  # enough iterations for a whole trace to show
    assert [entry["i"] for entry in state["full_program_trace"]] == [state["i"]]


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


class PoolState:
    """What a ThrottledSave reads of gepa's state: its pool, and what its pickle leaves out."""

    _EXCLUDED_FROM_SERIALIZATION = frozenset({"save"})

    def __init__(self) -> None:
        self.program_candidates = [{"instructions": "seed"}]
        self.i = -1


def test_a_save_that_adds_no_candidate_waits_for_the_interval_and_the_last_one_is_kept():
    """gepa saves before every iteration; only the saves that add a candidate,
    or come CHECKPOINT_SECONDS after the last one written, are pickled, and the
    one skipped last is written when the optimization ends."""
    now = [0.0]
    written = []
    state = PoolState()
    save = ThrottledSave(
        state,  # type: ignore[arg-type]
        lambda run_dir, data: written.append(pickle.loads(data)["i"]),
        every=1.0,
        clock=lambda: now[0],
    )

    def iteration(seconds: float, *, accepted: bool = False) -> None:
        save("/runs/1")
        state.i += 1
        if accepted:
            state.program_candidates.append({"instructions": f"child {state.i}"})
        now[0] += seconds

    iteration(0.1)  # i -1, the first save: written
    iteration(0.1)  # i 0: nothing new within the second: skipped
    iteration(0.1, accepted=True)  # i 1: skipped; the candidate it adds is in the next save
    iteration(0.9)  # i 2: holds a new candidate: written at once
    iteration(0.5)  # i 3: 0.9 s after the last one written: skipped
    iteration(0.1)  # i 4: 1.4 s after it: written
    iteration(0.1)  # i 5: skipped
    save("/runs/1")  # gepa's final save, after the last iteration: skipped too
    assert written == [-1, 2, 4]
    save.flush()  # at the end of the optimization: the final state is written
    save.flush()  # and only once
    assert written == [-1, 2, 4, 6]


def test_what_the_adapter_carries_is_read_for_each_save_written_and_only_then():
    """gepa saves (and used to ask the adapter for its state) before every
    iteration; most saves are skipped, and so is the reading: each pickle
    written holds the adapter's state as it was at that save."""
    now = [0]  # in tenths of a second
    written = []
    carried = {"reads": 0}

    def adapter_state() -> dict[str, int]:
        carried["reads"] += 1
        return {"at": now[0]}

    state = PoolState()
    save = ThrottledSave(
        state,  # type: ignore[arg-type]
        lambda run_dir, data: written.append(pickle.loads(data)["adapter_state"]),
        every=1.0,
        clock=lambda: now[0] / 10,
        adapter_state=adapter_state,
    )
    for _ in range(25):  # 25 iterations of 0.1 s: a save written each second
        save("/runs/1")
        now[0] += 1
    save.flush()  # the end: the last save skipped is written, with what is carried now
    assert written == [{"at": 0}, {"at": 10}, {"at": 20}, {"at": 25}]
    assert carried["reads"] == len(written)
