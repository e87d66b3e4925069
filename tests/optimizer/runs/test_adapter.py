"""The GEPA adapter contract (docs/verifier-semantics.md "The GEPA adapter contract") with real models: the demo simulator and
the openai provider against a local fake OpenAI-compatible server."""

from __future__ import annotations

import copy
import threading

import pytest

from optimizer.lm import build_lm
from optimizer.runs.adapter import FrontierAdapter, SystemicFailure, system_prompt
from tests.optimizer.fake_openai import KEY_ENV, FakeOpenAIServer, completion, hung_server
from tests.optimizer.run_helpers import REFUND_SPEC, REQUESTS
from verifiers_app.engine import compile_specs

ROWS = [
    {
        "task_id": key,
        "input": text,
        "expected": None,
        "params": {},
        "metadata": {
            "expectations": {
                "mustMention": [{"text": phrase, "message": f"Offer the {phrase} option"}]
            }
        },
    }
    for key, text, phrase in REQUESTS
]
SEED = {"instructions": "You answer customer questions for a shop."}


def demo_adapter(**options) -> FrontierAdapter:
    lm = build_lm({"provider": "demo", "model": "demo", **options.pop("lm", {})})
    return FrontierAdapter(task_lm=lm, scorer=compile_specs([REFUND_SPEC]), **options)


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeOpenAIServer() as fake:
        yield fake


def openai_adapter(server, **options) -> FrontierAdapter:
    lm = build_lm(
        {
            "provider": "openai",
            "model": "fake-model",
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "max_retries": 0,
            "timeout": 5,
        }
    )
    return FrontierAdapter(task_lm=lm, scorer=compile_specs([REFUND_SPEC]), **options)


def test_it_returns_one_output_score_and_objective_per_example_and_mutates_nothing():
    rows, seed = copy.deepcopy(ROWS), dict(SEED)
    batch = demo_adapter().evaluate(rows, seed)
    assert len(batch.outputs) == len(batch.scores) == len(batch.objective_scores) == len(ROWS)
    assert all(0 <= s <= 1 for s in batch.scores)
    assert all(set(o) == {"refund-policy"} for o in batch.objective_scores)
    assert rows == ROWS and seed == SEED
    assert batch.trajectories is None


def test_it_returns_trajectories_with_feedback_only_when_asked():
    batch = demo_adapter().evaluate(ROWS[:2], SEED, capture_traces=True)
    assert len(batch.trajectories) == 2
    assert 'does not contain "30 days"' in batch.trajectories[0]["feedback"]


def test_the_reflective_dataset_has_inputs_outputs_and_feedback_with_the_score():
    adapter = demo_adapter()
    batch = adapter.evaluate(ROWS[:2], SEED, capture_traces=True)
    dataset = adapter.make_reflective_dataset(SEED, batch, ["instructions"])
    record = dataset["instructions"][0]
    assert set(record) == {"Inputs", "Generated Outputs", "Feedback"}
    assert record["Inputs"] == {"task": ROWS[0]["input"]}
    assert record["Generated Outputs"] == batch.outputs[0]
    assert record["Feedback"].startswith(f"Score {batch.scores[0]:.2f} (fail).")


def test_a_task_row_verifier_is_one_more_objective():
    row = dict(ROWS[0], expected="30 days", verifier={"kind": "in_process", "fn_name": "contains"})
    batch = demo_adapter().evaluate([row], SEED)
    assert set(batch.objective_scores[0]) == {"refund-policy", "row"}


def test_several_components_become_one_system_prompt_under_their_names(server):
    candidate = {"tone": "Be warm.", "policy": "Refunds within 30 days."}
    openai_adapter(server).evaluate(ROWS[:1], candidate)
    messages = server.requests[0]["body"]["messages"]
    assert messages == [
        {
            "role": "system",
            "content": "## tone\n\nBe warm.\n\n## policy\n\nRefunds within 30 days.",
        },
        {"role": "user", "content": ROWS[0]["input"]},
    ]
    assert system_prompt({"only": "Just this."}) == "Just this."


