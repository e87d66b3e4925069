"""gepa's checkpoint without the per-iteration work that grows with the run.

With a run_dir, gepa 0.1.4 does three things per iteration that cost more the
longer the run gets (docs/gepa-notes.md §10 and §15), on the engine's thread:

- `GEPAState.save` pickles the state to `gepa_state.bin` (what resume needs),
  then rewrites `run_log.json` (the whole trace, `json.dump(indent=2)`) and
  `candidates.json` (every candidate's text) from scratch;
- `GEPAEngine._log_candidate_tree` rebuilds an HTML/DOT tree of the whole pool
  after every accepted candidate and writes `candidate_tree.html`.

Nothing of ours reads those three files: the database holds the same facts
(candidates, lineage, proposals, scores), recorded once as they happen. For a
run that carries a `LeanCheckpoint` among its callbacks, only `gepa_state.bin`
is written; any other gepa run in the process keeps gepa's behaviour.

`save_through` takes the writing of that file off the engine's thread: gepa's
`state.save` then pickles the state where it is called (a consistent snapshot)
and hands the bytes to a writer (the run's recorder thread, which writes them
after the rows of everything gepa reported before: optimizer/runs/recording_thread.py).

gepa saves before every iteration: with a model that answers in a few ms,
hundreds of times a second, each save a pickle on the engine's thread and a
file for the writer. (The pickle does not grow with the run: `LeanCheckpoint`
keeps only the current entry of gepa's per-iteration trace.) So a save is
taken only when the pool of candidates changed since the last one written (the recorder
announces a candidate only once a checkpoint holds it) or CHECKPOINT_SECONDS
have passed; `ThrottledSave.flush` takes the one skipped last, which the
recorder thread calls at the end of the optimization (right after gepa's final
save). A worker killed in between resumes from a checkpoint at most
CHECKPOINT_SECONDS older than its last iteration and runs those iterations
again, as it runs again the iteration that was in flight (docs/gepa-notes.md §6);
they only ever rejected proposals, which the recorder does not publish twice.

This reaches into private names of gepa 0.1.4 (`GEPAState._atomic_write_json`,
`_EXCLUDED_FROM_SERIALIZATION`, `_VALIDATION_SCHEMA_VERSION`,
`GEPAEngine._log_candidate_tree`) and trims `GEPAState.full_program_trace`, of
which 0.1.4 reads only the last entry; pyproject pins gepa==0.1.4, and the
tests in tests/optimizer/runs/test_checkpoint.py fail if a new version moves them.
"""

from __future__ import annotations

import copy
import os
import pickle
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gepa.core.callbacks import IterationStartEvent
from gepa.core.engine import GEPAEngine
from gepa.core.state import GEPAState

State = GEPAState[Any, Any]
Engine = GEPAEngine[Any, Any, Any, Any]
LogCandidateTree = Callable[[Engine, State], None]

# What gepa writes next to gepa_state.bin for people to read.
HUMAN_READABLE_FILES = ("run_log.json", "candidates.json", "candidate_tree.html")
CHECKPOINT_FILE = "gepa_state.bin"
#: A save that adds no candidate is skipped when the last one written is younger than this.
CHECKPOINT_SECONDS = 1.0


def _exclude(state: State, *names: str) -> None:
    """Leave these instance attributes of ours out of the state's pickle (and out of gepa's own save)."""
    # gepa declares it a ClassVar: this instance gets its own (set through __dict__, as the patches below).
    state.__dict__["_EXCLUDED_FROM_SERIALIZATION"] = state._EXCLUDED_FROM_SERIALIZATION | {
        *names,
        "_EXCLUDED_FROM_SERIALIZATION",
    }


def state_snapshot(state: State) -> bytes:
    """The bytes GEPAState.save (gepa 0.1.4, core/state.py) writes to gepa_state.bin, taken now."""
    serialized = {
        k: v for k, v in state.__dict__.items() if k not in state._EXCLUDED_FROM_SERIALIZATION
    }
    serialized["validation_schema_version"] = GEPAState._VALIDATION_SCHEMA_VERSION
    return pickle.dumps(serialized)


