"""A realistic recorded run, built straight into the database.

`build_run` writes what the runner's recorder writes for a finished (or
still running) GEPA run: a task set with val tasks, candidates with lineage
(reflections with one parent, merges with two), one Evaluation per candidate
and val task with the engine's result shape, and the RunEvents of
optimizer/event_types.py in their catalogue shapes. Scores are drawn from a
seeded RNG so every build is identical; each child tends to improve on its
parent, as in a real run.
"""

from __future__ import annotations

import random
from datetime import timedelta

from django.utils import timezone

from optimizer import event_types as ev
from optimizer.front import front_members
from optimizer.val_summary import fill_val_summaries
from optimizer.models import Candidate, Evaluation, Origin, Run, RunEvent, RunStatus, Split, Task, TaskSet

VERIFIER_IDS = ("policy", "format")


def _verdict(score: float) -> str:
    return "pass" if score >= 0.8 else "borderline" if score >= 0.6 else "fail"


def _result(score: float, per_verifier: dict[str, float]) -> dict:
    verifiers = [
        {
            "id": vid,
            "name": vid.title(),
            "score": s,
            "weight": 1,
            "passed": s >= 1.0,
            "checks": [
                {
                    "id": f"{vid}-mentions",
                    "type": "task_expectations",
                    "weight": 1,
                    "required": False,
                    "score": s,
                    "skipped": False,
                    "reason": "" if s >= 1.0 else f"{vid}: must mention the refund window (expected: '30 days')",
                }
            ],
        }
        for vid, s in per_verifier.items()
    ]
    misses = [c["reason"] for v in verifiers for c in v["checks"] if c["reason"]]
    return {
        "score": score,
        "verdict": _verdict(score),
        "passed": not misses,
        "verifiers": verifiers,
        "hits": [],
        "misses": misses,
        "feedback": "\n".join(misses),
    }


