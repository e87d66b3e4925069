"""Replay a gepa run_dir's checkpoint (`gepa_state.bin`) as an external run.

A run made without the tracker (yesterday, on a cluster, crashed half-way)
still left gepa's checkpoint: every candidate with its lineage, its valset
scores and the metric calls at its discovery, and a trace of each iteration's
proposal (accepted or not, minibatch scores). We turn that into the tracker's
event stream and apply it through optimizer.external.services, so the replayed run is
drawn, compared and downloaded like any other.

The checkpoint is a pickle, and unpickling runs code named in the file. The
loader here only builds plain data (dicts, lists, numbers, strings, sets):
any other class named in the file becomes an inert placeholder, so a hostile
upload cannot execute anything. What gepa does not keep cannot be replayed:
rejected proposals' texts and the reflection's reasoning.
"""

from __future__ import annotations

import hashlib
import io
import math
import pickle
from typing import TYPE_CHECKING, Any

from optimizer.external.services import (
    MAX_BATCH_EVENTS,
    ExternalRunError,
    external_events_apply,
    external_run_open,
)
from optimizer.models import Run
from verifiers_app.engine.json_types import JSONObject

if TYPE_CHECKING:
    from django.contrib.auth.models import User

MAX_STATE_BYTES = 50 * 1024 * 1024
OUTPUT_CHARS = 4_000
_PLAIN = {
    ("builtins", name)
    for name in (
        "dict",
        "list",
        "set",
        "frozenset",
        "tuple",
        "int",
        "float",
        "str",
        "bytes",
        "bytearray",
        "bool",
        "complex",
    )
} | {("collections", "OrderedDict"), ("collections", "defaultdict")}


class _Opaque:
    """Stands in for any class the file names: accepts whatever the pickle
    passes it and does nothing with it."""

    def __new__(cls, *args: object, **kwargs: object) -> _Opaque:
        return object.__new__(cls)

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __setstate__(self, state: object) -> None:
        pass

    def __setitem__(self, key: object, value: object) -> None:
        pass

    def append(self, value: object) -> None:
        pass

    def extend(self, values: object) -> None:
        pass

    def __repr__(self) -> str:
        return "<object not replayed>"


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> type[object]:
        if (module, name) in _PLAIN:
            plain: type[object] = super().find_class(module, name)  # one of the builtin types above
            return plain
        return _Opaque

    def persistent_load(self, pid: object) -> _Opaque:
        return _Opaque()


def load_gepa_state(raw: bytes) -> JSONObject:
    """The checkpoint's fields as plain data, or ExternalRunError naming the problem."""
    if len(raw) > MAX_STATE_BYTES:
        raise ExternalRunError(
            [
                (
                    "file",
                    f"{len(raw)} bytes is more than the {MAX_STATE_BYTES // (1024 * 1024)} MB limit",
                )
            ]
        )
    try:
        data = _PlainUnpickler(io.BytesIO(raw)).load()
    except Exception as error:
        raise ExternalRunError(
            [("file", f"not a readable gepa_state.bin ({type(error).__name__}: {error})")]
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("program_candidates"), list):
        raise ExternalRunError([("file", "not a gepa checkpoint: no program_candidates in it")])
    return data