def write_checkpoint(run_dir: str | Path, data: bytes) -> None:
    """Replace gepa_state.bin with `data` atomically, as gepa does (a temporary file, then a rename)."""
    target = os.path.join(run_dir, CHECKPOINT_FILE)
    with open(target + ".tmp", "wb") as f:
        f.write(data)
    os.replace(target + ".tmp", target)


def checkpoint_metric_calls(run_dir: str | Path) -> int:
    """The metric calls gepa's checkpoint in `run_dir` counts: what a resume goes on
    from (0 without a checkpoint: a resume starts over)."""
    if not os.path.exists(os.path.join(run_dir, CHECKPOINT_FILE)):
        return 0
    return int(GEPAState.load(str(run_dir)).total_num_evals)


class ThrottledSave:
    """gepa's `state.save` for one state (see `save_through`)."""

    def __init__(
        self,
        state: State,
        write: Callable[[str, bytes], None],
        *,
        every: float,
        clock: Callable[[], float] = time.monotonic,
        adapter_state: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.state = state
        self.write = write
        self.every = every
        self.clock = clock
        self.adapter_state = adapter_state
        self.pool: int | None = None  # candidates in the last snapshot written
        self.written_at = 0.0
        self.skipped: str | None = None  # the run_dir of a save skipped since

    def __call__(self, run_dir: str | None, *, use_cloudpickle: bool = False) -> None:
        if run_dir is None:
            return
        if use_cloudpickle:  # not ours: gepa writes it itself
            self._read_adapter_state()
            GEPAState.save(self.state, run_dir, use_cloudpickle=True)
            return
        pool = len(self.state.program_candidates)
        if pool == self.pool and self.clock() - self.written_at < self.every:
            self.skipped = run_dir
            return
        self._snapshot(run_dir)

    def flush(self) -> None:
        """Take the save skipped last, if any (the state is as it was then: gepa's final save)."""
        if self.skipped is not None:
            self._snapshot(self.skipped)

    def _read_adapter_state(self) -> None:
        """What the adapter carries in the checkpoint (GEPAState.adapter_state), read
        now, for a save that is written: gepa 0.1.4 reads it before every save,
        skipped or not, from an adapter's `get_adapter_state`, which ours leaves to this."""
        if self.adapter_state is not None:
            self.state.adapter_state = dict(self.adapter_state())

    def _snapshot(self, run_dir: str) -> None:
        self._read_adapter_state()
        self.write(run_dir, state_snapshot(self.state))
        self.pool = len(self.state.program_candidates)
        self.written_at = self.clock()
        self.skipped = None


def save_through(
    state: State,
    write: Callable[[str, bytes], None],
    *,
    every: float = CHECKPOINT_SECONDS,
    adapter_state: Callable[[], dict[str, Any]] | None = None,
) -> ThrottledSave:
    """From now on `state.save(run_dir)` snapshots the state on the calling thread
    and passes (run_dir, bytes) to `write` instead of writing the file itself,
    skipping the saves that add no candidate within `every` seconds of the last
    one written. `adapter_state` gives what the adapter carries in the pickle
    (GEPAState.adapter_state), read for each save written. Idempotent (returns
    the state's ThrottledSave); the pickle stays loadable without this module."""
    save = state.__dict__.get("save")
    if isinstance(save, ThrottledSave):
        return save
    save = ThrottledSave(state, write, every=every, adapter_state=adapter_state)
    state.__dict__["save"] = save  # this instance's save, in front of GEPAState.save
    _exclude(state, "save")
    return save


def _skip_json(run_dir: str, filename: str, data: Any) -> None:
    """Stands in for GEPAState._atomic_write_json on a lean state: writes nothing."""


class LeanCheckpoint:
    """A gepa callback: from the first iteration on, this run's checkpoint is
    `gepa_state.bin` alone, the candidate tree is not rebuilt, and gepa's trace
    keeps the current iteration's entry only, so neither the pickle nor the
    worker's memory grows with the iterations (the database holds what the
    trace said: proposals, scores, lineage)."""

    skips_candidate_tree = True  # read by the wrapper of GEPAEngine._log_candidate_tree below

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)

    def on_iteration_start(self, event: IterationStartEvent) -> None:
        state = event["state"]
        # gepa appends an entry per iteration and reads only the last one (this
        # iteration's, appended just before): the rest was for run_log.json.
        del state.full_program_trace[:-1]
        if state.__dict__.get("_atomic_write_json") is _skip_json:
            return
        # The state's own attributes, left out of the pickle: a resumed run is
        # made lean again here, and the pickle stays loadable without this module.
        state.__dict__["_atomic_write_json"] = _skip_json
        _exclude(state, "_atomic_write_json")
        # The save before the first iteration (or a resume) wrote them once: they would only go stale.
        for name in HUMAN_READABLE_FILES:
            (self.run_dir / name).unlink(missing_ok=True)


