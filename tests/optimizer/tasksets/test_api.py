import json
from pathlib import Path

import pytest
from django.test import Client

from dashboard.account_services import api_token_create
from optimizer.tasksets.models import TaskSet

pytestmark = pytest.mark.django_db

JSONL = '{"task_id": "a", "input": "Refund please", "split": "val"}\n{"task_id": "b", "input": "Where is my order?"}\n'


def post(client, url, body, **headers):
    return client.post(url, json.dumps(body), content_type="application/json", **headers)


def test_it_imports_lists_and_gets_a_task_set(user_client):
    response = post(
        user_client,
        "/api/tasksets/import",
        {"name": "Support", "filename": "t.jsonl", "content": JSONL},
    )
    assert response.status_code == 201
    assert response.json()["created"] == 2
    listed = user_client.get("/api/tasksets/").json()
    assert [(s["name"], s["task_count"]) for s in listed] == [("Support", 2)]
    detail = user_client.get(f"/api/tasksets/{listed[0]['id']}?split=val").json()
    assert [t["task_id"] for t in detail["tasks"]] == ["a"]


def test_a_broken_file_is_a_400_listing_lines_and_fields_and_saves_nothing(user_client):
    content = (
        JSONL
        + '{"task_id": "c", "input": "x", "verifier": {"kind": "in_process", "fn_name": "foo"}}\n{oops\n'
    )
    response = post(
        user_client,
        "/api/tasksets/import",
        {"name": "S", "filename": "t.jsonl", "content": content},
    )
    assert response.status_code == 400
    first, second = response.json()["problems"]
    assert first["field"] == "t.jsonl line 3"
    assert first["message"].startswith(
        'verifier.fn_name: unknown fn "foo"; registered fns: contains, exact_match'
    )
    assert second == {
        "field": "t.jsonl line 4",
        "message": "invalid JSON (Expecting property name enclosed in double quotes at column 2)",
    }
    assert not TaskSet.objects.exists()


def test_csv_import_uses_the_column_mapping(user_client):
    body = {
        "name": "Quiz",
        "filename": "q.csv",
        "content": "q,a\nWho?,Me\n",
        "mapping": {"input": "q", "expected": "a"},
    }
    assert post(user_client, "/api/tasksets/import", body).status_code == 201
    assert TaskSet.objects.get().tasks.get().expected == "Me"


def test_private_task_sets_are_hidden_from_other_users(user_client, other_client):
    post(
        user_client, "/api/tasksets/import", {"name": "S", "filename": "t.jsonl", "content": JSONL}
    )
    set_id = TaskSet.objects.get().pk
    assert other_client.get("/api/tasksets/").json() == []
    assert other_client.get(f"/api/tasksets/{set_id}").status_code == 404


def test_an_offset_past_any_database_integer_reads_as_past_the_end(user_client):
    created = post(
        user_client,
        "/api/tasksets/import",
        {"name": "s", "filename": "a.jsonl", "content": '{"task_id": "a", "input": "x"}'},
    ).json()
    # 2**63 overflowed the database's integer (a 500).
    response = user_client.get(
        f"/api/tasksets/{created['id']}", {"offset": str(2**63), "limit": str(2**63)}
    )
    assert response.status_code == 200 and response.json()["tasks"] == []
    assert [
        t["task_id"]
        for t in user_client.get(f"/api/tasksets/{created['id']}", {"offset": "-5"}).json()["tasks"]
    ] == ["a"]


DATASETS = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"


@pytest.mark.parametrize(
    ("name", "first_input"),
    [
        ("alpaca.jsonl", "Give three tips for staying healthy."),
        ("array.json", "What is the capital of France?"),
        ("rows-object.json", "Write a haiku about rain."),
        ("seed001.yaml", "A customer was charged twice for one order. Reply to them."),
        ("semicolon.csv", "Largest planet; by mass?"),
        ("tasks.tsv", "Say hello"),
    ],
)
def test_a_script_with_a_token_imports_each_file_shape(user, name, first_input):
    _, token = api_token_create(user=user, name="script")
    script = Client()
    body = {
        "name": name,
        "filename": name,
        "content": (DATASETS / name).read_text(encoding="utf-8"),
    }  # a BOM stays in
    response = post(script, "/api/tasksets/import", body, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 201, response.content
    task_set = TaskSet.objects.get(name=name)
    assert task_set.tasks.first().input == first_input
    assert {"train", "val"} <= set(task_set.tasks.values_list("split", flat=True))


def test_a_dry_run_returns_the_preview_report_a_page_at_a_time_and_saves_nothing(user_client):
    content = "\n".join(json.dumps({"question": f"Q{i}?", "answer": str(i)}) for i in range(30))
    body = {
        "name": "Q",
        "filename": "q.jsonl",
        "content": content,
        "dry_run": True,
        "page": 2,
        "page_size": 25,
        "default_split": {"train": 0.5, "val": 0.5, "holdout": 0, "seed": 1},
    }
    report = post(user_client, "/api/tasksets/import", body).json()
    assert report["ok"] is True and report["pages"] == 2
    assert [r["task_id"] for r in report["rows"]] == [f"task-{i}" for i in range(26, 31)]
    assert report["split_counts"] == {"train": 15, "val": 15, "holdout": 0}
    assert report["default_split"]["rows"] == 30
    assert not TaskSet.objects.exists()


def test_an_import_without_ratios_is_dealt_by_the_stated_rule_and_given_ratios_win(user_client):
    content = "\n".join(json.dumps({"question": f"Q{i}?", "answer": str(i)}) for i in range(10))
    body = {"name": "Q", "filename": "q.jsonl", "content": content, "dry_run": True}
    report = post(user_client, "/api/tasksets/import", body).json()
    assert report["split_counts"] == {"train": 5, "val": 3, "holdout": 2}
    assert report["default_split"]["by_rule"] is True
    assert report["default_split"]["ratios"] == {"train": 0.5, "val": 0.3, "holdout": 0.2}
    assert "dealt by the rule: 50/30/20 from 10 rows, seed 0" in report["default_split"]["rule"]
    given = {**body, "default_split": {"train": 0.7, "val": 0.3}}
    assert post(user_client, "/api/tasksets/import", given).json()["split_counts"] == {
        "train": 7,
        "val": 3,
        "holdout": 0,
    }
    created = post(user_client, "/api/tasksets/import", {**body, "dry_run": False}).json()
    assert created["split_rule"] == (
        "10 rows without a split dealt by the rule: 50/30/20 from 10 rows, seed 0 "
        "(5 train, 3 val, 2 holdout)"
    )