def _score(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ExternalRunError([(field, f"a score must be a finite number, not {value!r}")])
    return float(value)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = text.replace("\x00", "")
    return text if len(text) <= OUTPUT_CHARS else text[: OUTPUT_CHARS - 1] + "…"


def gepa_state_events(data: JSONObject) -> list[JSONObject]:
    """The tracker's event stream for a checkpoint (optimizer/external/services.py's event types)."""
    candidates = data["program_candidates"]
    subscores = data.get("prog_candidate_val_subscores") or []
    parents = data.get("parent_program_for_candidate") or []
    discovered = data.get("num_metric_calls_by_discovery") or []
    outputs: dict[tuple[int, Any], str] = {}
    for val_id, pairs in (data.get("best_outputs_valset") or {}).items():
        for pair in pairs if isinstance(pairs, list) else []:
            if isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], int):
                outputs[(pair[0], val_id)] = _text(pair[1])
    born: dict[int, int] = {}  # candidate → iteration that proposed it
    proposals: list[JSONObject] = []
    for entry in data.get("full_program_trace") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("i"), int):
            continue
        iteration = entry["i"] + 1
        new = entry.get("new_program_idx")
        if isinstance(new, int):
            born[new] = iteration
        before, after = entry.get("subsample_scores"), entry.get("new_subsample_scores")
        if "selected_program_candidate" not in entry or before is None or after is None:
            continue  # a merge, or an iteration that proposed nothing
        proposals.append(
            {
                "type": "proposal",
                "iteration": iteration,
                "parent": entry["selected_program_candidate"],
                "accepted": isinstance(new, int),
                "candidate": new if isinstance(new, int) else None,
                "before": sum(
                    _score(s, f"full_program_trace.{entry['i']}.subsample_scores") for s in before
                ),
                "after": sum(
                    _score(s, f"full_program_trace.{entry['i']}.new_subsample_scores")
                    for s in after
                ),
                "minibatch": [str(i) for i in entry.get("subsample_ids") or []],
                "texts": dict(candidates[new].items())
                if isinstance(new, int) and new < len(candidates)
                else {},
                "reasoning": ""
                if isinstance(new, int)
                else "(gepa's checkpoint keeps no text of a rejected proposal)",
            }
        )

    events: list[JSONObject] = [{"type": "status", "phase": "replaying gepa_state.bin"}]
    valset_size = len(subscores[0]) if subscores and isinstance(subscores[0], (dict, list)) else 0
    for index, components in enumerate(candidates):
        if not isinstance(components, dict):
            raise ExternalRunError(
                [(f"program_candidates.{index}", "must be a dict of component name → text")]
            )
        scores = subscores[index] if index < len(subscores) else {}
        scores = dict(enumerate(scores)) if isinstance(scores, list) else scores
        tasks: list[JSONObject] = [
            {
                "task_key": str(val_id),
                "score": _score(score, f"prog_candidate_val_subscores.{index}.{val_id}"),
                "output": outputs.get((index, val_id), ""),
            }
            for val_id, score in scores.items()
        ]
        lineage = [
            p for p in (parents[index] if index < len(parents) else []) if isinstance(p, int)
        ]
        calls = (
            discovered[index]
            if index < len(discovered) and isinstance(discovered[index], int)
            else 0
        )
        events.append(
            {
                "type": "candidate",
                "index": index,
                "components": {str(k): str(v) for k, v in components.items()},
                "parents": lineage,
                "origin": "seed" if not lineage else "merge" if len(lineage) > 1 else "reflection",
                "iteration": born.get(index, 0),
                "metric_calls": valset_size if index == 0 else calls,
                "val_score": sum(t["score"] for t in tasks) / len(tasks) if tasks else 0.0,
                "tasks": tasks,
            }
        )
    # Candidates first, then the proposals log: a proposal points at candidates by index.
    events.extend(proposals)
    total = data.get("total_num_evals")
    if isinstance(total, int):
        events.append({"type": "budget", "used": total, "total": total})
    events.append({"type": "finished", "status": "completed"})
    return events


def run_replay_gepa_state(*, owner: User, raw: bytes, name: str = "") -> Run:
    """Create (or find: the same file twice gives one run) the replayed run.
    All or nothing: a bad checkpoint leaves no run behind."""
    from django.db import transaction

    data = load_gepa_state(raw)
    events = gepa_state_events(data)
    key = "replay-" + hashlib.sha256(raw).hexdigest()[:40]
    with transaction.atomic():
        run, created = external_run_open(
            owner=owner,
            data={
                "key": key,
                "name": name
                or f"Replay of gepa_state.bin ({len(data['program_candidates'])} candidates)",
                "source": "replay",
                "host": "",
                "gepa_version": "",
            },
        )
        if created:
            for n, start in enumerate(range(0, len(events), MAX_BATCH_EVENTS), start=1):
                external_events_apply(
                    run=run, data={"seq": n, "events": events[start : start + MAX_BATCH_EVENTS]}
                )
    return Run.objects.get(pk=run.pk)