def _wrap_candidate_tree(original: LogCandidateTree) -> LogCandidateTree:
    def _log_candidate_tree(self: Engine, state: State) -> None:
        if any(
            getattr(callback, "skips_candidate_tree", False) for callback in self.callbacks or ()
        ):
            return
        original(self, state)

    _log_candidate_tree.frontier_original = original  # type: ignore[attr-defined]  # the mark of our wrapper (below)
    return _log_candidate_tree


if not hasattr(GEPAEngine._log_candidate_tree, "frontier_original"):
    # The patch of gepa 0.1.4's private method the module docstring describes: mypy refuses
    # assigning to a method, and our wrapper is not generic as gepa's method is.
    GEPAEngine._log_candidate_tree = _wrap_candidate_tree(GEPAEngine._log_candidate_tree)  # type: ignore[method-assign,assignment]


class CarriedState:
    """What our side of a run must carry across a pause or a stop for the resumed
    run to go on exactly as the uninterrupted one would: gepa's random generator
    (0.1.4 does not persist it: docs/gepa-notes.md §6) and the minibatch sampler's
    place, the simulator's memory of its proposals, the early-stop counters.

    Each part is a (name, read, restore) pair. The snapshot is read for each
    checkpoint written (ThrottledSave, `adapter_state`) and kept in the pickle
    (GEPAState.adapter_state); after loading it, gepa 0.1.4 hands it back to the
    adapter's `set_adapter_state`, before the first iteration. (gepa would also
    read an adapter's `get_adapter_state` before every save, skipped or not:
    with a fast model, 50 µs an iteration on the engine's thread.) Parts read what is true
    between two iterations; a part a checkpoint does not hold (one written
    before it existed) is left as it starts."""

    def __init__(self) -> None:
        self._parts: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {}

    def add(self, name: str, read: Callable[[], Any], restore: Callable[[Any], None]) -> None:
        self._parts[name] = (read, restore)

    def snapshot(self) -> dict[str, Any]:
        return {name: read() for name, (read, _) in self._parts.items()}

    def restore(self, saved: dict[str, Any]) -> None:
        for name, (_, restore) in self._parts.items():
            if name in saved:
                restore(saved[name])


# The fields of gepa 0.1.4's EpochShuffledBatchSampler (strategies/batch_sampler.py)
# that say where it is in its epoch; its generator is carried apart (shared).
SAMPLER_FIELDS = (
    "shuffled_ids",
    "epoch",
    "id_freqs",
    "last_trainset_size",
    "_current_iteration",
    "_calls_in_iteration",
)


def carry_randomness(carried: CarriedState, rng: random.Random, sampler: object) -> None:
    """Carry the generator the run's candidate selector and minibatch sampler draw
    from (the runner builds both around it: gepa.optimize builds its own, which
    only its merge proposer then uses) and the sampler's place in its epoch."""
    carried.add("rng", rng.getstate, rng.setstate)

    def read() -> dict[str, Any]:
        return {name: copy.copy(getattr(sampler, name)) for name in SAMPLER_FIELDS}

    def restore(saved: dict[str, Any]) -> None:
        for name, value in saved.items():
            if name in SAMPLER_FIELDS:
                setattr(sampler, name, value)

    carried.add("minibatch_sampler", read, restore)
