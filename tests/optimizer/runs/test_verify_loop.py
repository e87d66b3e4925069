"""The verify= loop (docs/verifier-semantics.md "The verify loop") around a real model: the openai provider against a
local fake server, so every re-ask is observed as the HTTP request it is."""

from __future__ import annotations

import pytest

from optimizer.lm import build_lm
from optimizer.runs.verify_loop import answer_with_verify, is_approved, llm_judge, verifier_judge
from tests.optimizer.fake_openai import KEY_ENV, FakeOpenAIServer, completion
from tests.optimizer.run_helpers import REFUND_SPEC
from verifiers_app.engine import compile_specs

TASK = "Can I return my shoes?"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeOpenAIServer() as fake:
        yield fake


def model(server):
    return build_lm(
        {
            "provider": "openai",
            "model": "fake-model",
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "max_retries": 0,
        }
    )


def asker(server):
    lm = model(server)
    return lambda text: lm.complete(
        [{"role": "system", "content": "Shop assistant."}, {"role": "user", "content": text}]
    )


def user_messages(server):
    return [r["body"]["messages"][-1]["content"] for r in server.requests]


def test_an_approved_first_answer_is_asked_once(server):
    response, attempts = answer_with_verify(
        ask=asker(server), task=TASK, judge=lambda task, out: "Approved, fine.", max_verify=3
    )
    assert response.text == "Hi there." and len(attempts) == 1 and attempts[0].approved
    assert user_messages(server) == [TASK]


def test_a_rejection_re_asks_the_task_with_the_verdict_as_feedback(server):
    server.script = [(200, completion("No."), 0.0), (200, completion("Yes, within 30 days."), 0.0)]
    verdicts = iter(["rejected: say how long the window is", "approved"])
    response, attempts = answer_with_verify(
        ask=asker(server), task=TASK, judge=lambda t, o: next(verdicts), max_verify=3
    )
    assert user_messages(server) == [
        TASK,
        f"{TASK}\n\nFeedback: rejected: say how long the window is",
    ]
    assert response.text == "Yes, within 30 days."
    assert [a.approved for a in attempts] == [False, True]
    assert (
        attempts[0].output == "No."
        and attempts[0].verdict == "rejected: say how long the window is"
    )


def test_after_max_verify_attempts_the_last_answer_is_kept_even_if_rejected(server):
    server.script = [(200, completion(f"try {n}"), 0.0) for n in range(1, 4)]
    verdicts = iter(["rejected: a", "rejected: b", "rejected: c"])
    response, attempts = answer_with_verify(
        ask=asker(server), task=TASK, judge=lambda t, o: next(verdicts), max_verify=3
    )
    assert response.text == "try 3" and len(attempts) == 3 and not attempts[-1].approved
    # each retry carries the original task and only the latest verdict
    assert user_messages(server)[2] == f"{TASK}\n\nFeedback: rejected: b"


def test_max_verify_one_grades_once_without_retrying(server):
    response, attempts = answer_with_verify(
        ask=asker(server), task=TASK, judge=lambda t, o: "rejected: too short", max_verify=1
    )
    assert len(server.requests) == 1 and attempts[0].verdict == "rejected: too short"


def test_max_verify_below_one_is_refused(server):
    with pytest.raises(ValueError, match="max_verify"):
        answer_with_verify(
            ask=asker(server), task=TASK, judge=lambda t, o: "approved", max_verify=0
        )


def test_approval_is_a_case_insensitive_prefix():
    assert is_approved("APPROVED") and is_approved("  approved: nice")
    assert not is_approved("not approved") and not is_approved("rejected: approved elsewhere")


def test_the_verifiers_judge_approves_a_pass_and_rejects_with_the_verifier_feedback():
    scorer = compile_specs([REFUND_SPEC])
    row = {"task_id": "t", "input": TASK, "metadata": {}}
    judge = verifier_judge(lambda output: scorer.score(output, task=row))
    assert judge(TASK, "Bring the receipt within 30 days.") == "approved"
    verdict = judge(TASK, "Sure.")
    assert verdict.startswith("rejected: ") and 'does not contain "30 days"' in verdict


def test_the_llm_judge_sees_the_task_and_the_answer_and_its_reply_is_the_verdict(server):
    server.default = (200, completion("rejected: mention the receipt"), 0.0)
    judge = llm_judge(model(server), 'Reply "approved" or "rejected: <reason>".')
    assert judge(TASK, "Within 30 days.") == "rejected: mention the receipt"
    messages = server.requests[0]["body"]["messages"]
    assert messages[0] == {"role": "system", "content": 'Reply "approved" or "rejected: <reason>".'}
    assert messages[1]["content"] == f"Task:\n{TASK}\n\nAnswer:\nWithin 30 days."