def build_run(
    *,
    owner,
    candidates: int = 6,
    val_tasks: int = 5,
    status: str = RunStatus.COMPLETED,
    seed: int = 7,
    name: str = "refund policy",
    component_text: str = "You are a support agent. Answer the customer's refund question.",
    task_prefix: str = "t",
) -> Run:
    rng = random.Random(seed)
    task_set = TaskSet.objects.create(owner=owner, name=f"{name} tasks {TaskSet.objects.count() + 1}")
    tasks = Task.objects.bulk_create(
        Task(
            task_set=task_set,
            task_id=f"{task_prefix}{i:03d}",
            position=i,
            input=f"Customer {i}: can I get a refund after {i % 40} days?",
            metadata={"expectations": {"mustMention": [{"text": "30 days", "message": "state the window"}]}},
            split=Split.VAL,
        )
        for i in range(val_tasks)
    )
    per_val = val_tasks
    total_budget = per_val * candidates * 3
    run = Run.objects.create(
        owner=owner,
        name=name,
        task_set=task_set,
        config={
            "task_lm": {"provider": "demo", "model": "sim"},
            "reflection_lm": {"provider": "demo", "model": "sim"},
            "budget": total_budget,
        },
        verifier_specs=[{"id": vid, "name": vid.title(), "kind": "native", "checks": []} for vid in VERIFIER_IDS],
        tasks_snapshot=[dict(t.as_row(), split=t.split) for t in tasks],
        status=status,
        phase="finished" if status in RunStatus.finished() else "reflecting",
        budget_total=total_budget,
        started_at=timezone.now(),
        finished_at=timezone.now() if status in RunStatus.finished() else None,
        # An active factory run looks alive from its first row (fresh heartbeat
        # far ahead), so a running server's orphan watcher never resumes it
        # while the factory is still writing its events (a seq clash).
        heartbeat_at=timezone.now() + timedelta(days=1) if status in RunStatus.active() else None,
    )

    events: list[tuple[str, dict]] = [(ev.RUN_STATUS, {"status": RunStatus.RUNNING, "phase": "seed evaluation"})]
    task_scores: dict[int, list[float]] = {}
    rows: list[Candidate] = []
    metric_calls = per_val
    for index in range(candidates):
        if index == 0:
            parents, origin, base = [], Origin.SEED, 0.35
        elif index >= 4 and rng.random() < 0.15:
            parents = sorted(rng.sample(range(index), 2))
            origin, base = Origin.MERGE, None
        else:
            parents, origin, base = [rng.randrange(index)], Origin.REFLECTION, None
        if base is None:
            parent_mean = sum(sum(task_scores[p]) / per_val for p in parents) / len(parents)
            base = min(0.97, parent_mean + rng.uniform(-0.02, 0.08))
        scores = [round(min(1.0, max(0.0, base + rng.uniform(-0.25, 0.25))), 3) for _ in range(per_val)]
        task_scores[index] = scores
        val_score = sum(scores) / per_val
        objective = {vid: round(min(1.0, max(0.0, val_score + rng.uniform(-0.1, 0.1))), 3) for vid in VERIFIER_IDS}
        text = f"{component_text}\nRule {index}: always state the 30 days refund window."
        if index:
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
                        "minibatch": [tasks[i % per_val].task_id for i in range(3)],
                        "texts": {"system_prompt": text},
                        "reasoning": "The feedback asks for the refund window.",
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
                reflection="" if index == 0 else "The feedback asks for the refund window.",
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
                    "task_scores": {t.task_id: s for t, s in zip(tasks, scores, strict=True)},
                    "verdicts": {t.task_id: _verdict(s) for t, s in zip(tasks, scores, strict=True)},
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
                        "minibatch": [tasks[0].task_id],
                        "texts": {"system_prompt": "A rejected rewrite."},
                        "reasoning": "",
                        "metric_calls": metric_calls + 3,
                    },
                )
            )
    Candidate.objects.bulk_create(rows)
    by_index = {c.index: c for c in Candidate.objects.filter(run=run)}

    best = max(task_scores, key=lambda i: (sum(task_scores[i]), -i))
    leaders = {
        t.task_id: [i for i in task_scores if task_scores[i][k] == max(s[k] for s in task_scores.values())]
        for k, t in enumerate(tasks)
    }
    members = front_members({i: dict(zip([t.task_id for t in tasks], scores, strict=True)) for i, scores in task_scores.items()})
    Candidate.objects.filter(run=run, index__in=members).update(on_front=True)

    evaluations = []
    for index, scores in task_scores.items():
        objective = by_index[index].objective_scores
        for task, score in zip(tasks, scores, strict=True):
            result = _result(score, objective)
            evaluations.append(
                Evaluation(
                    candidate=by_index[index],
                    task=task,
                    task_key=task.task_id,
                    split=Split.VAL,
                    output=f"Refunds are possible within 30 days (candidate {index}, {task.task_id}).",
                    score=score,
                    verdict=result["verdict"],
                    passed=result["passed"],
                    result=result,
                    feedback=result["feedback"],
                    latency_ms=10 + rng.random() * 5,
                    tokens_in=60,
                    tokens_out=30 + index % 20,
                )
            )
    Evaluation.objects.bulk_create(evaluations, batch_size=2000)
    fill_val_summaries(c.pk for c in by_index.values())  # as the recorder stores them

    # front.updated deltas as the recorder sends them: one per candidate, in order.
    keys = [t.task_id for t in tasks]
    pool: dict[int, dict[str, float]] = {}
    top: dict[str, float] = {}
    on_front: set[int] = set()
    for index in sorted(task_scores):
        scores = dict(zip(keys, task_scores[index], strict=True))
        took = [k for k, score in scores.items() if k not in top or score > top[k]]
        joined = [k for k, score in scores.items() if k in top and score == top[k]]
        top.update({k: scores[k] for k in took})
        pool[index] = scores
        now = set(front_members(pool))
        leader = max(pool, key=lambda i: (sum(pool[i].values()), -i))
        events.append((ev.FRONT_UPDATED, {
            "index": index, "took": took, "joined": joined, "added": sorted(now - on_front),
            "removed": sorted(on_front - now), "best_index": leader, "best_score": by_index[leader].val_score,
        }))
        on_front = now
    events.append(
        (
            ev.TRIALS,
            {
                "candidate": best,
                "split": "val",
                "items": [
                    {"task_key": t.task_id, "score": s, "verdict": _verdict(s), "output": "Refunds within 30 days.", "reasons": []}
                    for t, s in zip(tasks, task_scores[best], strict=True)
                ],
            },
        )
    )
    events.append((ev.ERROR, {"where": "reflection", "message": "reflection produced no text", "iteration": 2}))
    if status in RunStatus.finished():
        events.append(
            (
                ev.RUN_FINISHED,
                {
                    "status": status,
                    "best_index": best,
                    "best_score": by_index[best].val_score,
                    "seed_score": by_index[0].val_score,
                    "metric_calls": metric_calls,
                    "cost": 0.0,
                    "stop_reason": "",
                },
            )
        )
    RunEvent.objects.bulk_create(
        RunEvent(run=run, seq=seq, type=type_, payload=data) for seq, (type_, data) in enumerate(events, start=1)
    )
    Run.objects.filter(pk=run.pk).update(
        last_seq=len(events),
        budget_used=metric_calls,
        seed_score=by_index[0].val_score,
        best_score=by_index[best].val_score,
        best_candidate=by_index[best],
    )
    run.refresh_from_db()
    return run
