"""Which user owns what a management command creates (`--owner USERNAME`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def command_owner(username: str | None) -> User:
    """The named user, or the first superuser when no `--owner` is given."""
    User = get_user_model()
    if username:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"--owner: no user named {username!r}", returncode=2)
        return user
    user = User.objects.filter(is_superuser=True).order_by("pk").first()
    if user is None:
        raise CommandError(
            "--owner: no superuser exists to own it; pass --owner USERNAME "
            "(or run createsuperuser)",
            returncode=2,
        )
    return user
