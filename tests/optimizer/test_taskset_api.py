import json

import pytest

from optimizer.models import TaskSet

pytestmark = pytest.mark.django_db

JSONL = '{"task_id": "a", "input": "Refund please", "split": "val"}\n{"task_id": "b", "input": "Where is my order?"}\n'


def post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


def test_it_imports_lists_and_gets_a_task_set(user_client):
    response = post(user_client, "/api/tasksets/import", {"name": "Support", "filename": "t.jsonl", "content": JSONL})
    assert response.status_code == 201
    assert response.json()["created"] == 2
    listed = user_client.get("/api/tasksets/").json()
    assert [(s["name"], s["task_count"]) for s in listed] == [("Support", 2)]
    detail = user_client.get(f"/api/tasksets/{listed[0]['id']}?split=val").json()
    assert [t["task_id"] for t in detail["tasks"]] == ["a"]


def test_a_broken_file_is_a_400_listing_lines_and_fields_and_saves_nothing(user_client):
    content = JSONL + '{"task_id": "c", "input": "x", "verifier": {"kind": "in_process", "fn_name": "foo"}}\n{oops\n'
    response = post(user_client, "/api/tasksets/import", {"name": "S", "filename": "t.jsonl", "content": content})
    assert response.status_code == 400
    assert response.json()["problems"] == [
        {"field": "t.jsonl line 4", "message": "invalid JSON (Expecting property name enclosed in double quotes at column 2)"}]
    assert not TaskSet.objects.exists()


def test_csv_import_uses_the_column_mapping(user_client):
    body = {"name": "Quiz", "filename": "q.csv", "content": "q,a\nWho?,Me\n",
            "mapping": {"input": "q", "expected": "a"}}
    assert post(user_client, "/api/tasksets/import", body).status_code == 201
    assert TaskSet.objects.get().tasks.get().expected == "Me"


def test_private_task_sets_are_hidden_from_other_users(user_client, other_client):
    post(user_client, "/api/tasksets/import", {"name": "S", "filename": "t.jsonl", "content": JSONL})
    set_id = TaskSet.objects.get().pk
    assert other_client.get("/api/tasksets/").json() == []
    assert other_client.get(f"/api/tasksets/{set_id}").status_code == 404


def test_an_offset_past_any_database_integer_reads_as_past_the_end(user_client):
    created = post(user_client, "/api/tasksets/import", {"name": "s", "filename": "a.jsonl", "content": '{"task_id": "a", "input": "x"}'}).json()
    # 2**63 overflowed the database's integer (a 500).
    response = user_client.get(f"/api/tasksets/{created['id']}", {"offset": str(2**63), "limit": str(2**63)})
    assert response.status_code == 200 and response.json()["tasks"] == []
    assert [t["task_id"] for t in user_client.get(f"/api/tasksets/{created['id']}", {"offset": "-5"}).json()["tasks"]] == ["a"]
