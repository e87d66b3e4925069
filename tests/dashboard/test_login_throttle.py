"""Login and API-token attempts are throttled per account and per IP address
(dashboard.throttle); a real server process is driven in tests/e2e/test_login_throttle.py."""

import pytest
from django.test import Client, override_settings

from dashboard.account_services import api_token_create
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def attempt(password, username="alice", ip="10.0.0.1", path="/login/"):
    client = Client(REMOTE_ADDR=ip)
    response = client.post(path, {"username": username, "password": password})
    return response, "_auth_user_id" in client.session


def test_the_right_password_is_refused_after_too_many_wrong_ones_for_the_account(user, settings):
    for n in range(settings.LOGIN_FAILURES_PER_ACCOUNT):
        response, logged_in = attempt(
            f"wrong {n}", ip=f"10.0.0.{n + 1}"
        )  # a different address each time
        assert response.status_code == 200 and not logged_in
    response, logged_in = attempt(PASSWORD, ip="10.0.1.1")
    assert response.status_code == 429 and not logged_in
    assert "Too many failed attempts" in response.content.decode()


def test_an_address_with_too_many_failures_is_refused_for_every_account(user, other_user):
    with override_settings(LOGIN_FAILURES_PER_IP=5):
        for n in range(5):
            attempt("wrong", username=f"nobody-{n}", ip="10.0.0.9")
        response, logged_in = attempt(PASSWORD, username="bob", ip="10.0.0.9")
        assert response.status_code == 429 and not logged_in
        # Another address is not affected.
        assert attempt(PASSWORD, username="bob", ip="10.0.0.10")[1]


def test_a_few_mistakes_do_not_lock_anyone_out(user):
    for _ in range(3):
        attempt("typo")
    assert attempt(PASSWORD)[1]


def test_the_admin_login_counts_against_the_same_throttle(admin_user, settings):
    for _ in range(settings.LOGIN_FAILURES_PER_ACCOUNT):
        attempt("wrong", username="root", ip="10.0.0.7", path="/admin/login/")
    response, logged_in = attempt(PASSWORD, username="root", ip="10.0.0.8", path="/admin/login/")
    assert not logged_in and "Too many failed attempts" in response.content.decode()


def test_wrong_bearer_tokens_throttle_the_address_and_then_the_right_token_gets_429(user):
    _, token = api_token_create(user=user, name="script")
    with override_settings(LOGIN_FAILURES_PER_IP=5):
        guesser = Client(REMOTE_ADDR="10.0.0.20")
        for n in range(5):
            assert (
                guesser.get("/api/me", HTTP_AUTHORIZATION=f"Bearer ft_guess{n}").status_code == 401
            )
        refused = guesser.get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}")
        assert refused.status_code == 429 and "Too many failed attempts" in refused.json()["detail"]
        assert int(refused["Retry-After"]) > 0
        assert (
            Client(REMOTE_ADDR="10.0.0.21")
            .get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}")
            .status_code
            == 200
        )


def test_a_logged_in_session_is_never_throttled(user_client):
    with override_settings(LOGIN_FAILURES_PER_IP=1):
        attempt("wrong", ip="127.0.0.1")
        assert user_client.get("/api/me").status_code == 200
        assert user_client.get("/runs/").status_code == 200
