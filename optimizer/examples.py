"""The example verifiers and task sets in examples/, loaded by `manage.py
demo_setup` (`make demo`). Idempotent: loading twice changes nothing. The
examples are shared so every user can try them."""

from __future__ import annotations

from dashboard.lib.site_files import EXAMPLES_DIR
from optimizer.tasksets.services import taskset_import
from verifiers_app.services import spec_from_json, verifier_upsert

#: task set name → task file. QA rows carry their own verifier (correctness);
#: qa-answer-format grades the form of the answers.
TASK_SETS = {
    "Refund tickets": "tasks/refund-tickets.jsonl",
    "Facility requests": "tasks/facility-requests.jsonl",
    "QA basics": "tasks/qa-basics.yaml",
}
VERIFIERS = [
    "verifiers/refund-policy-quality.json",
    "verifiers/facility-extraction-quality.json",
    "verifiers/qa-answer-format.json",
]


def load_examples(*, user, stdout=None) -> None:
    """Create or update the example verifiers and task sets, owned by `user` and shared."""
    for relative in VERIFIERS:
        path = EXAMPLES_DIR / relative
        verifier, outcome = verifier_upsert(
            owner=user, spec=spec_from_json(path.read_bytes(), source=relative)
        )
        if not verifier.shared:
            verifier.shared = True
            verifier.save(update_fields=["shared"])
        if stdout is not None:
            stdout.write(f"{outcome} example verifier {verifier.slug}")
    for name, relative in TASK_SETS.items():
        path = EXAMPLES_DIR / relative
        task_set, counts = taskset_import(
            owner=user, name=name, filename=path.name, content=path.read_bytes(), shared=True
        )
        if stdout is not None:
            stdout.write(
                f"Example task set {task_set.name!r}: {counts['created']} created, "
                f"{counts['updated']} updated, {counts['unchanged']} unchanged"
            )
