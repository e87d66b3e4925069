import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from dashboard.models import ApiToken

pytestmark = pytest.mark.django_db


def create_token(client, name="nightly"):
    page = client.post("/account/tokens/", {"name": name}).content.decode()
    return re.search(r'data-testid="new-token">(ft_[^<]+)</pre>', page).group(1)


def test_a_created_token_is_shown_once_and_works_as_a_bearer_token(user_client):
    token = create_token(user_client)
    assert token not in user_client.get("/account/tokens/").content.decode()
    assert ApiToken.objects.get().digest == ApiToken.hash(token)
    response = Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.json() == {"username": "alice", "is_admin": False}


def test_a_revoked_token_gets_401(user_client):
    token = create_token(user_client)
    user_client.post(f"/account/tokens/{ApiToken.objects.get().pk}/revoke/")
    assert Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401
    assert "revoked" in user_client.get("/account/tokens/").content.decode()


def test_a_token_needs_a_name(user_client):
    response = user_client.post("/account/tokens/", {"name": "  "})
    assert (
        response.status_code == 400 and "name: give the token a name" in response.content.decode()
    )
    assert not ApiToken.objects.exists()


def test_a_token_name_with_a_nul_character_is_refused_naming_the_field(user_client):
    response = user_client.post("/account/tokens/", {"name": "ci\x00bot"})
    assert (
        response.status_code == 400
        and "name: contains a NUL character" in response.content.decode()
    )
    assert not ApiToken.objects.exists()


def test_users_cannot_revoke_or_see_each_others_tokens(user_client, other_client):
    create_token(user_client, name="alice-script")
    pk = ApiToken.objects.get().pk
    assert other_client.post(f"/account/tokens/{pk}/revoke/").status_code == 404
    assert "alice-script" not in other_client.get("/account/tokens/").content.decode()
    assert ApiToken.objects.get().revoked_at is None


def test_token_create_prints_only_a_working_token_for_scripts(user):
    """`frontier token create --user NAME` prints the token alone on stdout, so
    `export FRONTIER_TOKEN=$(frontier token create --user NAME)` works."""
    out = io.StringIO()
    call_command("token", "create", "--user", "alice", "--name", "tracker", stdout=out)
    token = out.getvalue().strip()
    assert re.fullmatch(r"ft_\S+", token)
    assert ApiToken.objects.get().name == "tracker"
    response = Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.json()["username"] == "alice"


def test_token_create_for_an_unknown_user_exits_2_naming_the_option(db):
    with pytest.raises(CommandError, match=r"--user: no user named 'nobody'") as error:
        call_command("token", "create", "--user", "nobody")
    assert error.value.returncode == 2
    assert not ApiToken.objects.exists()