def test_it_scores_what_the_model_answered(server):
    server.default = (200, completion("Bring your receipt within 30 days for store credit."), 0.0)
    batch = openai_adapter(server).evaluate(ROWS[:1], SEED)
    assert batch.scores == [1.0]


def test_one_failing_example_scores_zero_with_the_error_as_feedback(server):
    server.script = [(500, {"error": {"message": "overloaded", "type": "server_error"}}, 0.0)]
    batch = openai_adapter(server, concurrency=1).evaluate(ROWS[:3], SEED, capture_traces=True)
    assert batch.scores[0] == 0.0 and batch.outputs[0] == ""
    assert (
        "The task model failed" in batch.trajectories[0]["feedback"]
        and "500" in batch.trajectories[0]["feedback"]
    )
    assert batch.objective_scores[0] == {"refund-policy": 0.0}
    assert batch.outputs[1] == "Hi there."


def test_a_rejected_key_is_a_systemic_failure(server):
    server.default = (
        401,
        {"error": {"message": "Incorrect API key", "type": "invalid_request_error"}},
        0.0,
    )
    with pytest.raises(SystemicFailure):
        openai_adapter(server).evaluate(ROWS[:2], SEED)


def test_too_many_consecutive_failures_is_a_systemic_failure(server):
    server.default = (500, {"error": {"message": "down", "type": "server_error"}}, 0.0)
    with pytest.raises(SystemicFailure, match="3 task-model calls failed in a row"):
        openai_adapter(server, concurrency=1, max_consecutive_failures=3).evaluate(ROWS[:4], SEED)


class CountingLM:
    """Wraps a real model and counts how many of its calls are in flight at once."""

    def __init__(self, lm):
        self.lm, self.lock = lm, threading.Lock()
        self.active = self.widest = 0

    def complete(self, messages):
        with self.lock:
            self.active += 1
            self.widest = max(self.widest, self.active)
        try:
            return self.lm.complete(messages)
        finally:
            with self.lock:
                self.active -= 1


def test_it_runs_the_batch_concurrently_but_no_wider_than_its_concurrency():
    # 100 ms per call keeps every worker busy long enough for all four to overlap;
    # the wall time of this batch is a figure for bench/suite_timings.py, not an assert.
    lm = CountingLM(build_lm({"provider": "demo", "model": "demo", "simulated_latency_ms": 100}))
    adapter = FrontierAdapter(task_lm=lm, scorer=compile_specs([REFUND_SPEC]), concurrency=4)
    batch = adapter.evaluate(ROWS, SEED)
    assert len(batch.scores) == len(ROWS)
    assert 1 < lm.widest <= 4  # four in practice; a starved machine may start the fourth late


def test_the_recorder_can_take_the_full_record_of_each_evaluation_once():
    adapter = demo_adapter()
    adapter.evaluate(ROWS[:1], SEED)
    record = adapter.take_record(SEED, ROWS[0]["task_id"])
    assert record.result["verifiers"][0]["id"] == "refund-policy" and record.tokens_in > 0
    assert adapter.take_record(SEED, ROWS[0]["task_id"]) is None


def test_a_round_of_parallel_proposals_is_evaluated_at_once_across_candidates():
    lm = CountingLM(build_lm({"provider": "demo", "model": "demo", "simulated_latency_ms": 100}))
    adapter = FrontierAdapter(task_lm=lm, scorer=compile_specs([REFUND_SPEC]), concurrency=8)
    prompts = [{"instructions": f"Prompt {n}: always mention a receipt."} for n in range(4)]
    results = adapter.batch_evaluate(
        [(prompt, ROWS[2 * n : 2 * n + 2]) for n, prompt in enumerate(prompts)]
    )
    assert [len(r.scores) for r in results] == [2, 2, 2, 2]
    assert all(r.trajectories for r in results)  # gepa's batch contract: always with traces
    assert all(
        adapter.take_record(prompt, ROWS[2 * n]["task_id"]) for n, prompt in enumerate(prompts)
    )
    assert 2 < lm.widest <= 8  # calls of different candidates overlapped (two tasks each)


