from datetime import timedelta

import pytest
from django.utils import timezone

from verifiers_app.models import Verifier
from verifiers_app.selectors import check_type_fields, verifier_kinds, verifier_list, verifier_version_diff
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
    assert {f["name"]: f["type"] for f in fields["contains"]} == {"value": "text", "caseSensitive": "bool"}
    assert fields["json_keys"][0] == {"name": "requiredKeys", "type": "list", "required": True, "default": None}
    assert fields["min_length"][0]["type"] == "int"


def test_a_shared_verifier_is_readable_but_only_its_owner_or_an_admin_may_edit_it(user, other_user, admin_user):
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
