"""The recorder writes on its own thread: the run's model
calls do not wait for the database, and gepa's checkpoint still never gets
ahead of what the database recorded."""

from __future__ import annotations

import os
import pickle
import threading
import time
from unittest import mock

import pytest

from optimizer.lm.simulator import DemoLanguageModel
from optimizer.models import Candidate, Run, RunEvent, RunStatus, run_progress
from optimizer.runs import recorder as recorder_module
from optimizer.runs import recording_thread, runner
from optimizer.runs.adapter import FrontierAdapter
from optimizer.runs.recorder import RunRecorder
from optimizer.runs.recording_thread import RecorderThread
from optimizer.runs.runner import execute_run
from optimizer.services import run_launch
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config
from tests.polling import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def runs_dir(settings, tmp_path, monkeypatch):
    settings.RUNS_DIR = tmp_path / "runs"
    monkeypatch.setattr(
        runner, "HEARTBEAT_SECONDS", 3600
    )  # see tests/optimizer/runs/test_runner.py


@pytest.fixture
def run(user):
    refund_verifier(user)
    task_set = refund_task_set(user, splits=["train", "val"] * 4)
    return run_launch(owner=user, config=run_config(task_set))


def test_the_next_model_calls_go_ahead_while_a_budget_update_is_still_being_written(
    run, monkeypatch
):
    reported = threading.Event()  # gepa reported the first budget update of an iteration
    called_after = threading.Event()  # and the run made a model call after that
    blocked = {}
    relay_budget, write_budget = RecorderThread.on_budget_updated, RunRecorder.on_budget_updated

    def reporting(self, event):
        relay_budget(self, event)
        if event["iteration"] >= 1:
            reported.set()

    def slow_write(self, event):
        if not blocked and event["iteration"] >= 1:
            # A slow database: this write finishes only once the run has made another model call.
            blocked["released"] = called_after.wait(timeout=10)
        write_budget(self, event)

    complete = DemoLanguageModel.complete

    def counting(self, messages):
        if reported.is_set():
            called_after.set()
        return complete(self, messages)

    monkeypatch.setattr(RecorderThread, "on_budget_updated", reporting)
    monkeypatch.setattr(RunRecorder, "on_budget_updated", slow_write)
    monkeypatch.setattr(DemoLanguageModel, "complete", counting)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    assert blocked == {"released": True}
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


def test_every_checkpoint_gepa_writes_follows_the_rows_of_everything_it_holds(run, monkeypatch):
    checks = []
    write = recording_thread.write_checkpoint

    def checked_write(run_dir, data):
        # What the database holds when gepa_state.bin is about to be replaced by `data`.
        state = pickle.loads(data)
        budget_used = run_progress(run.pk).get().budget_used
        candidates = Candidate.objects.filter(run=run).count()
        checks.append(
            (
                state["i"],
                state["total_num_evals"],
                budget_used,
                len(state["program_candidates"]),
                candidates,
            )
        )
        write(run_dir, data)

    monkeypatch.setattr(recording_thread, "write_checkpoint", checked_write)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    assert len(checks) >= 4 and checks[-1][1] > 0
    with open(runner.run_dir(run.pk) / "gepa_state.bin", "rb") as f:
        assert (
            pickle.load(f)["total_num_evals"] == checks[-1][1]
        )  # the last one written is the final state
    for iteration, evaluations, budget_used, held, recorded in checks:
        if (
            iteration >= 0
        ):  # after the first iteration every metric call was reported as a budget update
            assert budget_used == evaluations  # each one is in the database
        # every candidate it holds is in the database too, but for the last accepted one, which is
        # recorded right after the checkpoint that holds it (optimizer/runs/recorder.py, _flush_pending)
        assert recorded >= held - 1


