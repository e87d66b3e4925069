from datetime import timedelta

import pytest
from django.utils import timezone

from verifiers_app.engine.checks import CHECK_TYPES
from verifiers_app.models import Verifier
from verifiers_app.selectors import (
    check_type_fields,
    verifier_kinds,
    verifier_list,
    verifier_version_diff,
)
from verifiers_app.services import verifier_create, verifier_update

pytestmark = pytest.mark.django_db


def spec(id, **extra):
    return {"id": id, "checks": [{"type": "json_valid"}], **extra}


def test_the_list_shows_own_and_shared_verifiers_most_recently_used_first(user, other_user):
    verifier_create(owner=user, spec=spec("mine-old"))
    verifier_create(owner=user, spec=spec("mine-new"))
    verifier_create(owner=other_user, spec=spec("theirs-shared"), shared=True)
    verifier_create(owner=other_user, spec=spec("theirs-private"))
    Verifier.objects.filter(slug="mine-new").update(last_used_at=timezone.now())
    Verifier.objects.filter(slug="mine-old").update(last_used_at=timezone.now() - timedelta(days=1))
    assert [v.slug for v in verifier_list(user=user)] == ["mine-new", "mine-old", "theirs-shared"]


def test_admins_see_every_verifier(admin_user, other_user):
    verifier_create(owner=other_user, spec=spec("theirs-private"))
    assert [v.slug for v in verifier_list(user=admin_user)] == ["theirs-private"]


def test_search_matches_id_or_name_and_kinds_are_listed(user):
    verifier_create(owner=user, spec=spec("refund", name="Refund policy"))
    verifier_create(owner=user, spec={"id": "qa", "kind": "in_process", "fn_name": "contains"})
    assert [v.slug for v in verifier_list(user=user, query="policy")] == ["refund"]
    assert [v.slug for v in verifier_list(user=user, kind="in_process")] == ["qa"]
    assert verifier_kinds(user=user) == ["in_process", "native"]


def test_the_version_diff_marks_added_and_removed_lines(user):
    verifier = verifier_create(owner=user, spec=spec("v", passThreshold=1.0))
    verifier_update(verifier=verifier, spec=spec("v", passThreshold=0.7), user=user)
    lines = verifier_version_diff(verifier=verifier, old=1, new=2)
    assert ("diff-del", '-  "passThreshold": 1.0') in lines
    assert ("diff-add", '+  "passThreshold": 0.7') in lines


def test_the_editor_knows_each_check_types_typed_fields():
    fields = check_type_fields()
    assert {f["name"]: f["type"] for f in fields["contains"]} == {
        "value": "string",
        "caseSensitive": "boolean",
    }
    assert fields["json_keys"][0] == {
        "name": "requiredKeys",
        "type": "array",
        "required": True,
        "minItems": 1,
        "items": {"type": "string", "minLength": 1},
    }
    assert fields["min_length"][0] == {
        "name": "value",
        "type": "integer",
        "required": True,
        "minimum": 0,
    }
    assert fields["contains"][1]["default"] is False and not fields["contains"][1]["required"]


def test_the_editors_field_types_follow_the_check_params_models():
    # A param added to an engine model shows up in the form with no second table to edit.
    for name, check_type in CHECK_TYPES.items():
        schema = check_type.params.model_json_schema()
        assert [f["name"] for f in check_type_fields()[name]] == list(schema.get("properties", {}))
        for field in check_type_fields()[name]:
            assert field["type"] == schema["properties"][field["name"]]["type"]


def test_a_shared_verifier_is_readable_but_only_its_owner_or_an_admin_may_edit_it(
    user, other_user, admin_user
):
    from django.http import Http404

    from verifiers_app.selectors import verifier_for_user

    verifier = verifier_create(owner=other_user, spec=spec("tone"))
    with pytest.raises(Http404):
        verifier_for_user(user, "tone")
    verifier.shared = True
    verifier.save(update_fields=["shared"])
    assert verifier_for_user(user, "tone") == verifier
    with pytest.raises(Http404):
        verifier_for_user(user, "tone", edit=True)
    assert verifier_for_user(admin_user, "tone", edit=True) == verifier
    with pytest.raises(Http404):
        verifier_for_user(other_user, "to\x00ne")
