"""Read paths for verifier pages and the API."""

from __future__ import annotations

import difflib
import json

from django.db.models import F, Q, QuerySet
from django.http import Http404

from dashboard.lib.storable import without_nul
from verifiers_app.engine.checks import CHECK_TYPES
from verifiers_app.models import Verifier, VerifierVersion


def verifier_for_user(user, slug: str, *, edit: bool = False) -> Verifier:
    """The verifier `user` means by `slug` if they may see it (own, shared, admin)
    — with `edit`, change it (own, admin) — else Http404. Pages and the API use
    this one rule."""
    if "\x00" in slug:  # no id holds one, and PostgreSQL would refuse the query (a 500)
        raise Http404("No verifier has this id")
    verifiers = Verifier.objects.editable_by(user) if edit else Verifier.objects.visible_to(user)
    verifier = verifiers.select_related("owner").lookup(user, slug)
    if verifier is None:
        raise Http404("No verifier has this id")
    return verifier


def verifier_list(*, user, query: str = "", kind: str = "") -> QuerySet[Verifier]:
    """Verifiers the user may see, most recently used first, filtered by a search
    over id and name and by kind."""
    verifiers = Verifier.objects.visible_to(user).select_related("owner")
    query, kind = without_nul(query), without_nul(kind)
    if query:
        verifiers = verifiers.filter(Q(slug__icontains=query) | Q(name__icontains=query))
    if kind:
        verifiers = verifiers.filter(kind=kind)
    return verifiers.order_by(F("last_used_at").desc(nulls_last=True), "name", "slug")


def verifier_kinds(*, user) -> list[str]:
    return sorted(set(Verifier.objects.visible_to(user).values_list("kind", flat=True)))


def verifier_version_diff(*, verifier: Verifier, old: int, new: int) -> list[tuple[str, str]]:
    """The unified diff between two saved versions as (css class, line) pairs;
    `VerifierVersion.DoesNotExist` when either number is not a version."""
    versions = {v.number: v for v in verifier.versions.filter(number__in=[old, new])}
    if old not in versions or new not in versions:
        raise VerifierVersion.DoesNotExist(
            f"verifier {verifier.slug} has no version {old if old not in versions else new}"
        )
    lines = difflib.unified_diff(
        _pretty(versions[old].spec),
        _pretty(versions[new].spec),
        f"version {old}",
        f"version {new}",
        lineterm="",
    )
    return [(_line_class(line), line) for line in lines]


def check_type_fields() -> dict[str, list[dict]]:
    """For the editor's form: each check type's params, read from its pydantic
    model's JSON Schema (`model_json_schema()`), so the form follows the engine:
    one entry per param, `{name, required, type, default?, minimum?, minLength?,
    minItems?, items?}` with JSON Schema's own words (string, boolean, integer,
    array)."""
    types = {}
    for name, check_type in CHECK_TYPES.items():
        schema = check_type.params.model_json_schema()
        required = set(schema.get("required", ()))
        types[name] = [
            {
                "name": param,
                "required": param in required,
                **{k: v for k, v in prop.items() if k != "title"},
            }
            for param, prop in schema.get("properties", {}).items()
        ]
    return types


def _pretty(spec) -> list[str]:
    return json.dumps(spec, indent=2, ensure_ascii=False).splitlines()


def _line_class(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "diff-file"
    if line.startswith("@@"):
        return "diff-hunk"
    return {"+": "diff-add", "-": "diff-del"}.get(line[:1], "diff-same")
