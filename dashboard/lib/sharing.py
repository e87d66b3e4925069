"""Who sees and who changes an owned, shareable row (verifiers, task sets): the
one queryset for both. It lives in the lowest Django app so that every app above
can use it (dependencies point down)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self, TypeVar

from django.db import models
from django.db.models import Q

if TYPE_CHECKING:
    from django.contrib.auth.models import User

Owned = TypeVar("Owned", bound=models.Model)


class SharedQuerySet(models.QuerySet[Owned]):
    """Rows with an `owner` and a `shared` flag."""

    def visible_to(self, user: User) -> Self:
        """Rows a user may see: their own and shared ones (admins see all)."""
        if user.is_superuser:
            return self
        return self.filter(Q(owner=user) | Q(shared=True))

    def editable_by(self, user: User) -> Self:
        """Rows a user may change or delete: their own (admins: all). Sharing is read-only."""
        if user.is_superuser:
            return self
        return self.filter(owner=user)
