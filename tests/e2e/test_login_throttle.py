"""Login throttling against a real `manage.py serve` process over plain HTTP:
50 wrong passwords (site or admin) or 50 wrong Bearer tokens, then the right
one is refused. Each scenario comes from its own loopback address (127.0.0.x),
so the per-IP counts of one never throttle another."""

from __future__ import annotations

import http.client
import re
from dataclasses import dataclass, field
from email.message import Message
from http.cookies import SimpleCookie
from urllib.parse import urlencode, urlparse

import pytest

PASSWORD = "victim-password-123"
ATTEMPTS = 50


@pytest.fixture(scope="module")
def accounts(frontier_server):
    token = (
        frontier_server.manage(
            "shell",
            "-c",
            (
                "from django.contrib.auth.models import User\n"
                "from dashboard.account_services import api_token_create\n"
                f"User.objects.create_user('victim', password='{PASSWORD}')\n"
                f"User.objects.create_superuser('boss', password='{PASSWORD}')\n"
                f"bystander = User.objects.create_user('bystander', password='{PASSWORD}')\n"
                "print(api_token_create(user=bystander, name='script')[1])\n"
            ),
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    return {"token": token}


@dataclass
class Answer:
    status_code: int
    headers: Message  # case-insensitive, as HTTP header names are
    text: str
    cookies: dict


@dataclass
class HttpClient:
    """A plain HTTP client with a cookie jar whose connections leave from `ip`."""

    url: str
    ip: str
    cookies: dict = field(default_factory=dict)

    def request(
        self, method: str, path: str, body: dict | None = None, headers: dict | None = None
    ) -> Answer:
        parsed = urlparse(self.url)
        connection = http.client.HTTPConnection(
            parsed.hostname, parsed.port, timeout=30, source_address=(self.ip, 0)
        )
        headers = dict(headers or {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        data = None
        if body is not None:
            data = urlencode(body)
            headers.update(
                {"Content-Type": "application/x-www-form-urlencoded", "Referer": self.url + path}
            )
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        set_cookies = {}
        for header in response.headers.get_all("Set-Cookie") or []:
            for name, morsel in SimpleCookie(header).items():
                set_cookies[name] = morsel.value
        self.cookies.update(set_cookies)
        answer = Answer(
            response.status, response.headers, response.read().decode(errors="replace"), set_cookies
        )
        connection.close()
        return answer

    def get(self, path: str, headers: dict | None = None) -> Answer:
        return self.request("GET", path, headers=headers)


def client_from(server, ip: str) -> HttpClient:
    return HttpClient(server.url, ip)


def log_in(client: HttpClient, username: str, password: str, path: str = "/login/") -> Answer:
    form = client.get(path)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    return client.request(
        "POST", path, {"username": username, "password": password, "csrfmiddlewaretoken": csrf}
    )


def logged_in(response: Answer) -> bool:
    return response.status_code == 302 and "sessionid" in response.cookies


def test_fifty_wrong_passwords_then_the_right_one_is_refused(frontier_server, accounts):
    attacker = client_from(frontier_server, "127.0.0.2")
    answers = [log_in(attacker, "victim", f"guess-{n}").status_code for n in range(ATTEMPTS)]
    assert set(answers[:10]) == {200} and set(answers[10:]) == {429}  # 10 per account
    refused = log_in(attacker, "victim", PASSWORD)
    assert refused.status_code == 429 and not logged_in(refused)
    assert "Too many failed attempts" in refused.text
    # The account is paused from any address; the attacker's address for any account.
    assert not logged_in(log_in(client_from(frontier_server, "127.0.0.3"), "victim", PASSWORD))
    assert not logged_in(log_in(attacker, "bystander", PASSWORD))
    assert logged_in(log_in(client_from(frontier_server, "127.0.0.4"), "bystander", PASSWORD))


def test_fifty_wrong_admin_passwords_then_the_right_one_is_refused(frontier_server, accounts):
    attacker = client_from(frontier_server, "127.0.0.5")
    for n in range(ATTEMPTS):
        assert not logged_in(log_in(attacker, "boss", f"guess-{n}", path="/admin/login/"))
    refused = log_in(attacker, "boss", PASSWORD, path="/admin/login/")
    assert not logged_in(refused) and "Too many failed attempts" in refused.text


def test_fifty_wrong_tokens_then_the_right_one_is_refused(frontier_server, accounts):
    attacker = client_from(frontier_server, "127.0.0.6")
    answers = [
        attacker.get("/api/me", headers={"Authorization": f"Bearer ft_guess{n}"}).status_code
        for n in range(ATTEMPTS)
    ]
    assert set(answers) == {401}
    refused = attacker.get("/api/me", headers={"Authorization": f"Bearer {accounts['token']}"})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0
    elsewhere = client_from(frontier_server, "127.0.0.7").get(
        "/api/me", headers={"Authorization": f"Bearer {accounts['token']}"}
    )
    assert elsewhere.status_code == 200 and '"bystander"' in elsewhere.text
