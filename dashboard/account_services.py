"""Per-user API tokens: created (the token is returned once, only its hash is
stored) and revoked."""

from __future__ import annotations

from django.utils import timezone

from dashboard.models import ApiToken


def api_token_create(*, user, name: str) -> tuple[ApiToken, str]:
    name = name.strip()
    if not name:
        raise ValueError("name: give the token a name, e.g. the script that will use it")
    if len(name) > 100:
        raise ValueError("name: at most 100 characters")
    if "\x00" in name:  # PostgreSQL text cannot hold U+0000
        raise ValueError("name: contains a NUL character (U+0000), which cannot be stored")
    token = ApiToken.generate()
    api_token = ApiToken.objects.create(
        user=user, name=name, prefix=token[:8], digest=ApiToken.hash(token)
    )
    return api_token, token


def api_token_revoke(*, api_token: ApiToken) -> None:
    if api_token.revoked_at is None:
        api_token.revoked_at = timezone.now()
        api_token.save(update_fields=["revoked_at"])
