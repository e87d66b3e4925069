from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Case, IntegerField, Value, When

from dashboard.lib.sharing import SharedQuerySet


class VerifierQuerySet(SharedQuerySet["Verifier"]):
    def lookup(self, user, slug: str) -> Verifier | None:
        """The verifier `user` means by an id, among these rows: their own, else
        the oldest other one (a shared verifier; for an admin, anyone's). Ids are
        unique per owner, so one id may name verifiers of several users."""
        mine = Case(
            When(owner_id=user.pk, then=Value(0)), default=Value(1), output_field=IntegerField()
        )
        return self.filter(slug=slug).order_by(mine, "pk").first()


class Verifier(models.Model):
    """A verifier spec (docs/verifier-semantics.md). `spec` is validated by the engine on every
    write through `verifiers_app.services`; `slug` is the spec's `id`."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="verifiers"
    )
    # Unique per owner, not globally: whether another user has some id must not
    # be observable (a global "already exists" told it).
    slug = models.SlugField(max_length=100)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=100, default="native")
    spec = models.JSONField()
    shared = models.BooleanField(default=False)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # Sample outputs the author saved as a mini test suite, re-scored on every edit in the
    # editor: [{name, output, task (a task row or null), expect: pass|borderline|fail|any,
    # expect_passed: passed|failed|any (absent in cases saved before it: any)}].
    test_cases = models.JSONField(default=list, blank=True)

    objects = VerifierQuerySet.as_manager()

    class Meta:
        ordering = ["name", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "slug"], name="verifier_unique_id_per_owner"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.slug})"


class VerifierVersion(models.Model):
    """Every saved edit of a verifier, for history and diffs (version 1 = as created)."""

    verifier = models.ForeignKey(Verifier, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    spec = models.JSONField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["verifier", "-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["verifier", "number"], name="verifier_version_unique_number"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.verifier.slug} v{self.number}"
