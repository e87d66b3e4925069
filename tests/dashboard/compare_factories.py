"""A finished run as the runner leaves it: a task set with val and holdout tasks,
a seed and reflection children with lineage and growing prompts, one evaluation
per candidate × task with an engine-shaped result, and the event log.

Scores are drawn from a seeded RNG (children move from their parent's scores),
except that the last candidate always regresses on the first val task, so every
run has at least one regression to show. Tests read the numbers back from the DB;
nothing here is an expected value.
"""

from __future__ import annotations

import random

from optimizer import event_types
from optimizer.models import Candidate, Evaluation, Origin, Run, RunEvent, RunStatus, Task, TaskSet

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


def verdict_of(score: float) -> str:
    return "pass" if score >= 0.8 else "borderline" if score >= 0.6 else "fail"


def parent_of(index: int) -> int | None:
    """A chain with a sibling branch back to the seed every third candidate."""
    if index == 0:
        return None
    return index - 1 if index % 3 else 0


def _result(window_hit: bool, expectations: float) -> dict:
    score = (float(window_hit) + expectations) / 2
    checks = [
        {"id": "window", "type": "contains", "weight": 1, "required": False, "score": float(window_hit),
         "skipped": False, "reason": "" if window_hit else "output does not contain '30 days'"},
        {"id": "expectations", "type": "task_expectations", "weight": 1, "required": False, "score": expectations,
         "skipped": False, "reason": "" if expectations >= 1 else "Mention the order number: expected one of 'order #'"},
    ]
    hits = [f"{c['id']} ok" for c in checks if c["score"] >= 1]
    misses = [c["reason"] for c in checks if c["score"] < 1]
    return {
        "score": score, "verdict": verdict_of(score), "passed": score >= 1,
        "verifiers": [{"id": VERIFIER["id"], "name": VERIFIER["name"], "score": score, "weight": 1,
                       "passed": score >= 1, "checks": checks}],
        "hits": hits, "misses": misses, "feedback": "\n".join(misses),
    }


def make_compare_run(owner, *, candidates: int = 4, val_tasks: int = 6, holdout_tasks: int = 4,
                     name: str = "Refund policy run", seed: int = 7, task_set: TaskSet | None = None) -> Run:
    rng = random.Random(seed)
    if task_set is None:
        task_set = TaskSet.objects.create(owner=owner, name=f"{name} tasks")
        rows = [(f"val-{i:03d}", "val") for i in range(val_tasks)] + [(f"hold-{i:03d}", "holdout") for i in range(holdout_tasks)]
        Task.objects.bulk_create([
            Task(task_set=task_set, task_id=key, position=i, split=split,
                 input=f"Customer {i} asks about a refund for order #{1000 + i}.",
                 metadata={"expectations": {"mustMention": [{"anyOf": ["order #"], "message": "Mention the order number"}]}})
            for i, (key, split) in enumerate(rows)
        ])
    tasks = list(task_set.tasks.all())
    run = Run.objects.create(
        owner=owner, name=name, task_set=task_set, status=RunStatus.COMPLETED,
        config={"model": "demo-small", "provider": "demo", "budget": 200, "reflection_minibatch_size": 3, "seed": seed},
        verifier_specs=[VERIFIER], tasks_snapshot=[t.as_row() | {"split": t.split} for t in tasks],
        budget_total=200, budget_used=0,
    )
    texts: dict[int, str] = {}
    levels: dict[int, dict[str, tuple[bool, float]]] = {}
    evaluations, events, made = [], [], []
    for index in range(candidates):
        parent = parent_of(index)
        if parent is None:
            texts[index] = "You are a refund support agent. Answer the customer's question."
            levels[index] = {t.task_id: (rng.random() < 0.3, round(rng.uniform(0.0, 0.6), 2)) for t in tasks}
        else:
            texts[index] = f"{texts[parent]} {RULES[(index - 1) % len(RULES)]}"
            levels[index] = {
                key: (hit or rng.random() < 0.5, round(min(1.0, max(0.0, exp + rng.uniform(-0.1, 0.35))), 2))
                for key, (hit, exp) in levels[parent].items()
            }
        if index == candidates - 1 and index > 0:
            first_val = next(t.task_id for t in tasks if t.split == "val")
            levels[index][first_val] = (False, 0.0)
        val_scores = [sum(map(float, levels[index][t.task_id])) / 2 for t in tasks if t.split == "val"]
        cand = Candidate.objects.create(
            run=run, index=index, components={"system_prompt": texts[index]},
            parents=[] if parent is None else [parent],
            origin=Origin.SEED if parent is None else Origin.REFLECTION,
            iteration=index, metric_calls=index * 9 + len(val_scores),
            val_score=sum(val_scores) / len(val_scores),
            objective_scores={VERIFIER["id"]: sum(val_scores) / len(val_scores)},
            reflection="" if parent is None else f"Feedback kept saying: {RULES[(index - 1) % len(RULES)]} Added it as a rule.",
        )
        made.append(cand)
        for task in tasks:
            hit, exp = levels[index][task.task_id]
            result = _result(hit, exp)
            evaluations.append(Evaluation(
                candidate=cand, task=task, task_key=task.task_id, split=task.split,
                output=f"Reply of candidate {index} to {task.task_id}: {'refund within 30 days' if hit else 'we will see'}"
                       f"{' for order #' + str(task.position + 1000) if exp >= 1 else ''}. <script>alert('x')</script>",
                score=result["score"], verdict=result["verdict"], passed=result["passed"], result=result,
                feedback=result["feedback"], latency_ms=100 + task.position, tokens_in=50, tokens_out=20,
            ))
        events.append((event_types.CANDIDATE_NEW, {
            "index": index, "parents": cand.parents, "origin": cand.origin, "iteration": index,
            "metric_calls": cand.metric_calls, "val_score": cand.val_score,
        }))
    Evaluation.objects.bulk_create(evaluations)
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