def test_the_next_model_calls_go_ahead_while_the_checkpoint_is_still_being_written(
    run, monkeypatch
):
    """A slow disk: the first checkpoint's write finishes only once the engine has
    gone on, with another model call or (when the writer fell so far behind that
    gepa had no call left to make) by ending the optimization. An engine waiting
    for the write does neither."""
    writing = threading.Event()  # a checkpoint is being written
    went_on = threading.Event()  # and meanwhile the engine made a model call, or ended
    blocked = {}
    write = recording_thread.write_checkpoint

    def slow_write(run_dir, data):
        if not blocked and pickle.loads(data)["i"] >= 0:
            writing.set()
            blocked["released"] = went_on.wait(timeout=10)
            writing.clear()
        write(run_dir, data)

    complete = DemoLanguageModel.complete

    def counting(self, messages):
        if writing.is_set():
            went_on.set()
        return complete(self, messages)

    ended = RecorderThread.on_optimization_end

    def ending(self, event):
        went_on.set()  # on the engine's thread: gepa is done, nothing of it waits
        ended(self, event)

    monkeypatch.setattr(recording_thread, "write_checkpoint", slow_write)
    monkeypatch.setattr(DemoLanguageModel, "complete", counting)
    monkeypatch.setattr(RecorderThread, "on_optimization_end", ending)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    assert blocked == {"released": True}


