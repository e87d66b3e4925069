"""The openai provider, driven through the real ``openai`` client against a local
fake OpenAI-compatible server (stdlib http.server on 127.0.0.1, random port)."""

from __future__ import annotations

import ast
import itertools
import time
from pathlib import Path

import httpx2
import openai
import pytest
from pydantic import ValidationError

from optimizer.lm import (
    LMConfig,
    LMConfigError,
    LMError,
    build_candidate_proposer,
    build_lm,
    build_reflection_lm,
    check_endpoint,
    openai_provider,
)
from optimizer.lm.openai_provider import RetryPolicy
from tests.optimizer.fake_openai import (
    KEY_ENV,
    SECRET,
    FakeOpenAIServer,
    completion,
    error_body,
    free_port,
)

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello?"}]


@pytest.fixture
def server():
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


def config(server, **overrides):
    values = {
        "provider": "openai",
        "model": "fake-model",
        "base_url": server.base_url,
        "api_key_env": KEY_ENV,
        "timeout": 5,
        "max_retries": 2,
        "retry_initial_delay": 0.001,
    }
    values.update(overrides)
    return LMConfig(**values)


def assert_no_secret(error: BaseException, lm=None):
    for text in (str(error), repr(error), repr(error.args)):
        assert SECRET not in text
        assert SECRET[:10] not in text
    # raised outside the openai except block: no chained openai error (its request
    # carries the Authorization header)
    assert error.__cause__ is None and error.__context__ is None
    if lm is not None:
        assert SECRET not in repr(lm) and SECRET not in repr(vars(lm).get("config"))


# ---------------------------------------------------------------- happy path


def test_it_returns_the_text_with_token_usage_latency_and_one_attempt(server, key):
    server.default = (200, completion("Hi there.", prompt_tokens=17, completion_tokens=4), 0.0)
    response = build_lm(config(server)).complete(MESSAGES)
    assert response.text == "Hi there."
    assert (response.tokens_in, response.tokens_out) == (17, 4)
    assert response.model == "fake-model"
    assert response.attempts == 1
    assert response.latency_ms > 0


def test_it_sends_the_model_messages_temperature_max_tokens_and_the_key_from_the_named_variable(
    server, key
):
    build_lm(config(server, temperature=0.7, max_tokens=64)).complete(MESSAGES)
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["body"]["model"] == "fake-model"
    assert request["body"]["messages"] == MESSAGES
    assert request["body"]["temperature"] == 0.7
    assert request["body"]["max_tokens"] == 64
    assert request["headers"]["authorization"] == f"Bearer {SECRET}"


def test_it_leaves_max_tokens_out_when_unset(server, key):
    build_lm(config(server)).complete(MESSAGES)
    assert "max_tokens" not in server.requests[0]["body"]


def test_it_accounts_tokens_and_failures_across_calls(server, key):
    lm = build_lm(config(server, max_retries=0))
    server.script = [
        (200, completion(prompt_tokens=5, completion_tokens=2), 0),
        (400, error_body("too long"), 0),
    ]
    lm.complete(MESSAGES)
    with pytest.raises(LMError):
        lm.complete(MESSAGES)
    usage = lm.usage()
    assert (usage.calls, usage.failures, usage.tokens_in, usage.tokens_out) == (2, 1, 5, 2)


def test_it_is_labelled_as_a_real_model_with_its_host(server, key):
    lm = build_lm(config(server))
    assert lm.is_simulator is False
    assert lm.label.startswith("fake-model @ 127.0.0.1:")


# ---------------------------------------------------------------- retries


def test_it_retries_a_429_and_counts_the_attempts(server, key):
    server.script = [
        (429, error_body("slow down", "rate_limit_error"), 0),
        (429, error_body("slow down"), 0),
    ]
    response = build_lm(config(server, max_retries=3)).complete(MESSAGES)
    assert response.text == "Hi there."
    assert response.attempts == 3
    assert len(server.requests) == 3


def test_it_retries_5xx_until_exhausted_then_raises_lm_error(server, key):
    server.default = (500, error_body("boom", "server_error"), 0)
    lm = build_lm(config(server, max_retries=2))
    with pytest.raises(LMError) as raised:
        lm.complete(MESSAGES)
    assert not isinstance(raised.value, LMConfigError)
    assert len(server.requests) == 3
    assert "HTTP 500" in str(raised.value) and "3 attempts" in str(raised.value)
    assert_no_secret(raised.value, lm)


