"""A finished run as the runner leaves it: a task set with val and holdout tasks,
a seed and reflection children with lineage and growing prompts, one evaluation
per candidate × task scored by the real engine, and the event log.

Which of a task's expected phrases an output contains is drawn from a seeded RNG
(a child keeps its parent's and picks up more), and the output is then scored by
`verifiers_app.engine`, so results have the engine's exact shape and reasons.
The last candidate always answers the first val task badly, so every run has at
least one regression to show. Tests read the numbers back from the DB; nothing
here is an expected value.
"""

from __future__ import annotations

import random

from optimizer import event_types
from optimizer.config import DEMO_REFLECTION_LM, DEMO_TASK_LM, parse_run_config
from optimizer.val_summary import fill_val_summaries
from optimizer.models import Candidate, Evaluation, Origin, Run, RunEvent, RunStatus, Task, TaskSet
from verifiers_app.engine import compile_specs

VERIFIER = {
    "id": "refund-policy",
    "name": "Refund policy",
    "kind": "native",
    "checks": [
        {"id": "window", "type": "contains", "params": {"value": "30 days"}},
        {"id": "expectations", "type": "task_expectations"},
    ],
}
RULES = [
    "Always state the 30 days refund window.",
    "Quote the order number back to the customer.",
    "Never promise a refund before the item is returned.",
    "Answer in at most three sentences.",
    "Apologise once, not repeatedly.",
    "Close with the support email address.",
]


def parent_of(index: int) -> int | None:
    """A chain with a sibling branch back to the seed every third candidate."""
    if index == 0:
        return None
    return index - 1 if index % 3 else 0


def _phrases(position: int) -> list[str]:
    return ["30 days", f"order #{1000 + position}", "receipt", "original payment method"]


def _expectations(position: int) -> dict:
    messages = ["State the refund window", "Quote the order number", "Ask for the receipt", "Say where the money goes"]
    return {
        "mustMention": [{"anyOf": [p], "message": m} for p, m in zip(_phrases(position), messages)],
        "mustNotMention": [{"text": "guarantee", "message": "Never guarantee a refund"}],
    }


def _evolve(rng: random.Random, before: frozenset[str], phrases: list[str]) -> frozenset[str]:
    """A child keeps most of what its parent said, picks up each missing phrase
    half the time, and drops a forbidden "guarantee" half the time."""
    kept = {p for p in phrases if (rng.random() >= 0.1 if p in before else rng.random() < 0.5)}
    if "guarantee" in before and rng.random() < 0.5:
        kept.add("guarantee")
    return frozenset(kept)


def _output(index: int, task: Task, said: frozenset[str]) -> str:
    parts = [f"Reply of candidate {index} to {task.task_id}."]
    parts += [f"About the {p}." for p in _phrases(task.position) if p in said]
    if "guarantee" in said:
        parts.append("We guarantee it.")
    return " ".join(parts) + " <script>alert('x')</script>"


