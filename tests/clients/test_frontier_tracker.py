"""frontier_tracker on its own: never in gepa's way when the server is unreachable
(the live server cases are in tests/e2e/test_external_run.py; that it imports no
server dependency, in a fresh process: tests/integration/test_frontier_tracker_import.py)."""

from __future__ import annotations

import logging
import sys
from types import SimpleNamespace

import pytest

from frontier_tracker import MAX_BATCH_EVENTS, FrontierTracker
from tests.optimizer.fake_openai import free_port

# Events one gepa_iteration queues at least: trials, budget, candidate, proposal.
EVENTS_PER_ITERATION = 4


def gepa_iteration(tracker: FrontierTracker, iteration: int) -> None:
    """The callbacks of one accepted gepa iteration, with the payloads gepa 0.1.4 sends."""
    tracker.on_iteration_start({"iteration": iteration, "state": object(), "trainset_loader": None})
    tracker.on_candidate_selected(
        {"iteration": iteration, "candidate_idx": 0, "candidate": {"p": "x"}, "score": 0.0}
    )
    tracker.on_minibatch_sampled(
        {"iteration": iteration, "minibatch_ids": [3, 1], "trainset_size": 4}
    )
    tracker.on_evaluation_start(
        {
            "iteration": iteration,
            "candidate_idx": 0,
            "batch_size": 2,
            "capture_traces": True,
            "parent_ids": [0],
            "inputs": [{"task_id": "a"}, {"task_id": "b"}],
            "is_seed_candidate": False,
        }
    )
    tracker.on_evaluation_end(
        {
            "iteration": iteration,
            "candidate_idx": 0,
            "scores": [0.0, float("nan")],
            "has_trajectories": True,
            "parent_ids": [0],
            "outputs": ["no", object()],
            "trajectories": None,
            "objective_scores": None,
            "is_seed_candidate": False,
        }
    )
    tracker.on_budget_updated(
        {
            "iteration": iteration,
            "metric_calls_used": 2 * iteration,
            "metric_calls_delta": 2,
            "metric_calls_remaining": 10,
        }
    )
    tracker.on_valset_evaluated(
        {
            "iteration": iteration,
            "candidate_idx": iteration,
            "candidate": {"p": "y" * 300_000},
            "scores_by_val_id": {0: 1.0},
            "average_score": 1.0,
            "num_examples_evaluated": 1,
            "total_valset_size": 1,
            "parent_ids": [0],
            "is_best_program": True,
            "outputs_by_val_id": None,
        }
    )
    tracker.on_candidate_accepted(
        {
            "iteration": iteration,
            "new_candidate_idx": iteration,
            "new_score": 1.0,
            "parent_ids": [0],
        }
    )
    tracker.on_iteration_end({"iteration": iteration, "state": object(), "proposal_accepted": True})


def test_callbacks_never_raise_or_wait_while_the_server_is_unreachable(caplog):
    tracker = FrontierTracker(
        f"http://127.0.0.1:{free_port()}", "ft_nobody", batch_seconds=0.05, max_backoff=0.2
    )
    caplog.set_level(logging.WARNING, logger="frontier_tracker")
    for iteration in range(1, 51):
        gepa_iteration(tracker, iteration)
    tracker.on_candidate_rejected(
        {"iteration": 51}
    )  # malformed: gepa would log it; we swallow and log it ourselves
    assert tracker.stopper(None) is False  # answered from memory, no request
    assert (
        tracker._sender.is_alive() and tracker.run_id is None
    )  # still trying to reach the server, in the background
    assert tracker.close(timeout=0.5) is False  # what could not be sent is reported, not raised
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert (
        "on_candidate_rejected failed" in messages
        and "retrying" in messages
        and "could not deliver every event" in messages
    )


