import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from verifiers_app.models import Verifier

pytestmark = pytest.mark.django_db

SPEC = {
    "id": "refund-policy-quality",
    "name": "Refund policy quality",
    "kind": "native",
    "passThreshold": 1.0,
    "checks": [
        {"id": "policy-expectations", "type": "task_expectations", "weight": 1, "params": {}}
    ],
}


def create(*args):
    out = StringIO()
    call_command("verifiers", "create", *args, stdout=out)
    return out.getvalue().strip()


def test_it_creates_then_reports_unchanged_then_updates_by_id(admin_user, tmp_path):
    path = tmp_path / "refund-quality.json"
    path.write_text(json.dumps(SPEC))
    assert create(str(path)) == "Created verifier refund-policy-quality · pass_threshold 1.0"
    assert create(str(path)) == "Unchanged verifier refund-policy-quality · pass_threshold 1.0"
    path.write_text(json.dumps({**SPEC, "passThreshold": 0.75}))
    assert create(str(path)) == "Updated verifier refund-policy-quality · pass_threshold 0.75"
    verifier = Verifier.objects.get()
    assert (verifier.owner, verifier.version) == (admin_user, 2)


def test_owner_can_be_named_and_a_missing_owner_is_an_error_naming_the_option(user, tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC))
    with pytest.raises(CommandError, match="--owner: no superuser exists"):
        create(str(path))
    with pytest.raises(CommandError, match="--owner: no user named 'nobody'"):
        create(str(path), "--owner", "nobody")
    create(str(path), "--owner", "alice")
    assert Verifier.objects.get().owner == user


def test_an_invalid_spec_exits_2_naming_the_file_and_field(admin_user, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps({"id": "bad", "checks": [{"type": "regex", "params": {"pattern": "(x"}}]})
    )
    with pytest.raises(
        CommandError, match=r"bad.json: checks\[0\]\.params\.pattern: invalid regular expression"
    ) as error:
        create(str(path))
    assert error.value.returncode == 2
    assert not Verifier.objects.exists()
