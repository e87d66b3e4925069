import json

import pytest

from optimizer.models import Run, RunStatus
from verifiers_app.engine import SpecError
from verifiers_app.models import Verifier
from verifiers_app.services import (
    VerifierInUse,
    VerifierNotFound,
    verifier_create,
    verifier_delete,
    verifier_duplicate,
    verifier_resolve,
    verifier_update,
    verifier_upsert,
)

pytestmark = pytest.mark.django_db

SPEC = {
    "id": "tone",
    "name": "Tone",
    "checks": [{"id": "polite", "type": "contains", "params": {"value": "please"}}],
}


def test_it_creates_a_verifier_with_its_first_version(user):
    verifier = verifier_create(owner=user, spec=SPEC)
    assert (verifier.slug, verifier.name, verifier.kind, verifier.version) == (
        "tone",
        "Tone",
        "native",
        1,
    )
    assert list(verifier.versions.values_list("number", flat=True)) == [1]


def test_it_rejects_a_regex_that_does_not_compile_naming_the_field(user):
    spec = {"id": "r", "checks": [{"type": "regex", "params": {"pattern": "([a-z"}}]}
    with pytest.raises(
        SpecError, match=r"checks\[0\]\.params\.pattern: invalid regular expression"
    ):
        verifier_create(owner=user, spec=spec)
    assert not Verifier.objects.exists()


def test_it_refuses_an_id_that_one_of_your_verifiers_already_has(user):
    verifier_create(owner=user, spec=SPEC)
    with pytest.raises(SpecError, match='id: a verifier with id "tone" already exists'):
        verifier_create(owner=user, spec=SPEC)


def test_ids_are_unique_per_owner_so_another_users_id_is_neither_refused_nor_revealed(
    user, other_user
):
    mine = verifier_create(owner=user, spec=SPEC)
    theirs = verifier_create(owner=other_user, spec={**SPEC, "name": "Bob's tone"})
    assert mine.slug == theirs.slug == "tone" and mine.pk != theirs.pk
    # Each user's "tone" is their own, wherever a verifier is named by id.
    assert verifier_resolve("tone", owner=user) == mine
    assert verifier_resolve("tone", owner=other_user) == theirs


def test_saving_an_edit_keeps_a_new_version_and_an_unchanged_save_creates_nothing(user):
    verifier = verifier_create(owner=user, spec=SPEC)
    edited = {**SPEC, "passThreshold": 0.5}
    assert verifier_update(verifier=verifier, spec=edited, user=user) is True
    assert verifier_update(verifier=verifier, spec={**edited, "kind": "native"}, user=user) is False
    verifier.refresh_from_db()
    assert verifier.version == 2
    assert verifier.spec["passThreshold"] == 0.5
    assert list(verifier.versions.values_list("number", flat=True)) == [2, 1]


def test_an_edit_saved_from_a_stale_copy_gets_the_next_version_number(user):
    verifier_create(owner=user, spec=SPEC)
    first_tab, second_tab = Verifier.objects.get(), Verifier.objects.get()
    verifier_update(verifier=first_tab, spec={**SPEC, "name": "From the first tab"}, user=user)
    assert (
        verifier_update(
            verifier=second_tab, spec={**SPEC, "name": "From the second tab"}, user=user
        )
        is True
    )
    assert second_tab.version == 3
    assert list(
        Verifier.objects.get().versions.order_by("number").values_list("number", flat=True)
    ) == [1, 2, 3]
    assert Verifier.objects.get().name == "From the second tab"


def test_an_edit_cannot_change_the_id(user):
    verifier = verifier_create(owner=user, spec=SPEC)
    with pytest.raises(SpecError, match="id: a verifier's id cannot change"):
        verifier_update(verifier=verifier, spec={**SPEC, "id": "other"}, user=user)


def test_upsert_reports_created_updated_and_unchanged(user):
    assert verifier_upsert(owner=user, spec=SPEC)[1] == "Created"
    assert verifier_upsert(owner=user, spec=SPEC)[1] == "Unchanged"
    assert verifier_upsert(owner=user, spec={**SPEC, "name": "Tone 2"})[1] == "Updated"


def test_upsert_never_overwrites_another_users_verifier(user, other_user):
    original = verifier_create(owner=user, spec=SPEC)
    copy, outcome = verifier_upsert(owner=other_user, spec={**SPEC, "name": "Hijacked"})
    assert outcome == "Created" and copy.owner == other_user
    original.refresh_from_db()
    assert original.name == "Tone"


def test_upsert_uses_a_shared_verifier_with_the_same_spec_as_it_is(user, other_user):
    shared = verifier_create(owner=user, spec=SPEC, shared=True)
    assert verifier_upsert(owner=other_user, spec=SPEC) == (shared, "Unchanged")


def test_duplicate_makes_a_copy_under_a_fresh_id_owned_by_the_caller(user, other_user):
    original = verifier_create(owner=user, spec=SPEC, shared=True)
    first = verifier_duplicate(verifier=original, owner=other_user)
    second = verifier_duplicate(verifier=original, owner=other_user)
    assert (first.slug, first.owner, first.name) == ("tone-copy", other_user, "Tone (copy)")
    assert second.slug == "tone-copy-2"
    assert first.spec["checks"] == SPEC["checks"]


def test_duplicating_a_verifier_with_a_hundred_character_id_keeps_the_copy_ids_valid(user):
    original = verifier_create(owner=user, spec={**SPEC, "id": "v" * 100})
    copies = [verifier_duplicate(verifier=original, owner=user).slug for _ in range(3)]
    assert copies == ["v" * 95 + "-copy", "v" * 93 + "-copy-2", "v" * 93 + "-copy-3"]


def test_delete_is_refused_while_an_active_run_uses_the_verifier(user):
    verifier = verifier_create(owner=user, spec=SPEC)
    run = Run.objects.create(owner=user, status=RunStatus.RUNNING)
    run.verifiers.add(verifier)
    with pytest.raises(VerifierInUse, match='verifier "tone" is used by'):
        verifier_delete(verifier=verifier)
    run.status = RunStatus.COMPLETED
    run.save()
    verifier_delete(verifier=verifier)
    assert not Verifier.objects.exists()


def test_resolve_finds_a_verifier_by_id_or_creates_it_from_a_spec_file(user, tmp_path):
    path = tmp_path / "tone.json"
    path.write_text(json.dumps(SPEC))
    created = verifier_resolve(str(path), owner=user)
    assert created.slug == "tone"
    assert verifier_resolve("tone", owner=user) == created
    assert verifier_resolve(str(path), owner=user).version == 1  # reused, not re-created


def test_resolve_names_a_bad_file_and_an_unknown_id(user, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"id": "x",\n "checks": [}')
    with pytest.raises(SpecError, match=r"broken.json: invalid JSON \(line 2"):
        verifier_resolve(str(broken), owner=user)
    with pytest.raises(VerifierNotFound, match='no verifier with id "nope"'):
        verifier_resolve("nope", owner=user)