def test_an_empty_completion_is_a_failure_with_empty_output_as_its_feedback(server):
    server.script = [(200, completion("   "), 0.0)]
    adapter = openai_adapter(server, concurrency=1)
    batch = adapter.evaluate(ROWS[:2], SEED, capture_traces=True)
    assert batch.scores[0] == 0.0 and batch.trajectories[0]["verdict"] == "fail"
    assert "empty output" in batch.trajectories[0]["feedback"]
    record = adapter.take_record(SEED, ROWS[0]["task_id"])
    assert record.tokens_in == 11 and record.latency_ms > 0  # the call happened and cost tokens
    assert batch.outputs[1] == "Hi there."


def test_a_model_that_only_answers_empty_text_fails_loudly(server):
    server.default = (200, completion(""), 0.0)
    with pytest.raises(
        SystemicFailure, match="3 task-model calls failed in a row; the last: empty output"
    ):
        openai_adapter(server, concurrency=1, max_consecutive_failures=3).evaluate(ROWS[:4], SEED)


def test_a_failed_call_records_how_long_it_took(server):
    server.script = [(500, {"error": {"message": "overloaded", "type": "server_error"}}, 0.3)]
    adapter = openai_adapter(server, concurrency=1)
    adapter.evaluate(ROWS[:1], SEED)
    assert adapter.take_record(SEED, ROWS[0]["task_id"]).latency_ms >= 300


def test_an_endpoint_that_answers_nothing_for_a_while_is_a_systemic_failure_naming_it():
    with hung_server() as port:
        lm = build_lm(
            {
                "provider": "openai",
                "model": "m",
                "base_url": f"http://127.0.0.1:{port}/v1",
                "timeout": 0.3,
                "max_retries": 0,
            }
        )
        adapter = FrontierAdapter(
            task_lm=lm,
            scorer=compile_specs([REFUND_SPEC]),
            concurrency=1,
            dead_endpoint_seconds=0.5,
        )
        with pytest.raises(
            SystemicFailure,
            match=rf"has not answered for \d+ s: m @ 127.0.0.1:{port} \(http://127.0.0.1:{port}/v1\) did not answer",
        ):
            adapter.evaluate(ROWS[:4], SEED)


class CallCountingLM:
    """A model that counts its calls."""

    def __init__(self, lm):
        self.lm, self.calls = lm, 0

    def complete(self, messages):
        self.calls += 1
        return self.lm.complete(messages)


def test_an_evaluation_already_recorded_is_answered_from_its_record_once_without_a_model_call():
    lm = CallCountingLM(build_lm({"provider": "demo", "model": "demo"}))
    adapter = FrontierAdapter(task_lm=lm, scorer=compile_specs([REFUND_SPEC]))
    first = adapter.evaluate(ROWS[:2], SEED)
    recorded = adapter.take_all_records()
    assert lm.calls == 2

    adapter.answer_from_records(recorded)
    again = adapter.evaluate(ROWS[:2], SEED)
    assert lm.calls == 2  # nothing asked of the model
    assert (again.outputs, again.scores, again.objective_scores) == (
        first.outputs,
        first.scores,
        first.objective_scores,
    )
    adapter.evaluate(ROWS[:2], SEED)
    assert lm.calls == 4  # each record answers once; another prompt is never answered from it
    adapter.answer_from_records(recorded)
    adapter.evaluate(ROWS[:2], {"instructions": "Another prompt."})
    assert lm.calls == 6


def test_the_adapter_hands_gepa_what_it_carries_and_takes_it_back():
    from optimizer.runs.checkpoint import CarriedState

    carried = CarriedState()
    box = {"n": 1}
    carried.add("box", lambda: box["n"], lambda saved: box.update(n=saved))
    adapter = demo_adapter(carried=carried)
    assert adapter.carried_state() == {"box": 1}
    adapter.set_adapter_state({"box": 7, "gone": 3})
    assert box["n"] == 7
    adapter.set_adapter_state({})  # a checkpoint written before the part existed
    assert box["n"] == 7
