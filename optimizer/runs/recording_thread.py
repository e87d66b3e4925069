"""The recorder's database work, off the engine's thread, so it is off the critical path.

gepa calls its callbacks synchronously on the thread that runs the
optimization (docs/gepa-notes.md §4), so a recorder writing rows and events
there would put SQL on the run's critical path: the next model call would wait
for it. Here gepa
calls a `RecorderThread`, which takes on the engine's thread only what cannot
wait (the adapter's evaluation records, a minibatch's as its trials' items;
the meter's reading, the budget the adapter's guard checks, the proposer's
reasoning) and hands each callback, in
gepa's order, to one writer thread that runs the recorder. The recorder's own
state is touched by that thread alone, so the order of events, their
consecutive seqs and the claim checks are exactly what they were.

Durability: gepa's checkpoint goes through the same queue. `barrier` is the
run's first stopper, which gepa calls before it saves its state (at the top of
every iteration and before the final save); it makes that save a snapshot
taken on the engine's thread (optimizer/runs/checkpoint.py, `save_through`)
whose bytes the writer writes to gepa_state.bin after committing everything
gepa reported before. So the checkpoint is never ahead of the database, and
the engine does not wait for either: only the accepted candidate of the last
iteration is recorded just after the checkpoint that holds it
(optimizer/runs/recorder.py, `_flush_pending`). A worker that lost its claim writes
no checkpoint, and raises ClaimLost at its next stop check; a checkpoint that
cannot be written fails the run there too (or when the writer closes).

Backpressure: at most MAX_WAITING items wait for the writer. With a model that
answers in a few ms gepa reports faster than one connection can commit, and
an unbounded queue (each item holding a checkpoint's bytes or an evaluation's
records) grows without bound; at the bound the engine's thread waits in
`_put` until the writer has taken items, so nothing is dropped and the
order stays gepa's. The writer takes what arrives within GATHER_SECONDS of
its last write (up to MAX_BATCH items; an item after a quiet spell, or one
written on its own, at once)
and writes the callbacks that only move the budget and publish events in one
transaction (fewer commits, so it keeps up and holds the GIL the engine's
thread needs less). A checkpoint and the
callbacks that record candidates or injections are written on their own, as
before: the batch is committed before them, so the checkpoint still follows
the rows of everything gepa reported before it.

The hand-off is a deque and an Event rather than a queue.Queue: the engine
wakes the writer only when it is idle or an item must not wait (`_urgent`),
so while it gathers the writer sleeps out the interval instead of taking the
GIL back for each of the ~7 callbacks of an iteration (with a 0 ms model,
~5,000 a second: each wake-up cost the engine's thread a GIL hand-off).

A run executed inside an open transaction (a test that wraps everything in
one) is recorded on the calling thread: another thread's connection
could not see the rows that transaction has not committed.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from django.db import connection, transaction

from dashboard.lib.db_retry import is_transient
from optimizer.runs.budget import UsageSnapshot
from optimizer.runs.checkpoint import State, ThrottledSave, save_through, write_checkpoint
from optimizer.runs.claims import ClaimLost
from optimizer.runs.events import background_publisher, publishing_through
from optimizer.runs.recorder import EVALUATION_END_KEYS, CallbackEvent, RunRecorder, trial_items

log = logging.getLogger(__name__)

# gepa passes its live state in these; the writer must never see it (docs/gepa-notes.md §4).
LIVE_STATE_KEYS = frozenset({"state", "final_state", "trainset_loader"})
CHECKPOINT = "checkpoint"  # a queue item that is gepa's state to write, not a callback
#: At most this many items wait for the writer; then the engine waits (see the module docstring).
MAX_WAITING = 1000
#: The writer takes at most this many waiting items at a time.
MAX_BATCH = 1000
#: While items keep coming, the writer starts a write at most this often: it
#: takes what arrives until then (up to MAX_BATCH) and writes it as one batch.
#: An item after a quiet spell is written at once. Each commit costs the worker
#: some Python (the GIL its engine thread needs) whatever its size: with a 0 ms
#: model gepa reports ~5,000 items a second (bench/growth.py).
GATHER_SECONDS = 0.1
#: The callbacks written together in one transaction when several wait (with
#: on_state_saved when no candidate waits for it, see `_batched`): none writes
#: more than the run's progress row (its last reading, once a batch) and events
#: kept in the recorder until a commit (RunRecorder.deferring), so a batch
#: rolled back by a lost connection loses nothing the next commit does not
#: write again. Every other item (a checkpoint, a candidate's recording, an
#: injection) is written on its own, with its own retries.
BATCHED = frozenset(
    {
        "on_iteration_start",
        "on_candidate_selected",
        "on_evaluation_start",
        "on_evaluation_end",
        "on_proposal_start",
        "on_proposal_end",
        "on_budget_updated",
        "on_merge_attempted",
        "on_candidate_accepted",
        "on_candidate_rejected",
        "on_iteration_end",
    }
)
#: How often a waiting engine checks that the writer is still alive.
WAIT_CHECK_SECONDS = 1.0

#: What the writer is given: (callback name, event), (CHECKPOINT, (run_dir, bytes)), or None: stop.
WriterItem = tuple[str, CallbackEvent | tuple[str, bytes]] | None
#: A gepa callback event as gepa passes it (one of gepa's TypedDicts).
GepaEvent = Mapping[str, Any]


class RecorderThread:
    """gepa's callback for one run: relays every event to the recorder on a writer thread."""

    def __init__(self, recorder: RunRecorder) -> None:
        if recorder.adapter is None:
            raise ValueError(
                "a RecorderThread relays a run this worker executes: its recorder needs the adapter"
            )
        self.recorder = recorder
        self.adapter = recorder.adapter
        # What waits for the writer, in gepa's order (appended on the engine's thread only).
        self.items: deque[WriterItem] = deque()
        self.arrived = threading.Event()  # the writer should look at `items` now
        self.taken = threading.Event()  # the writer took items: room for a waiting engine
        self.idle = False  # the writer waits for the first item of its next write
        self.iterating = False  # the engine relayed gepa's first iteration start
        # A candidate was relayed that waits for gepa's next saved state (see on_state_saved).
        self.candidates_relayed = False
        self.states_relayed = 0  # saved states relayed (on the engine's thread)
        self.states_recorded = 0  # and recorded (on the writer's)
        self.thread: threading.Thread | None = None
        self.failure: BaseException | None = None  # a checkpoint the writer could not write
        # gepa's save of its state (optimizer/runs/checkpoint.py), once the barrier set it up.
        self.save: ThrottledSave | None = None
        # The runner's background publisher sends what the writer commits, too (in commit order).
        self.publisher = background_publisher()
        if not connection.in_atomic_block:
            self.thread = threading.Thread(
                target=self._work, name=f"run-{recorder.run_id}-recorder", daemon=True
            )
            self.thread.start()

    # -- on the engine's thread ----------------------------------------------------

    def _relay(self, name: str, event: GepaEvent, **facts: Any) -> None:
        """Hand gepa's `event` (a copy, without gepa's live state) to the writer,
        with `facts` read now (their keys already `frontier_*`)."""
        if LIVE_STATE_KEYS.isdisjoint(event):
            relayed: CallbackEvent = dict(event)
        else:
            relayed = {key: value for key, value in event.items() if key not in LIVE_STATE_KEYS}
        if facts:
            relayed.update(facts)
        self._hand(name, relayed)

    def _hand(self, name: str, relayed: CallbackEvent) -> None:
        """Hand the callback `name` with `relayed` (ours, not gepa's event) to the writer."""
        if self.thread is None:
            self._record(name, relayed)
        else:
            self._put((name, relayed))

    def _put(self, item: WriterItem) -> None:
        """Hand `item` to the writer, waiting while MAX_WAITING items wait for it.
        The writer is woken only when it is idle or the item must not wait."""
        items = self.items
        while len(items) >= MAX_WAITING:
            self.taken.clear()
            if len(items) < MAX_WAITING:
                break
            self.arrived.set()  # a full queue does not wait for the gathering interval
            if not self.taken.wait(WAIT_CHECK_SECONDS) and (
                self.thread is None or not self.thread.is_alive()
            ):
                raise RuntimeError(f"run {self.recorder.run_id}: the recorder's writer ended")
        items.append(item)
        # Read after the append: a writer that went idle before it sees the item or is woken.
        if self.idle or self._urgent(item):
            self.arrived.set()

    def _urgent(self, item: WriterItem) -> bool:
        """Whether `item` ends the writer's gathering (a checkpoint, a candidate,
        the stop, the run's "optimizing" status: what `_batched` writes on its
        own). A saved state is written on its own only when a candidate waits for
        it, which follows a checkpoint, itself urgent: it does not wake the writer."""
        if item is None:
            return True
        name = item[0]
        if name == "on_iteration_start" and not self.iterating:
            self.iterating = True
            return True
        return name not in BATCHED and name != "on_state_saved"

    def _usage(self) -> UsageSnapshot:
        return self.recorder.meter.snapshot()

    def on_iteration_start(self, event: GepaEvent) -> None:
        # Records nobody took (a merge's subsample) go now; the writer forgets its own copies.
        self.adapter.forget_records()
        self._relay("on_iteration_start", event, frontier_usage=self._usage())

    def on_candidate_selected(self, event: GepaEvent) -> None:
        self._relay("on_candidate_selected", event)

    def on_evaluation_start(self, event: GepaEvent) -> None:
        self._relay("on_evaluation_start", event)

    def on_evaluation_end(self, event: GepaEvent) -> None:
        # A minibatch's records are needed for its trials only: their items are
        # made here, and the records (each with every check's result) and gepa's
        # outputs and traces are freed now, not after the writer's next batch.
        # Held that long they were most of what the garbage collector walked
        # (docs/benchmarks.md "bench/growth.py").
        relayed: CallbackEvent = {key: event[key] for key in EVALUATION_END_KEYS}
        relayed["frontier_trials"] = trial_items(self.adapter.take_all_records())
        self._hand("on_evaluation_end", relayed)

    def on_proposal_start(self, event: GepaEvent) -> None:
        # gepa builds the reflective dataset just before: the notes in it are this proposal's.
        self._relay("on_proposal_start", event, frontier_notes=self.adapter.take_notes_read())

    def on_proposal_end(self, event: GepaEvent) -> None:
        self._relay("on_proposal_end", event)

    def on_budget_updated(self, event: GepaEvent) -> None:
        limits = self.recorder.limits
        eta = None
        if limits is not None:
            limits.note_used(
                event["metric_calls_used"]
            )  # the adapter's guard checks the next batch against it now
            eta = limits.eta_seconds()
        self._relay("on_budget_updated", event, frontier_usage=self._usage(), frontier_eta=eta)

    def on_merge_attempted(self, event: GepaEvent) -> None:
        self._relay("on_merge_attempted", event)

    def on_valset_evaluated(self, event: GepaEvent) -> None:
        self.candidates_relayed = True  # a new candidate waits for the next saved state
        self._relay(
            "on_valset_evaluated",
            event,
            frontier_records=self.adapter.take_all_records(),
            frontier_usage=self._usage(),
        )

    def on_candidate_accepted(self, event: GepaEvent) -> None:
        self._relay("on_candidate_accepted", event, frontier_usage=self._usage())

    def on_candidate_rejected(self, event: GepaEvent) -> None:
        self._relay("on_candidate_rejected", event, frontier_usage=self._usage())

    def on_state_saved(self, event: GepaEvent) -> None:
        # It matters to the writer only when a candidate waits for it
        # (RunRecorder._flush_pending): one relayed since the last state relayed,
        # or one still waiting there once the writer took every state relayed
        # (its recording failed: it is tried again with this one).
        if self.candidates_relayed or (
            self.recorder.pending and self.states_recorded == self.states_relayed
        ):
            self.candidates_relayed = False
            self.states_relayed += 1
            self._relay("on_state_saved", event)

    def on_iteration_end(self, event: GepaEvent) -> None:
        errors = list(
            self.recorder.reflection_errors
        )  # appended on this thread by the runner's reflection wrapper
        self.recorder.reflection_errors.clear()
        limits = self.recorder.limits
        self._relay(
            "on_iteration_end",
            event,
            frontier_reflection_errors=errors,
            frontier_budget_stop=limits is not None and limits.reason is not None,
        )

    def on_optimization_end(self, event: GepaEvent) -> None:
        if self.save is not None:
            self.save.flush()  # gepa's final save, if it was skipped: ahead of the last candidates
        self._relay("on_optimization_end", event)

    def on_error(self, event: GepaEvent) -> None:
        self._relay("on_error", event)

    def relay_injection(self, name: str, payload: Any) -> None:
        """The runner's injection boundary (optimizer/runs/injections.py), in gepa's
        order with its callbacks: "candidate_injected" (an Injected) or
        "injection_refused" ((injection id, reason))."""
        if name == "candidate_injected":
            self.candidates_relayed = True  # waits for the next saved state, too
            self._relay("on_candidate_injected", {}, frontier_injected=payload)
        elif name == "injection_refused":
            self._relay("on_injection_refused", {}, frontier_refusal=payload)
        else:
            raise ValueError(f"not an injection event: {name!r}")

    def barrier(self, gepa_state: State | None = None) -> bool:
        """gepa's first stopper, called before each save of its state: from now on
        that save is handed to the writer, behind everything reported so far
        (nothing waits for it). Never stops the run itself; raises ClaimLost when
        this worker no longer holds it, and the error of a checkpoint the
        writer could not write."""
        if gepa_state is not None:
            self.save = save_through(
                gepa_state, self._checkpoint, adapter_state=self.adapter.carried_state
            )
        self.raise_failure()
        claim = self.recorder.claim
        if claim is not None and claim.lost.is_set():
            raise ClaimLost(f"run {self.recorder.run_id} is held by another worker")
        return False

    def _checkpoint(self, run_dir: str, data: bytes) -> None:
        if self.thread is None:
            self._write_checkpoint(run_dir, data)
        else:
            self._put((CHECKPOINT, (run_dir, data)))

    def raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure

    def close(self) -> None:
        """Let the writer finish what it was given (the last checkpoint included), then end it."""
        if self.thread is not None:
            self._put(None)
            self.thread.join()

    # -- on the writer thread --------------------------------------------------------

    def _work(self) -> None:
        try:
            with publishing_through(self.publisher):
                self._work_through_queue()
        finally:
            connection.close()

    def _work_through_queue(self) -> None:
        started = -math.inf  # when the last write started
        while True:
            items = [self._next()]
            gathered_until = started + GATHER_SECONDS
            while self._gathering(items[-1]) and len(items) < MAX_BATCH:
                if self.items:
                    items.append(self.items.popleft())
                    continue
                wait = gathered_until - time.monotonic()
                if wait <= 0:
                    break
                self.arrived.clear()
                if not self.items:
                    self.arrived.wait(wait)  # set early only by an item that must not wait
            self.taken.set()
            started = time.monotonic()
            self._write(items)
            if items[-1] is None:
                return

    def _next(self) -> WriterItem:
        """The first item of the next write: the oldest waiting, or the next to arrive."""
        while True:
            self.arrived.clear()
            if self.items:
                return self.items.popleft()
            self.idle = True
            if not self.items:  # the engine reads `idle` after its append: one of us sees the other
                self.arrived.wait()
            self.idle = False

    def _gathering(self, last: WriterItem) -> bool:
        """Whether to wait for more items after `last`: not after the stop, nor
        after an item written on its own (a checkpoint, a candidate, the run's
        "optimizing" status), which is written now, as it was before gathering."""
        return last is not None and self._batched(last[0])

    def _write(self, items: list[WriterItem]) -> None:
        """Write `items` in order: runs of BATCHED callbacks in one transaction
        each (one alone goes as before), the others one by one."""
        batch: list[tuple[str, CallbackEvent]] = []
        for item in items:
            if item is None:
                break
            name, event = item
            if self._batched(name):
                batch.append((name, event))  # type: ignore[arg-type]  # not a CHECKPOINT
                continue
            self._write_batch(batch)
            batch = []
            self._record(name, event)
        self._write_batch(batch)

    def _batched(self, name: str) -> bool:
        """Whether the callback `name`, next in gepa's order, may go in a batch:
        the first iteration's start announces the run's phase, and a saved
        state records the candidates it holds (each on its own)."""
        if name == "on_iteration_start":
            return self.recorder.optimizing
        if name == "on_state_saved":
            return not self.recorder.pending
        return name in BATCHED

    def _write_batch(self, batch: list[tuple[str, CallbackEvent]]) -> None:
        # SQLite has one writer for the whole database, and its shared-cache
        # readers (the tests') fail at once on a table another connection is
        # writing: there, each callback keeps its own short transaction.
        if len(batch) <= 1 or connection.vendor == "sqlite":
            for name, event in batch:
                self._record(name, event)
            return
        recorder = self.recorder
        try:
            with transaction.atomic():
                recorder.deferring = True  # their events go out together, at the end
                for name, event in batch:
                    self._record(name, event, batched=True)
                recorder.publish_waiting({})
        except Exception as error:
            # The progress row and the unpublished events are written again by the next commit.
            if not is_transient(error):
                log.exception("run %s: recording a batch failed", self.recorder.run_id)
            else:
                log.warning("run %s: a batch was rolled back: %s", self.recorder.run_id, error)
                connection.close()
        finally:
            recorder.deferring = False

    def _write_checkpoint(self, run_dir: str, data: bytes) -> None:
        claim = self.recorder.claim
        if claim is not None and claim.lost.is_set():
            return  # another worker holds the run: its checkpoint is not ours to overwrite
        try:
            write_checkpoint(run_dir, data)
        except Exception as error:
            log.exception("run %s: writing the checkpoint failed", self.recorder.run_id)
            self.failure = self.failure or error

    def _record(
        self, name: str, event: CallbackEvent | tuple[str, bytes], *, batched: bool = False
    ) -> None:
        if self.failure is not None:
            return  # the checkpoint was not written: nothing after it may reach the database (the run fails)
        if isinstance(event, tuple):  # name is CHECKPOINT
            self._write_checkpoint(*event)
            return
        try:
            getattr(self.recorder, name)(event)
        except Exception as error:  # as gepa does with a failing callback: say so, go on
            if batched and is_transient(error):
                raise  # the batch's connection is gone: _write_batch rolls it back
            log.exception("run %s: recording %s failed", self.recorder.run_id, name)
        finally:
            if name == "on_state_saved":  # done with it: what still waits, its recording left
                self.states_recorded += 1