def test_it_retries_a_502_then_succeeds(server, key):
    server.script = [(502, b"<html>bad gateway</html>", 0)]
    assert build_lm(config(server)).complete(MESSAGES).attempts == 2


def gaps(server) -> list[float]:
    """Seconds between consecutive requests the server received."""
    times = [r["at"] for r in server.requests]
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def test_backoff_doubles_from_the_configured_initial_delay_minus_at_most_a_quarter():
    policy = RetryPolicy(max_retries=10, initial_delay=0.2)
    busy = openai.InternalServerError(
        "busy", response=httpx2.Response(503, request=httpx2.Request("POST", "http://x")), body=None
    )
    assert [policy.wait(n, busy, jitter=0.0) for n in range(6)] == pytest.approx(
        [0.2, 0.4, 0.8, 1.6, 3.2, 3.2]
    )
    assert policy.wait(1, busy, jitter=0.999) == pytest.approx(0.4 * 0.75, rel=1e-3)
    assert policy.wait(10, busy) is None  # retries exhausted


def test_backoff_between_attempts_follows_the_configured_initial_delay_and_the_whole_call_is_bounded(
    server, key
):
    server.default = (503, error_body("busy"), 0)
    started = time.monotonic()
    with pytest.raises(LMError) as raised:
        build_lm(config(server, max_retries=2, retry_initial_delay=0.2)).complete(MESSAGES)
    elapsed = time.monotonic() - started
    assert len(server.requests) == 3 and "3 attempts" in str(raised.value)
    # 0.2 s then 0.4 s, each minus at most 25 % jitter (a loaded machine only sleeps longer)
    first, second = gaps(server)
    assert first >= 0.15 and second >= 0.3
    assert elapsed < 10  # bounded: no hidden extra retries or client-side waits (~0.6 s when idle)


def test_a_server_retry_after_header_is_obeyed_not_scaled(server, key):
    # retry-after-ms: 300 → the client waits 0.3 s even with a tiny configured backoff
    server.script = [(429, error_body("later"), 0)]
    server.reply_headers = {"retry-after-ms": "300"}
    response = build_lm(config(server, retry_initial_delay=0.001)).complete(MESSAGES)
    assert response.attempts == 2
    assert gaps(server)[0] >= 0.28


def test_a_retry_after_in_seconds_is_obeyed(server, key):
    server.script = [(503, error_body("later"), 0)]
    server.reply_headers = {"retry-after": "0.4"}
    assert build_lm(config(server, retry_initial_delay=0.001)).complete(MESSAGES).attempts == 2
    assert gaps(server)[0] >= 0.38


def test_a_retry_after_longer_than_two_minutes_is_not_waited_for(server, key):
    server.default = (429, error_body("come back tomorrow"), 0)
    server.reply_headers = {"retry-after": "86400"}
    started = time.monotonic()
    with pytest.raises(LMError) as raised:
        build_lm(config(server, max_retries=3)).complete(MESSAGES)
    assert len(server.requests) == 1 and time.monotonic() - started < 5
    assert "HTTP 429" in str(raised.value)


def test_the_server_may_say_not_to_retry_a_5xx_or_to_retry_a_4xx(server, key):
    server.script = [(500, error_body("do not retry"), 0)]
    server.reply_headers = {"x-should-retry": "false"}
    with pytest.raises(LMError):
        build_lm(config(server)).complete(MESSAGES)
    assert len(server.requests) == 1
    server.requests.clear()
    server.script = [(400, error_body("try again"), 0)]
    server.reply_headers = {"x-should-retry": "true"}
    assert build_lm(config(server)).complete(MESSAGES).attempts == 2


def test_a_bad_request_is_not_retried(server, key):
    server.default = (400, error_body("bad"), 0)
    with pytest.raises(LMError) as raised:
        build_lm(config(server, max_retries=3)).complete(MESSAGES)
    assert len(server.requests) == 1 and "attempts" not in str(raised.value)