def test_a_full_queue_drops_and_counts_events_instead_of_blocking_gepa():
    tracker = FrontierTracker(
        f"http://127.0.0.1:{free_port()}",
        "ft_nobody",
        queue_size=20,
        batch_seconds=0.01,
        max_backoff=1,
    )
    # The sender takes up to MAX_BATCH_EVENTS into its batch before it tries to
    # send; nothing is accepted, so past that batch and the queue every event
    # must be dropped (fewer events raced the sender: it could take them all).
    iterations = (MAX_BATCH_EVENTS + 20) // EVENTS_PER_ITERATION + 20
    for iteration in range(1, iterations + 1):
        gepa_iteration(tracker, iteration)
    assert tracker.dropped >= iterations * EVENTS_PER_ITERATION - MAX_BATCH_EVENTS - 20 > 0
    tracker.close(timeout=0.1)


@pytest.mark.parametrize(
    "value, expected",
    [("x" * 10, "x" * 10), ("y" * 300_000, "y" * 199_999 + "…"), ("a\x00b", "ab")],
)
def test_texts_are_clipped_to_what_the_server_accepts(value, expected):
    from frontier_tracker import MAX_TEXT, _clip

    assert _clip(value, MAX_TEXT) == expected


def test_litellm_calls_tokens_and_cost_reach_the_run_with_the_budget(monkeypatch):
    """litellm itself is not installed here: a stand-in module with litellm's
    `success_callback` list, called the way litellm calls a function callback."""
    litellm = SimpleNamespace(success_callback=[])
    monkeypatch.setitem(sys.modules, "litellm", litellm)
    tracker = FrontierTracker(f"http://127.0.0.1:{free_port()}", "ft_nobody")
    sent: list[dict] = []
    monkeypatch.setattr(tracker, "_emit", sent.append)
    tracker.on_budget_updated({"metric_calls_used": 1, "metric_calls_remaining": 9})
    assert litellm.success_callback == [tracker._on_litellm_success]
    for cost in (0.002, None):
        response = SimpleNamespace(usage=SimpleNamespace(prompt_tokens=100, completion_tokens=20))
        litellm.success_callback[0]({"response_cost": cost}, response, None, None)
    tracker.report_usage(tokens_in=5, tokens_out=1, cost=0.001)
    tracker.on_budget_updated({"metric_calls_used": 3, "metric_calls_remaining": 7})
    usage = [e for e in sent if e["type"] == "usage"]
    assert usage == [
        {"type": "usage", "calls": 3, "tokens_in": 205, "tokens_out": 41, "cost": 0.003}
    ]
    tracker.on_budget_updated({"metric_calls_used": 4, "metric_calls_remaining": 6})
    assert len([e for e in sent if e["type"] == "usage"]) == 1  # unchanged totals are not resent
    tracker.close(timeout=0.1)
    assert litellm.success_callback == []


def test_with_no_arguments_it_reads_frontier_url_and_frontier_token(monkeypatch):
    """A script configured by its environment (`frontier serve` prints the two
    export lines) needs no URL or token in its code."""
    monkeypatch.setenv("FRONTIER_URL", "http://127.0.0.1:8123/")
    monkeypatch.setenv("FRONTIER_TOKEN", "ft_from_env")
    tracker = FrontierTracker()
    assert (tracker.url, tracker.token) == ("http://127.0.0.1:8123", "ft_from_env")


def test_explicit_arguments_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("FRONTIER_URL", "http://127.0.0.1:8123")
    monkeypatch.setenv("FRONTIER_TOKEN", "ft_from_env")
    tracker = FrontierTracker("http://127.0.0.1:9000", token="ft_explicit")
    assert (tracker.url, tracker.token) == ("http://127.0.0.1:9000", "ft_explicit")


def test_without_a_url_or_a_token_it_says_which_variables_to_set(monkeypatch):
    """Nothing configured is an error at once, naming both variables, rather
    than a tracker that silently reports nowhere."""
    monkeypatch.delenv("FRONTIER_URL", raising=False)
    monkeypatch.delenv("FRONTIER_TOKEN", raising=False)
    with pytest.raises(ValueError, match=r"FRONTIER_URL \(or url=\) and FRONTIER_TOKEN"):
        FrontierTracker()
    monkeypatch.setenv("FRONTIER_URL", "http://127.0.0.1:8123")
    with pytest.raises(ValueError, match="set FRONTIER_TOKEN") as error:
        FrontierTracker()
    assert "FRONTIER_URL (or" not in str(error.value)
