"""The one builder of recorded runs for tests: `recorded_run` writes straight
into the database what the runner's recorder leaves for a GEPA run of a given
shape — a task set (val tasks, optionally holdout tasks), candidates with
lineage (reflections with one parent, merges with two), one Evaluation per
candidate × task, and the RunEvents of optimizer/runs/event_types.py in their
catalogue shapes (checked here as they are written; `front.updated` events are
deltas, one per candidate, as the recorder sends them).

Outputs are scored by the real engine (`verifiers_app.engine`), so results
have its exact shape and reasons. Which of a task's expected phrases an output
contains is drawn from a seeded RNG — a child keeps most of its parent's and
picks up more, so runs tend to improve — and the last candidate always answers
the first val task badly, so every run has a regression to show. Every build
with the same arguments is identical. Tests read the numbers back from the DB;
nothing here is an expected value.

Really executing a run (gepa driving the demo simulator) is a different thing:
see tests/optimizer/run_helpers.py.
"""

from __future__ import annotations

import random
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from optimizer.config import DEMO_REFLECTION_LM, DEMO_TASK_LM, parse_run_config
from optimizer.front import front_members
from optimizer.models import (
    Candidate,
    Evaluation,
    Origin,
    Run,
    RunEvent,
    RunStatus,
    run_progress,
    store_rejected_marks,
)
from optimizer.runs import event_types as ev
from optimizer.tasksets.models import Split, Task, TaskSet
from optimizer.val_summary import fill_val_summaries
from verifiers_app.engine import compile_specs

# The default verifiers: one reads each task's expectations, one checks the window.
POLICY = {
    "id": "policy",
    "name": "Policy",
    "kind": "native",
    "checks": [{"id": "policy-mentions", "type": "task_expectations"}],
}
FORMAT = {
    "id": "format",
    "name": "Format",
    "kind": "native",
    "checks": [{"id": "format-window", "type": "contains", "params": {"value": "30 days"}}],
}
# Another verifier to re-score a run with: the refund window alone changes the ranking.
WINDOW_ONLY = {
    "id": "window-only",
    "name": "Window only",
    "kind": "native",
    "checks": [{"id": "window", "type": "regex", "params": {"pattern": r"\b30 days\b"}}],
}
# A single verifier doing both, for runs that must share a verifier id with a launchable one.
REFUND_POLICY = {
    "id": "refund-policy",
    "name": "Refund policy",
    "kind": "native",
    "checks": [
        {"id": "window", "type": "contains", "params": {"value": "30 days"}},
        {"id": "expectations", "type": "task_expectations"},
    ],
}
SEED_TEXT = "You are a refund support agent. Answer the customer's question."
RULES = [
    "Always state the 30 days refund window.",
    "Quote the order number back to the customer.",
    "Never promise a refund before the item is returned.",
    "Answer in at most three sentences.",
    "Apologise once, not repeatedly.",
    "Close with the support email address.",
]


def parents_of(index: int) -> list[int]:
    """A chain with a sibling branch back to the seed every third candidate, and
    a merge of two earlier candidates every sixth (from index 5)."""
    if index == 0:
        return []
    if index % 6 == 5:
        return [index - 4, index - 1]
    return [index - 1 if index % 3 else 0]


def _phrases(position: int) -> list[str]:
    return ["30 days", f"order #{1000 + position}", "receipt", "original payment method"]


def _expectations(position: int) -> dict:
    messages = [
        "State the refund window",
        "Quote the order number",
        "Ask for the receipt",
        "Say where the money goes",
    ]
    return {
        "mustMention": [{"anyOf": [p], "message": m} for p, m in zip(_phrases(position), messages)],
        "mustNotMention": [{"text": "guarantee", "message": "Never guarantee a refund"}],
    }


def _evolve(
    rng: random.Random, before: frozenset[str], phrases: list[str], *, keep_all: bool = False
) -> frozenset[str]:
    """A child keeps most (`keep_all`: all) of what its parent said, picks up
    each missing phrase half the time, and drops a forbidden "guarantee" half
    the time."""
    kept = {
        p
        for p in phrases
        if (keep_all or rng.random() >= 0.1 if p in before else rng.random() < 0.5)
    }
    if "guarantee" in before and rng.random() < 0.5:
        kept.add("guarantee")
    return frozenset(kept)