def test_the_provider_overrides_and_imports_nothing_private_from_openai():
    # A private method or module of the client can change in any release without notice.
    tree = ast.parse(Path(openai_provider.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            assert not node.module.startswith("openai._"), node.module
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "openai"
        ):
            assert not node.attr.startswith("_"), node.attr
        if isinstance(node, ast.ClassDef) and any(
            ast.unparse(base).startswith("openai.") for base in node.bases
        ):
            methods = [item.name for item in node.body if isinstance(item, ast.FunctionDef)]
            assert all(
                not m.startswith("_") or (m.startswith("__") and m.endswith("__")) for m in methods
            ), methods


def test_a_reply_slower_than_the_timeout_is_retried_then_raises_lm_error(server, key):
    server.default = (200, completion(), 2.0)
    lm = build_lm(config(server, timeout=0.3, max_retries=1))
    with pytest.raises(LMError) as raised:
        lm.complete(MESSAGES)
    assert not isinstance(raised.value, LMConfigError)
    assert "did not answer within 0.3 s" in str(raised.value)
    assert len(server.requests) == 2


def test_models_share_one_connection_pool_and_each_keeps_its_own_timeout(server, key):
    """Building a client costs ~80 ms (its TLS context), twice per run: the models
    of a process share one pool; a patient model does not make a brisk one wait."""
    server.default = (200, completion(), 2.0)
    brisk = build_lm(config(server, timeout=0.3, max_retries=0))
    patient = build_lm(config(server, timeout=5, max_retries=0))
    assert brisk._client._client is patient._client._client
    started = time.perf_counter()
    with pytest.raises(LMError, match="did not answer within 0.3 s"):
        brisk.complete(MESSAGES)
    assert (
        time.perf_counter() - started < 1.8
    )  # its 0.3 s, not the patient one's 5 s nor the reply's 2 s
    assert patient.complete(MESSAGES).text


def test_an_unreachable_endpoint_raises_lm_error_after_retries(key):
    lm = build_lm(
        LMConfig(
            provider="openai",
            model="m",
            base_url=f"http://127.0.0.1:{free_port()}/v1",
            api_key_env=KEY_ENV,
            max_retries=1,
            retry_initial_delay=0.001,
            timeout=2,
        )
    )
    with pytest.raises(LMError) as raised:
        lm.complete(MESSAGES)
    assert "Could not connect to http://127.0.0.1:" in str(raised.value)
    assert_no_secret(raised.value, lm)


# ---------------------------------------------------------------- systemic errors


def test_a_rejected_key_is_a_config_error_naming_the_variable_but_never_the_key(server, key):
    server.default = (
        401,
        error_body(
            f"Incorrect API key provided: {SECRET[:8]}***{SECRET[-4:]}", code="invalid_api_key"
        ),
        0,
    )
    lm = build_lm(config(server))
    with pytest.raises(LMConfigError) as raised:
        lm.complete(MESSAGES)
    assert KEY_ENV in str(raised.value)
    assert "HTTP 401" in str(raised.value)
    assert len(server.requests) == 1  # 401 is not retried
    assert_no_secret(raised.value, lm)


def test_a_forbidden_key_is_a_config_error(server, key):
    server.default = (403, error_body("no access"), 0)
    with pytest.raises(LMConfigError, match="HTTP 403"):
        build_lm(config(server)).complete(MESSAGES)


def test_an_unknown_model_is_a_config_error_naming_the_model(server, key):
    server.default = (404, error_body("The model `nope` does not exist", code="model_not_found"), 0)
    lm = build_lm(config(server, model="nope"))
    with pytest.raises(LMConfigError) as raised:
        lm.complete(MESSAGES)
    message = str(raised.value)
    assert "'nope' was not found" in message and "base URL" in message
    assert len(server.requests) == 1
    assert_no_secret(raised.value, lm)


def test_a_missing_key_variable_is_a_config_error_at_build_time(server, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(LMConfigError, match=f"environment variable {KEY_ENV} .* is not set"):
        build_lm(config(server))


def test_a_bad_request_for_one_example_is_an_lm_error_not_a_config_error(server, key):
    server.default = (400, error_body("context length exceeded"), 0)
    with pytest.raises(LMError) as raised:
        build_lm(config(server)).complete(MESSAGES)
    assert not isinstance(raised.value, LMConfigError)
    assert "HTTP 400" in str(raised.value) and "context length exceeded" in str(raised.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "body",
    [b"this is not json", {"object": "chat.completion", "choices": []}, {"unexpected": True}],
    ids=["not-json", "no-choices", "wrong-shape"],
)
def test_a_malformed_body_is_an_lm_error(server, key, body):
    server.default = (200, body, 0)
    with pytest.raises(LMError) as raised:
        build_lm(config(server)).complete(MESSAGES)
    assert not isinstance(raised.value, LMConfigError)
    assert "malformed" in str(raised.value) or "not a valid chat completion" in str(raised.value)


def test_a_reply_without_usage_counts_zero_tokens(server, key):
    body = completion("ok")
    del body["usage"]
    server.default = (200, body, 0)
    response = build_lm(config(server)).complete(MESSAGES)
    assert (response.text, response.tokens_in, response.tokens_out) == ("ok", 0, 0)


# ---------------------------------------------------------------- gepa callables


def test_the_reflection_callable_sends_the_prompt_as_one_user_message(server, key):
    server.default = (200, completion("```\nnew instruction\n```"), 0)
    reflection_lm = build_reflection_lm(config(server))
    assert reflection_lm("Improve this prompt") == "```\nnew instruction\n```"
    assert server.requests[0]["body"]["messages"] == [
        {"role": "user", "content": "Improve this prompt"}
    ]


def test_there_is_no_custom_proposer_for_a_real_model(server, key):
    assert build_candidate_proposer(config(server)) is None


# ---------------------------------------------------------------- dry-run check


def test_check_endpoint_passes_when_the_model_is_served(server, key):
    assert check_endpoint(config(server)) is None
    assert server.requests[0]["path"] == "/v1/models"


def test_check_endpoint_names_a_model_the_server_does_not_serve(server, key):
    problem = check_endpoint(config(server, model="gpt-missing"))
    assert "'gpt-missing' is not served" in problem and "fake-model" in problem


def test_check_endpoint_reports_a_rejected_key_without_the_key(server, key):
    server.default = (401, error_body("bad key " + SECRET), 0)
    problem = check_endpoint(config(server))
    assert KEY_ENV in problem and SECRET not in problem


def test_check_endpoint_reports_a_missing_key_variable(server, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    assert KEY_ENV in check_endpoint(config(server))


def test_check_endpoint_reports_an_unreachable_server(key):
    problem = check_endpoint(
        LMConfig(
            provider="openai",
            model="m",
            base_url=f"http://127.0.0.1:{free_port()}/v1",
            api_key_env=KEY_ENV,
        )
    )
    assert problem.startswith("Could not connect to")


def test_check_endpoint_reports_a_base_url_without_the_api_path(server, key):
    server.default = (404, error_body("not found"), 0)
    assert "check the base URL" in check_endpoint(config(server))


def test_check_endpoint_is_silent_for_the_demo_simulator():
    assert check_endpoint({"provider": "demo", "model": "demo"}) is None


# ---------------------------------------------------------------- config


def test_config_rejects_a_key_pasted_into_api_key_env_without_echoing_it():
    with pytest.raises(ValidationError) as raised:
        LMConfig(provider="openai", model="m", api_key_env=SECRET)
    assert "name of an environment variable" in str(raised.value)
    assert SECRET not in str(raised.value)


def test_config_rejects_unknown_fields_and_bad_values():
    with pytest.raises(ValidationError, match="api_key"):
        LMConfig(provider="openai", model="m", api_key="sk-x")
    with pytest.raises(ValidationError, match="base_url"):
        LMConfig(provider="openai", model="m", base_url="localhost:11434")
    with pytest.raises(ValidationError, match="temperature"):
        LMConfig(provider="openai", model="m", temperature=3)
    with pytest.raises(ValidationError, match="provider"):
        LMConfig(provider="anthropic", model="m")


def test_build_lm_turns_an_invalid_dict_into_one_config_error_sentence():
    with pytest.raises(LMConfigError, match="LM config field 'timeout'"):
        build_lm({"provider": "openai", "model": "m", "timeout": -1})


def test_config_and_model_reprs_hold_no_key(server, key):
    lm = build_lm(config(server))
    assert (
        SECRET not in repr(lm)
        and SECRET not in repr(lm.config)
        and SECRET not in lm.config.model_dump_json()
    )