def test_a_checkpoint_that_cannot_be_written_fails_the_run(run, monkeypatch):
    def full_disk(run_dir, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(recording_thread, "write_checkpoint", full_disk)
    assert execute_run(run.pk) == RunStatus.FAILED
    assert "No space left on device" in Run.objects.get(pk=run.pk).error
    assert (
        Candidate.objects.filter(run=run).count() == 1
    )  # the seed: nothing the missing checkpoint would hold


def test_the_writers_events_reach_the_channel_layer_from_the_background_publisher_in_seq_order(
    run, monkeypatch
):
    from optimizer.runs import events

    sent = []
    send_now = events._send_now

    def noting(run_id, messages, **kwargs):
        sent.append((threading.current_thread().name, [m["seq"] for m in messages]))
        send_now(run_id, messages, **kwargs)

    monkeypatch.setattr(events, "_send_now", noting)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    # Neither the engine's thread nor the recorder's waits on the channel layer (nor the runs-list row read).
    assert {name for name, _ in sent} == {"run-event-publisher"}
    seqs = [seq for _, batch in sent for seq in batch]
    assert seqs == sorted(seqs) and seqs[-1] == RunEvent.objects.filter(run=run).count()


def test_the_engine_waits_for_a_writer_that_is_behind_and_nothing_is_lost_or_reordered(
    run, monkeypatch
):
    """A slow database and a model that answers at once: the engine outruns the
    writer. The items waiting for the writer never exceed the bound (the engine
    waits instead), and the writer is handed every callback, in gepa's order."""
    bound = 8
    monkeypatch.setattr(recording_thread, "MAX_WAITING", bound, raising=False)
    relayed, recorded, waiting = [], [], []
    hand, record = RecorderThread._hand, RecorderThread._record
    write_budget = RunRecorder.on_budget_updated

    def relaying(self, name, event):
        relayed.append((name, event.get("iteration")))
        hand(self, name, event)
        waiting.append(len(self.items))

    def recording(self, name, event, **kwargs):
        if name != recording_thread.CHECKPOINT:
            recorded.append((name, event.get("iteration")))
        record(self, name, event, **kwargs)

    def slow_write(self, event):
        time.sleep(0.01)
        write_budget(self, event)

    monkeypatch.setattr(RecorderThread, "_hand", relaying)
    monkeypatch.setattr(RecorderThread, "_record", recording)
    monkeypatch.setattr(RunRecorder, "on_budget_updated", slow_write)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    assert max(waiting) <= bound
    assert recorded == relayed and len(relayed) > 5 * bound
    run.refresh_from_db()
    assert run_progress(run.pk).get().budget_used == run.budget_used > 0
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


def bare_recorder(run) -> RunRecorder:
    """A recorder of `run` with no claim and a stand-in adapter: for the writer's own tests."""
    return RunRecorder(
        run=run,
        adapter=mock.Mock(spec=FrontierAdapter),
        valset=[],
        task_pks={},
        budget_total=run.budget_total,
    )


def noted_writes(monkeypatch) -> list[tuple[float, list[str]]]:
    """The writer's writes, noted (when, and the items' names) instead of made."""
    writes: list[tuple[float, list[str]]] = []

    def noting(self, items):
        writes.append((time.monotonic(), [item[0] if item else "stop" for item in items]))

    monkeypatch.setattr(RecorderThread, "_write", noting)
    return writes


def test_the_writer_writes_a_lone_item_at_once_and_gathers_what_follows_into_one_write(
    run, monkeypatch
):
    """While items keep coming the writer starts a write at most every
    GATHER_SECONDS, with everything that arrived meanwhile (fewer commits, each
    costing the worker's GIL); an item after a quiet spell does not wait."""
    monkeypatch.setattr(recording_thread, "GATHER_SECONDS", 2.0)
    writes = noted_writes(monkeypatch)
    thread = RecorderThread(bare_recorder(run))
    put_at = time.monotonic()
    thread._put(("on_candidate_selected", {}))
    wait_until(lambda: writes, what="the first write", interval=0.01)
    for name in ("on_evaluation_start", "on_evaluation_end", "on_budget_updated"):
        thread._put((name, {}))
    wait_until(lambda: len(writes) == 2, what="the second write", interval=0.01)
    thread.close()
    assert [names for _, names in writes] == [
        ["on_candidate_selected"],
        ["on_evaluation_start", "on_evaluation_end", "on_budget_updated"],
        ["stop"],
    ]
    (first_at, _), (second_at, _), _ = writes
    assert first_at - put_at < 1.5  # not held back for the interval: nothing was written before it
    assert second_at - first_at >= 2.0


def test_an_item_written_on_its_own_ends_the_gathering_and_is_written_at_once(run, monkeypatch):
    """A checkpoint, a candidate or the run's "optimizing" status does not wait
    for the gathering interval: the write starts as soon as it arrives, with
    what was gathered before it."""
    monkeypatch.setattr(recording_thread, "GATHER_SECONDS", 5.0)
    writes = noted_writes(monkeypatch)
    recorder = bare_recorder(run)
    recorder.optimizing = True
    thread = RecorderThread(recorder)
    thread._put(("on_candidate_selected", {}))  # written at once: nothing before it
    wait_until(lambda: writes, what="the first write", interval=0.01)
    thread._put(("on_evaluation_end", {}))
    put_at = time.monotonic()
    thread._put((recording_thread.CHECKPOINT, ("/nowhere", b"")))
    wait_until(lambda: len(writes) == 2, what="the second write", interval=0.01)
    thread.close()
    assert [names for _, names in writes[:2]] == [
        ["on_candidate_selected"],
        ["on_evaluation_end", recording_thread.CHECKPOINT],
    ]
    assert writes[1][0] - put_at < 2.5  # not the 5 s interval


def voluntary_switches(thread: threading.Thread) -> int:
    """How often `thread` gave up its CPU to wait (woken up as often, give or take one)."""
    status = f"/proc/self/task/{thread.native_id}/status"
    with open(status) as lines:
        return next(int(line.split()[1]) for line in lines if line.startswith("voluntary_ctxt"))


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads /proc")
def test_the_writer_sleeps_out_the_gathering_interval_instead_of_waking_for_each_item(
    run, monkeypatch
):
    """Items that only join the next batch do not wake a gathering writer: each
    wake-up would cost the engine's thread a GIL hand-off (~5,000 a second with
    a 0 ms model). They are all written together when the interval ends."""
    monkeypatch.setattr(recording_thread, "GATHER_SECONDS", 1.0)
    writes = noted_writes(monkeypatch)
    thread = RecorderThread(bare_recorder(run))
    assert thread.thread is not None
    thread._put(("on_candidate_selected", {}))  # written at once; the interval starts
    wait_until(lambda: writes, what="the first write", interval=0.01)
    before = voluntary_switches(thread.thread)
    for _ in range(100):
        thread._put(("on_budget_updated", {}))
        time.sleep(0.002)  # the writer could run between two items
    woken = voluntary_switches(thread.thread) - before
    wait_until(lambda: len(writes) == 2, what="the second write", interval=0.01)
    thread.close()
    assert writes[1][1] == ["on_budget_updated"] * 100
    assert woken < 10


def test_the_writer_digests_each_candidates_text_once_however_often_it_is_evaluated(
    run, monkeypatch
):
    """The writer finds an evaluation's records by its candidate's digest (a
    JSON dump and a hash): remembered per text, not computed per task again."""
    digested: list[dict[str, str]] = []
    digest = recorder_module.candidate_digest

    def noting(candidate):
        digested.append(dict(candidate))
        return digest(candidate)

    monkeypatch.setattr(recorder_module, "candidate_digest", noting)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    distinct = {tuple(sorted(c.items())) for c in digested}
    assert digested and len(digested) == len(distinct)


def test_a_saved_state_reaches_the_writer_only_when_a_candidate_waits_for_it(run, monkeypatch):
    """gepa saves (or skips saving) its state before every iteration; the writer
    needs it only to record the candidates the save holds, so the others do not
    cross to its thread. Every candidate is still recorded after its checkpoint."""
    relayed = []
    relay = RecorderThread._relay

    def noting(self, name, event, **facts):
        relayed.append(name)
        relay(self, name, event, **facts)

    monkeypatch.setattr(RecorderThread, "_relay", noting)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    candidates = Candidate.objects.filter(run=run).count()
    assert relayed.count("on_iteration_start") > 2 * candidates > 2
    assert 0 < relayed.count("on_state_saved") <= candidates


def trial(key: str, chars: int = 10) -> dict:
    return {"task_key": key, "score": 1.0, "verdict": "pass", "output": "x" * chars, "reasons": []}


def test_a_minibatch_joins_only_the_same_candidates_trials_event_waiting_last(run):
    """In a batch of the writer's, a minibatch's trials join the trials event
    waiting before them when it is the same candidate's and nothing but the
    floating run.budget event came after it, while the joined event stays within
    MAX_TRIAL_ITEMS items and MAX_TRIAL_CHARS characters; a proposal's child
    (no index yet) is never joined, nor is an event already written."""
    recorder = bare_recorder(run)
    recorder.deferring = True
    recorder._add_trials(1, [trial("a"), trial("b")])
    waiting = recorder.unpublished[-1][1]
    recorder.on_budget_updated(
        {"metric_calls_used": 2, "frontier_usage": recorder.meter.snapshot(), "frontier_eta": 1.0}
    )
    recorder._add_trials(1, [trial("c")])  # joins, past the waiting budget
    recorder._add_trials(2, [trial("d")])
    recorder._add_trials(None, [trial("e")])
    recorder._add_trials(None, [trial("f")])
    recorder._add_trials(2, [trial("g")])  # a child's event came between
    many = recorder_module.MAX_TRIAL_ITEMS
    recorder._add_trials(3, [trial(f"h{i}") for i in range(many - 1)])
    recorder._add_trials(3, [trial("i1"), trial("i2")])  # would make MAX_TRIAL_ITEMS + 1
    recorder._add_trials(4, [trial("j", recorder_module.MAX_TRIAL_CHARS - 5)])
    recorder._add_trials(4, [trial("k", 10)])  # would pass MAX_TRIAL_CHARS
    recorder.publish_waiting({})
    recorder._add_trials(4, [trial("l")])  # the event before it is written
    recorder.publish_waiting({})

    written = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("type", "payload"))
    trials = [
        (p["candidate"], [item["task_key"] for item in p["items"]])
        for kind, p in written
        if kind == "trials"
    ]
    assert trials == [
        (1, ["a", "b", "c"]),
        (2, ["d"]),
        (None, ["e"]),
        (None, ["f"]),
        (2, ["g"]),
        (3, [f"h{i}" for i in range(many - 1)]),
        (3, ["i1", "i2"]),
        (4, ["j"]),
        (4, ["k"]),
        (4, ["l"]),
    ]
    assert [kind for kind, _ in written].count("run.budget") == 1
    # The join made a new event: the one it replaced (a row or message may hold it) is as it was.
    assert [item["task_key"] for item in waiting["items"]] == ["a", "b"]


def test_an_evaluations_end_hands_the_writer_its_trials_not_its_records(run, monkeypatch):
    """What a minibatch evaluation hands the writer is its trials' items and the
    few fields of gepa's event the recorder reads: no evaluation record (each
    with every check's result) nor gepa's outputs and traces, which are freed
    on the engine's thread instead of waiting for the writer's next batch. The
    trials still reach the event log."""
    handed = []
    hand = RecorderThread._hand

    def noting(self, name, event):
        if name == "on_evaluation_end":
            handed.append(event)
        hand(self, name, event)

    monkeypatch.setattr(RecorderThread, "_hand", noting)
    assert execute_run(run.pk) == RunStatus.COMPLETED
    assert handed
    for event in handed:
        assert set(event) == {*recorder_module.EVALUATION_END_KEYS, "frontier_trials"}
        for item in event["frontier_trials"].values():
            assert set(item) == {"task_key", "score", "verdict", "output", "reasons", "passed"}
    minibatches = RunEvent.objects.filter(run=run, type="trials", payload__split="train")
    logged = sum(len(payload["items"]) for payload in minibatches.values_list("payload", flat=True))
    assert logged == sum(len(event["frontier_trials"]) for event in handed) > 0