def _output(index: int, task: Task, said: frozenset[str]) -> str:
    parts = [f"Reply of candidate {index} to {task.task_id}."]
    parts += [f"About the {p}." for p in _phrases(task.position) if p in said]
    if "guarantee" in said:
        parts.append("We guarantee it.")
    return " ".join(parts) + " <script>alert('x')</script>"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def recorded_run(
    owner,
    *,
    candidates: int = 6,
    val_tasks: int = 5,
    holdout_tasks: int = 0,
    status: str = RunStatus.COMPLETED,
    seed: int = 7,
    name: str = "refund policy",
    task_set: TaskSet | None = None,
    task_prefix: str = "t",
    component_text: str = SEED_TEXT,
    verifiers: list[dict] | tuple[dict, ...] = (POLICY, FORMAT),
    climbing: bool = False,
) -> Run:
    """A run of `candidates` × (`val_tasks` + `holdout_tasks`) in `status`
    (a finished one has run.finished and, with holdout tasks, holdout.scored;
    an active one looks alive). Val tasks are `<task_prefix>000`…, holdout
    tasks `hold-000`…; an existing `task_set` is used as it is (a second run
    on it can be compared with the first). `climbing`: one chain of
    reflections, each keeping everything its parent said (a steady climb, so
    later candidates dominate earlier ones and the front stays small)."""
    rng = random.Random(seed)
    if task_set is None:
        task_set = TaskSet.objects.create(
            owner=owner, name=f"{name} tasks {TaskSet.objects.count() + 1}"
        )
        keys = [(f"{task_prefix}{i:03d}", Split.VAL) for i in range(val_tasks)]
        keys += [(f"hold-{i:03d}", Split.HOLDOUT) for i in range(holdout_tasks)]
        Task.objects.bulk_create(
            [
                Task(
                    task_set=task_set,
                    task_id=key,
                    position=i,
                    split=split,
                    input=f"Customer {i} asks about a refund for order #{1000 + i}.",
                    metadata={"expectations": _expectations(i)},
                )
                for i, (key, split) in enumerate(keys)
            ]
        )
    tasks = list(task_set.tasks.order_by("position"))
    val = [t for t in tasks if t.split == Split.VAL]
    holdout = [t for t in tasks if t.split == Split.HOLDOUT]
    per_val = len(val)
    total_budget = max(1, per_val * candidates * 3)
    finished = status in RunStatus.finished()
    verifiers = list(verifiers)
    # An active factory run looks alive from its first row (fresh heartbeat
    # far ahead, committed with the run), so a running server's orphan watcher
    # never resumes it while the factory is still writing its events (a seq clash).
    with transaction.atomic():
        run = Run.objects.create(
            owner=owner,
            name=name,
            task_set=task_set,
            status=status,
            # The frozen config a launch stores (validated by the model the runner reads it with).
            config=parse_run_config(
                {
                    "name": name,
                    "task_set_id": task_set.pk,
                    "verifier_ids": [v["id"] for v in verifiers],
                    "splits": {"holdout": "holdout"} if holdout else {},
                    "seed_components": {"system_prompt": component_text},
                    "budget": {"max_metric_calls": total_budget},
                    "minibatch_size": 3,
                    "seed": seed,
                    "task_lm": DEMO_TASK_LM.model_dump(mode="json"),
                    "reflection_lm": DEMO_REFLECTION_LM.model_dump(mode="json"),
                }
            ).frozen(),
            verifier_specs=verifiers,
            tasks_snapshot=[t.as_row() | {"split": t.split} for t in tasks],
            phase="finished" if finished else "reflecting",
            budget_total=total_budget,
            started_at=timezone.now(),
            finished_at=timezone.now() if finished else None,
        )
        if status in RunStatus.active():
            run_progress(run.pk).update(heartbeat_at=timezone.now() + timedelta(days=1))
    scorer = compile_specs(verifiers)

    events: list[tuple[str, dict]] = [
        (ev.RUN_STATUS, {"status": RunStatus.RUNNING, "phase": "seed evaluation"})
    ]
    texts: dict[int, str] = {}
    said: dict[int, dict[str, frozenset[str]]] = {}
    results: dict[int, dict[str, dict]] = {}
    rows: list[Candidate] = []
    metric_calls = per_val
    first_val = val[0].task_id if val else None
    for index in range(candidates):
        parents = ([index - 1] if index else []) if climbing else parents_of(index)
        if not parents:
            origin, texts[index] = Origin.SEED, component_text
            said[index] = {
                t.task_id: frozenset(
                    p for p in [*_phrases(t.position), "guarantee"] if rng.random() < 0.3
                )
                for t in tasks
            }
        else:
            origin = Origin.MERGE if len(parents) == 2 else Origin.REFLECTION
            rule = RULES[(index - 1) % len(RULES)]
            texts[index] = f"{texts[parents[0]]} {rule}"
            said[index] = {
                t.task_id: _evolve(
                    rng,
                    frozenset().union(*(said[p][t.task_id] for p in parents)),
                    _phrases(t.position),
                    keep_all=climbing,
                )
                for t in tasks
            }
        if index == candidates - 1 and index > 0 and first_val:
            said[index][first_val] = frozenset({"guarantee"})
        results[index] = {
            t.task_id: scorer.score(
                _output(index, t, said[index][t.task_id]), task=t.as_row()
            ).as_dict()
            for t in tasks
        }
        val_scores = {t.task_id: results[index][t.task_id]["score"] for t in val}
        val_score = _mean(list(val_scores.values())) or 0.0
        objective = {
            v["id"]: round(
                _mean(
                    [
                        next(
                            r["score"]
                            for r in results[index][t.task_id]["verifiers"]
                            if r["id"] == v["id"]
                        )
                        for t in val
                    ]
                )
                or 0.0,
                3,
            )
            for v in verifiers
        }
        text = texts[index]
        reflection = (
            ""
            if not parents
            else f"Feedback kept saying: {RULES[(index - 1) % len(RULES)]} Added it as a rule."
        )
        if parents:
            metric_calls += 3 + per_val
            events.append(
                (
                    ev.PROPOSAL,
                    {
                        "iteration": index,
                        "parent": parents[0],
                        "components": ["system_prompt"],
                        "accepted": True,
                        "candidate": index,
                        "before": 1.2,
                        "after": 2.1,
                        "minibatch": [val[i % per_val].task_id for i in range(3)] if val else [],
                        "texts": {"system_prompt": text},
                        "reasoning": reflection,
                        "metric_calls": metric_calls,
                    },
                )
            )
        rows.append(
            Candidate(
                run=run,
                index=index,
                components={"system_prompt": text},
                parents=parents,
                origin=origin,
                iteration=index,
                metric_calls=metric_calls,
                val_score=val_score,
                objective_scores=objective,
                reflection=reflection,
            )
        )
        events.append(
            (
                ev.CANDIDATE_NEW,
                {
                    "index": index,
                    "parents": parents,
                    "origin": origin,
                    "iteration": index,
                    "metric_calls": metric_calls,
                    "val_score": val_score,
                    "objective_scores": objective,
                    "task_scores": val_scores,
                    "verdicts": {t.task_id: results[index][t.task_id]["verdict"] for t in val},
                    "prompt_chars": len(text),
                    "prompt_tokens": len(text) // 4,
                    "mean_output_tokens": 40.0,
                    "mean_latency_ms": 12.0,
                    "components": {"system_prompt": text},
                    "usage": {},
                    "cost": 0.0,
                },
            )
        )
        events.append((ev.RUN_BUDGET, {"used": metric_calls, "total": total_budget}))
        if index % 3 == 2:
            events.append(
                (
                    ev.PROPOSAL,
                    {
                        "iteration": index,
                        "parent": index,
                        "components": ["system_prompt"],
                        "accepted": False,
                        "candidate": None,
                        "before": 2.0,
                        "after": 1.4,
                        "minibatch": [val[0].task_id] if val else [],
                        "texts": {"system_prompt": "A rejected rewrite."},
                        "reasoning": "",
                        "metric_calls": metric_calls + 3,
                    },
                )
            )
    Candidate.objects.bulk_create(rows)
    by_index = {c.index: c for c in Candidate.objects.filter(run=run)}
    val_scores_of = {i: {t.task_id: results[i][t.task_id]["score"] for t in val} for i in results}
    best = max(by_index, key=lambda i: (by_index[i].val_score, -i)) if by_index else None
    members = front_members(val_scores_of)
    Candidate.objects.filter(run=run, index__in=members).update(on_front=True)

    Evaluation.objects.bulk_create(
        [
            Evaluation(
                candidate=by_index[index],
                run=run,
                task=task,
                task_key=task.task_id,
                split=task.split,
                output=_output(index, task, said[index][task.task_id]),
                score=result["score"],
                verdict=result["verdict"],
                passed=result["passed"],
                result=result,
                feedback=result["feedback"],
                latency_ms=100 + task.position + rng.random() * 5,
                tokens_in=60,
                tokens_out=30 + index % 20,
            )
            for index in results
            for task in tasks
            for result in [results[index][task.task_id]]
        ],
        batch_size=2000,
    )
    fill_val_summaries(
        c.pk for c in by_index.values()
    )  # what the run page reads, as the recorder stores it

    # front.updated deltas as the recorder sends them: one per candidate, in order.
    pool: dict[int, dict[str, float]] = {}
    top: dict[str, float] = {}
    on_front: set[int] = set()
    for index in sorted(val_scores_of):
        scores = val_scores_of[index]
        took = [k for k, score in scores.items() if k not in top or score > top[k]]
        joined = [k for k, score in scores.items() if k in top and score == top[k]]
        top.update({k: scores[k] for k in took})
        pool[index] = scores
        now = set(front_members(pool))
        leader = max(pool, key=lambda i: (by_index[i].val_score, -i))
        events.append(
            (
                ev.FRONT_UPDATED,
                {
                    "index": index,
                    "took": took,
                    "joined": joined,
                    "added": sorted(now - on_front),
                    "removed": sorted(on_front - now),
                    "best_index": leader,
                    "best_score": by_index[leader].val_score,
                },
            )
        )
        on_front = now
    if best is not None and val:
        events.append(
            (
                ev.TRIALS,
                {
                    "candidate": best,
                    "split": "val",
                    "items": [
                        {
                            "task_key": t.task_id,
                            "score": results[best][t.task_id]["score"],
                            "verdict": results[best][t.task_id]["verdict"],
                            "output": _output(best, t, said[best][t.task_id]),
                            "reasons": results[best][t.task_id]["misses"][:5],
                            "passed": results[best][t.task_id]["passed"],
                        }
                        for t in val
                    ],
                },
            )
        )
    events.append(
        (
            ev.ERROR,
            {"where": "reflection", "message": "reflection produced no text", "iteration": 2},
        )
    )
    if finished and holdout and best is not None:
        events.append(
            (
                ev.HOLDOUT_SCORED,
                {
                    "seed_score": _mean([results[0][t.task_id]["score"] for t in holdout]),
                    "best_index": best,
                    "best_score": _mean([results[best][t.task_id]["score"] for t in holdout]),
                    "tasks": len(holdout),
                },
            )
        )
    if finished:
        events.append(
            (
                ev.RUN_FINISHED,
                {
                    "status": status,
                    "best_index": best,
                    "best_score": by_index[best].val_score if best is not None else None,
                    "seed_score": by_index[0].val_score if by_index else None,
                    "metric_calls": metric_calls,
                    "cost": 0.0,
                    "stop_reason": "",
                },
            )
        )
    for type_, data in events:
        ev.validate_payload(type_, data)
    store_rejected_marks(
        RunEvent.objects.bulk_create(
            [
                RunEvent(run=run, seq=seq, type=type_, payload=data)
                for seq, (type_, data) in enumerate(events, start=1)
            ]
        )
    )  # as optimizer.runs.events stores them with each event batch
    run_progress(run.pk).update(last_seq=len(events), budget_used=metric_calls)
    Run.objects.filter(pk=run.pk).update(
        seed_score=by_index[0].val_score if by_index else None,
        best_score=by_index[best].val_score if best is not None else None,
        best_candidate=by_index.get(best),
    )
    run.refresh_from_db()
    return run
