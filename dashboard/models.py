from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING, Self

from django.conf import settings
from django.db import models
from django.utils import timezone

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> Self:
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    """A per-user API token for scripts. Only a SHA-256 of the token is stored;
    the token itself is shown once, when created."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(
        max_length=12, help_text="First characters of the token, to recognise it"
    )
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def hash(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @classmethod
    def user_for(cls, token: str) -> User | None:
        """The active user a token belongs to, or None. Marks the token used (at
        most once a minute: it is shown in the UI, not audited)."""
        api_token = (
            cls.objects.active().select_related("user").filter(digest=cls.hash(token)).first()
        )
        if api_token is None or not api_token.user.is_active:
            return None
        now = timezone.now()
        if api_token.last_used_at is None or now - api_token.last_used_at > timedelta(minutes=1):
            cls.objects.filter(pk=api_token.pk).update(last_used_at=now)
        return api_token.user

    @staticmethod
    def generate() -> str:
        return "ft_" + secrets.token_urlsafe(32)
