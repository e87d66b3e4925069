"""Query values PostgreSQL refuses (they were 500s before): a NUL character and
integers past bigint were 500s there, while SQLite let them through."""

from __future__ import annotations

import pytest

from optimizer.models import Run

pytestmark = pytest.mark.django_db


def test_a_nul_status_filter_is_a_400_naming_status_not_a_database_error(user_client):
    response = user_client.get("/api/runs/?status=%00")
    assert response.status_code == 400
    assert response.json()["problems"][0]["field"] == "status"


def test_an_offset_and_ids_past_bigint_are_answered_without_a_500(user_client):
    created = user_client.post("/api/tasksets/import", {"name": "s", "filename": "a.jsonl", "content": '{"task_id": "a", "input": "x"}'},
                               content_type="application/json").json()
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
