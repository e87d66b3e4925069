import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from optimizer.models import Run, RunStatus
from verifiers_app.models import Verifier
from verifiers_app.services import verifier_create, verifier_update

pytestmark = pytest.mark.django_db

SPEC = {
    "id": "tone",
    "name": "Tone",
    "checks": [{"id": "polite", "type": "contains", "params": {"value": "please"}}],
}


def test_the_list_searches_filters_by_kind_and_shows_last_used(user, user_client):
    verifier_create(owner=user, spec=SPEC)
    verifier_create(
        owner=user, spec={"id": "qa-exact", "kind": "in_process", "fn_name": "exact_match"}
    )
    page = user_client.get("/verifiers/?q=ton").content.decode()
    assert "tone" in page and "qa-exact" not in page and "never" in page
    page = user_client.get("/verifiers/?kind=in_process").content.decode()
    assert "qa-exact" in page and ">Tone<" not in page


def test_creating_from_the_editor_saves_and_redirects_to_the_detail_page(user_client):
    response = user_client.post("/verifiers/new/", {"spec": json.dumps(SPEC)})
    assert response.status_code == 302 and response.url == "/verifiers/tone/"
    assert Verifier.objects.get().versions.count() == 1


def test_an_invalid_spec_is_shown_again_with_the_error_naming_the_field(user_client):
    bad = {"id": "r", "checks": [{"type": "regex", "params": {"pattern": "[a-"}}]}
    response = user_client.post("/verifiers/new/", {"spec": json.dumps(bad)})
    assert response.status_code == 400
    assert "checks[0].params.pattern: invalid regular expression" in response.content.decode()
    assert not Verifier.objects.exists()


def test_broken_json_names_the_line(user_client):
    response = user_client.post("/verifiers/new/", {"spec": '{\n  "id": "x",\n  oops\n}'})
    assert "JSON: invalid JSON (line 3" in response.content.decode()


def test_json_nested_too_deeply_is_a_clear_error_not_a_500(user_client):
    response = user_client.post("/verifiers/new/", {"spec": "[" * 100_000 + "]" * 100_000})
    assert response.status_code == 400
    assert "JSON: invalid JSON (nested more than 100 levels deep)" in response.content.decode()
    assert not Verifier.objects.exists()


def test_a_spec_file_can_be_imported_and_exported(user_client):
    upload = SimpleUploadedFile(
        "tone.json", json.dumps(SPEC).encode(), content_type="application/json"
    )
    assert user_client.post("/verifiers/new/", {"spec": "", "spec_file": upload}).status_code == 302
    exported = user_client.get("/verifiers/tone/export.json")
    assert exported["Content-Disposition"] == 'attachment; filename="tone.json"'
    assert json.loads(exported.content) == SPEC


def test_an_unchanged_save_creates_no_version_and_says_so(user, user_client):
    verifier_create(owner=user, spec=SPEC)
    response = user_client.post("/verifiers/tone/edit/", {"spec": json.dumps(SPEC)}, follow=True)
    assert "No changes: nothing new was saved." in response.content.decode()
    assert Verifier.objects.get().version == 1


def test_the_diff_view_shows_what_an_edit_changed(user, user_client):
    verifier = verifier_create(owner=user, spec=SPEC)
    verifier_update(verifier=verifier, spec={**SPEC, "passThreshold": 0.5}, user=user)
    page = user_client.get("/verifiers/tone/diff/").content.decode()
    assert '<span class="diff-add">+  &quot;passThreshold&quot;: 0.5' in page


def test_spec_text_is_escaped_on_every_page(user, user_client):
    verifier_create(owner=user, spec={**SPEC, "name": "<script>alert(1)</script>"})
    for url in ("/verifiers/", "/verifiers/tone/", "/verifiers/tone/edit/"):
        page = user_client.get(url).content.decode()
        assert "<script>alert(1)</script>" not in page


def test_shared_verifiers_are_visible_but_only_the_owner_can_edit_or_delete(user, other_client):
    verifier_create(owner=user, spec=SPEC, shared=True)
    assert other_client.get("/verifiers/tone/").status_code == 200
    assert other_client.get("/verifiers/tone/edit/").status_code == 404
    assert other_client.post("/verifiers/tone/delete/").status_code == 404
    assert other_client.post("/verifiers/tone/duplicate/").status_code == 302
    assert Verifier.objects.get(slug="tone-copy").owner.username == "bob"


def test_private_verifiers_are_hidden_from_others_but_admins_see_all(
    user, other_client, admin_client_logged_in
):
    verifier_create(owner=user, spec=SPEC)
    assert other_client.get("/verifiers/tone/").status_code == 404
    assert "tone" not in other_client.get("/verifiers/").content.decode()
    assert admin_client_logged_in.get("/verifiers/tone/edit/").status_code == 200


def test_deleting_a_verifier_in_use_is_refused_with_a_message(user, user_client):
    verifier = verifier_create(owner=user, spec=SPEC)
    Run.objects.create(owner=user, status=RunStatus.RUNNING).verifiers.add(verifier)
    response = user_client.post("/verifiers/tone/delete/", follow=True)
    assert "Not deleted: verifier &quot;tone&quot; is used by" in response.content.decode()
    assert Verifier.objects.exists()
