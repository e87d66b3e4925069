"""Helpers for tests that really execute runs (gepa driving the demo simulator):
a refund-policy verifier and task set whose verifier feedback is concrete
enough for the simulator to improve on, a launch config, model endpoints, and
`run_demo_with_holdout`. A recorded run built straight into the database comes
from tests/factories.py instead."""

from __future__ import annotations

from optimizer.models import Run
from optimizer.tasksets.models import Task, TaskSet
from verifiers_app.services import verifier_create

REFUND_SPEC = {
    "id": "refund-policy",
    "name": "Refund policy",
    "kind": "native",
    "checks": [
        {"id": "window", "type": "contains", "params": {"value": "30 days"}},
        {"id": "receipt", "type": "contains", "params": {"value": "receipt"}},
        {"id": "expectations", "type": "task_expectations"},
        {"id": "no-gift-card", "type": "not_contains", "params": {"value": "gift card"}},
    ],
}

REQUESTS = [
    (
        "shoes",
        "I bought running shoes 10 days ago and they hurt. Can I return them?",
        "store credit",
    ),
    ("laptop", "My laptop arrived with a cracked screen. What are my options?", "replacement"),
    ("jacket", "The jacket I ordered is the wrong size. How do I exchange it?", "exchange"),
    (
        "blender",
        "My blender stopped working after two weeks. Can I get my money back?",
        "full refund",
    ),
    ("gift", "I received a lamp as a gift and do not like it. Can I return it?", "store credit"),
    ("late", "My order is 3 weeks late. Can I cancel and get a refund?", "full refund"),
    ("sofa", "The sofa colour is different from the picture. Can I send it back?", "pickup"),
    ("phone", "My phone case broke on day one. What can you do?", "replacement"),
]


def refund_verifier(owner):
    return verifier_create(owner=owner, spec=REFUND_SPEC)


def refund_task_set(
    owner,
    *,
    name="Refunds",
    splits=("train", "train", "train", "train", "val", "val", "val", "val"),
):
    task_set = TaskSet.objects.create(owner=owner, name=name)
    for position, ((key, text, phrase), split) in enumerate(zip(REQUESTS, splits, strict=False)):
        Task.objects.create(
            task_set=task_set,
            task_id=key,
            position=position,
            input=text,
            metadata={
                "expectations": {
                    "mustMention": [{"text": phrase, "message": f"Offer the {phrase} option"}]
                }
            },
            split=split,
        )
    return task_set


def run_config(task_set, **overrides) -> dict:
    config = {
        "task_set_id": task_set.pk,
        "verifier_ids": ["refund-policy"],
        "seed_components": {"instructions": "You answer customer questions for a shop."},
        "budget": {"max_metric_calls": 120},
        "minibatch_size": 2,
        "concurrency": 4,
    }
    config.update(overrides)
    return config


def endpoint(name: str, lm: dict) -> str:
    """Register `lm` (an LMConfig dict) as an admin-managed model endpoint; returns its name.
    Only administrators may give an endpoint inline in a run's configuration."""
    from optimizer.models import ModelEndpoint

    fields = {
        "provider",
        "model",
        "base_url",
        "api_key_env",
        "price_in_per_million",
        "price_out_per_million",
    }
    ModelEndpoint.objects.create(
        name=name,
        **{k: v for k, v in lm.items() if k in fields},
        options={k: v for k, v in lm.items() if k not in fields},
    )
    return name


def run_demo_with_holdout(owner, *, task_set: TaskSet | None = None, **config) -> Run:
    """A run produced by the real runner: gepa driving the offline demo
    simulator on the refund task set, with a train, val and holdout split, so it
    ends by scoring the seed and the best candidate on the holdout tasks. The
    caller points `settings.RUNS_DIR` somewhere temporary and needs a
    transactional database. A second run on the same `task_set` may change the
    launch `config` (run_config keys)."""
    from optimizer.models import RunStatus
    from optimizer.runs.runner import execute_run
    from optimizer.services import run_launch

    if task_set is None:
        refund_verifier(owner)
        task_set = refund_task_set(owner, splits=["train", "val", "holdout"] * 3)
    run = run_launch(
        owner=owner, config=run_config(task_set, **({"splits": {"holdout": "holdout"}} | config))
    )
    status = execute_run(run.pk)
    run.refresh_from_db()
    assert status == RunStatus.COMPLETED, run.error
    return run


def act_at_iterations(monkeypatch, iterations, action) -> None:
    """Call `action(iteration)` while gepa reports the end of each of `iterations`
    (mid-run: what a user's click does between two of gepa's events)."""
    from dashboard.lib.db_retry import retry_db
    from optimizer.runs.recording_thread import RecorderThread

    ended = RecorderThread.on_iteration_end

    def hooked(self, event):
        ended(self, event)
        if event["iteration"] in iterations:
            retry_db(lambda: action(event["iteration"]), what="act")

    monkeypatch.setattr(RecorderThread, "on_iteration_end", hooked)


def run_outcome(run: Run) -> dict:
    """What a run found and spent, as a user compares two runs: its status, metric
    calls, model calls and tokens, and every candidate (texts, parents, val score,
    metric calls at birth)."""
    from optimizer.models import Candidate

    run = Run.objects.select_related("progress").get(pk=run.pk)
    return {
        "status": run.status,
        "budget_used": run.budget_used,
        "task_calls": run.usage["task"]["calls"],
        "reflection_calls": run.usage["reflection"]["calls"],
        "tokens": run.usage["total"]["tokens_in"] + run.usage["total"]["tokens_out"],
        "best_score": run.best_score,
        "candidates": [
            (c.index, c.components, c.parents, round(c.val_score, 9), c.metric_calls)
            for c in Candidate.objects.filter(run=run).order_by("index")
        ],
    }
