"""Which task fields a verifier reads (docs/verifier-semantics.md), so an
import preview can say what will read each field it maps and a launch can warn
about task data that no chosen verifier reads.

- ``expected`` is read only by row verifiers: a spec of kind ``in_process``
  without an ``expected`` of its own, or a task's own ``verifier`` without one
  (the fn compares the output with it). No native check reads it.
- ``metadata.expectations`` is read by the ``task_expectations`` check, and
  ``metadata.expectedOutputSchema`` by ``expected_output_schema``.
- A verifier class gets the whole task as its ``target``; one that declares
  ``target_fields`` (a tuple of target keys, as ``format_only`` does: none)
  reads only those, one that does not may read any.
"""

from __future__ import annotations

from typing import Any

from . import classes, fns
from .json_types import JSONObject


def expected_readers() -> str:
    """Who reads a task's `expected`, in the words of docs/verifier-semantics.md."""
    return (
        "read only by row verifiers (a verifier of kind in_process, or a task's own "
        f"verifier, with fn {', '.join(fns.registered())}); no native check reads it"
    )


def task_field_readers() -> dict[str, str]:
    """Stored task field → what reads it when a run scores an output."""
    return {
        "input": "the task: the task model answers it; verifiers score the answer",
        "expected": expected_readers(),
        "metadata.expectations": "read by the task_expectations check (mustMention / mustNotMention)",
        "metadata.expectedOutputSchema": "read by the expected_output_schema check",
        "verifier": "the task's own row verifier: it scores every output of this task, "
        "beside the verifiers chosen at launch",
        "params": "read by row verifiers (their fn's params)",
        "metadata": "read by no check; a verifier class sees it in its target",
    }


def spec_reads_expected(spec: Any) -> bool:
    """Whether a verifier with this (normalized or raw) spec reads the task's `expected`."""
    if not isinstance(spec, dict):
        return False
    kind = spec.get("kind", "native")
    if kind == "native":
        return False
    if kind == "in_process":
        return "expected" not in spec
    cls = classes.get_verifier_class(kind) if isinstance(kind, str) else None
    fields = getattr(cls, "target_fields", None)
    return fields is None or "expected" in fields


def row_reads_own_expected(task: JSONObject) -> bool:
    """Whether a task row's own row verifier reads the row's `expected`."""
    row = task.get("verifier")
    return isinstance(row, dict) and "expected" not in row