def make_compare_run(owner, *, candidates: int = 4, val_tasks: int = 6, holdout_tasks: int = 4,
                     name: str = "Refund policy run", seed: int = 7, task_set: TaskSet | None = None) -> Run:
    rng = random.Random(seed)
    if task_set is None:
        task_set = TaskSet.objects.create(owner=owner, name=f"{name} tasks")
        rows = [(f"val-{i:03d}", "val") for i in range(val_tasks)] + [(f"hold-{i:03d}", "holdout") for i in range(holdout_tasks)]
        Task.objects.bulk_create([
            Task(task_set=task_set, task_id=key, position=i, split=split,
                 input=f"Customer {i} asks about a refund for order #{1000 + i}.",
                 metadata={"expectations": _expectations(i)})
            for i, (key, split) in enumerate(rows)
        ])
    tasks = list(task_set.tasks.all())
    run = Run.objects.create(
        owner=owner, name=name, task_set=task_set, status=RunStatus.COMPLETED,
        # The frozen config a launch stores (validated by the same model the runner reads it with).
        config=parse_run_config({
            "name": name, "task_set_id": task_set.pk, "verifier_ids": [VERIFIER["id"]],
            "splits": {"holdout": "holdout"}, "seed_components": {"system_prompt": RULES[0]},
            "budget": {"max_metric_calls": 200}, "minibatch_size": 3, "seed": seed,
            # A launch resolves model names into LM configs before it stores them.
            "task_lm": DEMO_TASK_LM.model_dump(mode="json"), "reflection_lm": DEMO_REFLECTION_LM.model_dump(mode="json"),
        }).frozen(),
        verifier_specs=[VERIFIER], tasks_snapshot=[t.as_row() | {"split": t.split} for t in tasks],
        budget_total=200, budget_used=0,
    )
    scorer = compile_specs([VERIFIER])
    texts: dict[int, str] = {}
    said: dict[int, dict[str, frozenset[str]]] = {}
    evaluations, events, made = [], [], []
    first_val = next((t.task_id for t in tasks if t.split == "val"), None)
    for index in range(candidates):
        parent = parent_of(index)
        if parent is None:
            texts[index] = "You are a refund support agent. Answer the customer's question."
            said[index] = {
                t.task_id: frozenset(p for p in [*_phrases(t.position), "guarantee"] if rng.random() < 0.3) for t in tasks
            }
        else:
            texts[index] = f"{texts[parent]} {RULES[(index - 1) % len(RULES)]}"
            said[index] = {t.task_id: _evolve(rng, said[parent][t.task_id], _phrases(t.position)) for t in tasks}
        if index == candidates - 1 and index > 0 and first_val:
            said[index][first_val] = frozenset({"guarantee"})
        results = {t.task_id: scorer.score(_output(index, t, said[index][t.task_id]), task=t.as_row()).as_dict() for t in tasks}
        val_scores = [results[t.task_id]["score"] for t in tasks if t.split == "val"]
        val_score = sum(val_scores) / len(val_scores) if val_scores else None
        cand = Candidate.objects.create(
            run=run, index=index, components={"system_prompt": texts[index]},
            parents=[] if parent is None else [parent],
            origin=Origin.SEED if parent is None else Origin.REFLECTION,
            iteration=index, metric_calls=index * 9 + len(val_scores),
            val_score=val_score, objective_scores={VERIFIER["id"]: val_score},
            reflection="" if parent is None else f"Feedback kept saying: {RULES[(index - 1) % len(RULES)]} Added it as a rule.",
        )
        made.append(cand)
        for task in tasks:
            result = results[task.task_id]
            evaluations.append(Evaluation(
                candidate=cand, task=task, task_key=task.task_id, split=task.split,
                output=_output(index, task, said[index][task.task_id]),
                score=result["score"], verdict=result["verdict"], passed=result["passed"], result=result,
                feedback=result["feedback"], latency_ms=100 + task.position, tokens_in=50, tokens_out=20,
            ))
        events.append((event_types.CANDIDATE_NEW, {
            "index": index, "parents": cand.parents, "origin": cand.origin, "iteration": index,
            "metric_calls": cand.metric_calls, "val_score": cand.val_score,
        }))
    Evaluation.objects.bulk_create(evaluations)
    fill_val_summaries(c.pk for c in made)  # as the recorder stores them
    best = max(made, key=lambda c: (c.val_score, -c.index))
    events.append((event_types.RUN_FINISHED, {"status": "completed", "best_index": best.index, "best_score": best.val_score,
                                               "seed_score": made[0].val_score, "metric_calls": made[-1].metric_calls}))
    RunEvent.objects.bulk_create([RunEvent(run=run, seq=i, type=t, payload=d) for i, (t, d) in enumerate(events, start=1)])
    Run.objects.filter(pk=run.pk).update(
        best_candidate=best, best_score=best.val_score, seed_score=made[0].val_score,
        budget_used=made[-1].metric_calls, last_seq=len(events),
    )
    run.refresh_from_db()
    return run


def run_demo_with_holdout(owner, *, task_set: TaskSet | None = None, **config) -> Run:
    """A run produced by the real runner: gepa driving the offline demo
    simulator on the refund task set, with a train, val and holdout split, so it
    ends by scoring the seed and the best candidate on the holdout tasks. The
    caller points `settings.RUNS_DIR` somewhere temporary and needs a
    transactional database. A second run on the same `task_set` may change the
    launch `config` (run_helpers.run_config keys)."""
    from optimizer.runner import execute_run
    from optimizer.services import run_launch
    from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config

    if task_set is None:
        refund_verifier(owner)
        task_set = refund_task_set(owner, splits=["train", "val", "holdout"] * 3)
    run = run_launch(owner=owner, config=run_config(task_set, **({"splits": {"holdout": "holdout"}} | config)))
    status = execute_run(run.pk)
    run.refresh_from_db()
    assert status == RunStatus.COMPLETED, run.error
    return run
