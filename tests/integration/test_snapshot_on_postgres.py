"""The run page's snapshot on PostgreSQL, where it reads the candidates' JSON
columns as text (decoded in one go) and the summary's numbers cast in SQL
without Django's converters, and the score chart's marks from their narrow
rows: the same values, of the same JSON types, as the model and the events hold."""

from __future__ import annotations

import json

import pytest
from django.core.serializers.json import DjangoJSONEncoder

from dashboard import selectors
from optimizer.models import Candidate, RunEvent
from optimizer.runs import event_types as ev
from tests.factories import recorded_run

pytestmark = pytest.mark.django_db


def test_the_snapshot_on_postgresql_holds_the_models_values_with_their_json_types(user):
    run = recorded_run(owner=user, candidates=9, val_tasks=4)
    Candidate.objects.filter(run=run, index=3).update(
        objective_scores={"policy": 0.5, "format": 1, "a b": 0.25}, parents=[0, 2]
    )
    Candidate.objects.filter(run=run, index=4).update(objective_scores={}, parents=[])

    snap = json.loads(
        json.dumps(selectors.run_snapshot(run), cls=DjangoJSONEncoder)
    )  # as the page receives it
    columns = snap["candidates"]
    for candidate in Candidate.objects.filter(run=run).order_by("index"):
        i = candidate.index
        summary = candidate.val_summary
        assert columns["parents"][i] == candidate.parents
        assert json.dumps(columns["objective_scores"][i], sort_keys=True) == json.dumps(
            candidate.objective_scores, sort_keys=True
        )
        assert (columns["val_score"][i], columns["on_front"][i], columns["cost"][i]) == (
            candidate.val_score,
            candidate.on_front,
            candidate.cost,
        )
        numbers = (
            columns["prompt_tokens"][i],
            columns["mean_output_tokens"][i],
            columns["mean_latency_ms"][i],
        )
        assert numbers == (
            summary["prompt_tokens"],
            summary["mean_output_tokens"],
            summary["mean_latency_ms"],
        )
        assert [type(n) for n in numbers] == [type(summary["prompt_tokens"]), float, float]
        assert columns["verdict_counts"][i] == [
            summary["verdicts"].get(v, 0) for v in selectors.VERDICT_ORDER
        ]

    rejected = [
        p
        for p in RunEvent.objects.filter(run=run, type=ev.PROPOSAL)
        .order_by("seq")
        .values_list("payload", flat=True)
        if p["accepted"] is False
    ]
    assert rejected  # the factory's run has some
    assert snap["rejected"] == {
        "metric_calls": [p["metric_calls"] for p in rejected],
        "parent": [p["parent"] for p in rejected],
        "before": [float(p["before"]) for p in rejected],
        "after": [float(p["after"]) for p in rejected],
        "minibatch_size": [len(p["minibatch"]) for p in rejected],
    }
    assert all(type(v) is float for v in snap["rejected"]["before"] + snap["rejected"]["after"])
