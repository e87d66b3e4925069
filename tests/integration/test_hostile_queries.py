"""Query values PostgreSQL refuses (they were 500s before): a NUL character and
integers past bigint were 500s there, while SQLite let them through."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from optimizer.import_uploads import upload_keep
from optimizer.models import Run
from optimizer.tasksets.models import TaskSet
from tests.integration.conftest import api_token

pytestmark = pytest.mark.django_db


def test_a_nul_status_filter_is_a_400_naming_status_not_a_database_error(user_client):
    response = user_client.get("/api/runs/?status=%00")
    assert response.status_code == 400
    assert response.json()["problems"][0]["field"] == "status"


def test_an_offset_and_ids_past_bigint_are_answered_without_a_500(user_client):
    created = user_client.post(
        "/api/tasksets/import",
        {"name": "s", "filename": "a.jsonl", "content": '{"task_id": "a", "input": "x"}'},
        content_type="application/json",
    ).json()
    big = str(2**63)
    response = user_client.get(f"/api/tasksets/{created['id']}?offset={big}&limit={big}")
    assert response.status_code == 200 and response.json()["tasks"] == []
    for url in [f"/api/runs/{big}", f"/api/tasksets/{big}", f"/runs/{big}/", f"/tasksets/{big}/"]:
        assert user_client.get(url).status_code == 404, url


def test_a_launch_form_body_nested_ten_thousand_deep_is_a_400(user_client):
    body = '{"task_set_id": ' + "[" * 10_000 + "]" * 10_000 + "}"
    response = user_client.post("/runs/new/", data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["problems"][0]["field"] == "config"
    assert not Run.objects.exists()


def test_a_nul_in_a_task_set_name_is_a_400_naming_name_through_the_api_and_nothing_is_saved(
    web_server, user
):
    token = api_token(user)
    body = json.dumps(
        {
            "name": "evil\u0000name",
            "filename": "a.jsonl",
            "content": '{"task_id": "a", "input": "x"}',
        }
    ).encode()
    request = urllib.request.Request(
        web_server.url + "/api/tasksets/import",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400
    problems = json.loads(refused.value.read())["problems"]
    assert problems[0]["field"] == "name" and "NUL" in problems[0]["message"], problems
    assert not TaskSet.objects.exists()


def test_a_nul_in_the_import_preview_s_name_is_a_page_naming_the_field(user, user_client):
    token = upload_keep(
        user=user, upload=SimpleUploadedFile("a.jsonl", b'{"task_id": "a", "input": "x"}\n')
    )
    response = user_client.get(
        "/tasksets/import/preview/", {"token": token, "name": "evil\x00name"}
    )
    assert (
        response.status_code == 200
        and "name: contains a NUL character" in response.content.decode()
    )
    assert not TaskSet.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        "/runs/?q=%00",
        "/tasksets/?q=%00",
        "/verifiers/?q=%00",
        "/api/tasksets/?q=%00",
        "/api/verifiers/?q=%00",
        "/api/runs/?q=%00",
        "/runs/list.json?q=%00",
    ],
)
def test_a_nul_in_any_search_is_answered_without_a_database_error(user_client, url):
    response = user_client.get(url)
    assert response.status_code in (200, 400), (url, response.status_code)
