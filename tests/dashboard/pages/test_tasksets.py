import json
from urllib.parse import parse_qsl

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from optimizer.tasksets.files import DefaultSplit
from optimizer.tasksets.models import Task, TaskSet
from optimizer.tasksets.services import taskset_import

pytestmark = pytest.mark.django_db


def rows(n):
    return "\n".join(
        json.dumps({"task_id": f"t{i:02}", "input": f"Ticket number {i}"}) for i in range(n)
    )


def upload(name, content):
    return SimpleUploadedFile(name, content.encode())


def preview(client, name, file, **options):
    """Upload a file (step 1) and follow to its preview (step 2)."""
    return client.post("/tasksets/import/", {"name": name, "file": file, **options}, follow=True)


def confirm(client, preview_response, **changes):
    """Confirm the import with the options shown on the preview page (step 3)."""
    params = dict(parse_qsl(preview_response.request["QUERY_STRING"]))
    return client.post("/tasksets/import/confirm/", {**params, **changes}, follow=True)


def test_importing_from_the_browser_previews_first_and_saves_only_on_confirm(user_client):
    shown = preview(user_client, "Tickets", upload("t.jsonl", rows(3)))
    page = shown.content.decode()
    assert (
        "Confirm import" in page
        and "3</strong> rows" in page
        and "3 new, 0 updated, 0 unchanged" in page
    )
    assert not TaskSet.objects.exists()
    done = confirm(user_client, shown)
    assert (
        "Imported t.jsonl into Tickets: 3 new, 0 updated, 0 unchanged; 3 rows without a split "
        "dealt by the rule: 60/40/0 below 10 rows, seed 0 (2 train, 1 val)."
    ) in done.content.decode()
    assert TaskSet.objects.get().tasks.count() == 3
    again = confirm(user_client, shown)  # the kept upload is gone once imported
    assert "this preview has expired or was already imported" in again.content.decode()
    assert Task.objects.count() == 3


def test_a_broken_upload_lists_line_and_field_and_cannot_be_confirmed(user_client):
    content = rows(6) + '\n{"task_id": "x" "input": "y"}\n'
    shown = preview(user_client, "Tickets", upload("t.jsonl", content))
    page = shown.content.decode()
    assert "t.jsonl line 7: invalid JSON (Expecting &#x27;,&#x27; delimiter" in page
    assert '<button type="submit" class="primary" disabled>Confirm import</button>' in page
    assert "Nothing was imported" in confirm(user_client, shown).content.decode()
    assert not TaskSet.objects.exists()


def test_a_csv_upload_uses_the_field_mapping_from_the_form(user_client):
    content = "question,answer,topic\nWho painted the Mona Lisa?,Leonardo,art\n"
    shown = preview(
        user_client,
        "Quiz",
        upload("q.csv", content),
        input_field="question",
        expected_field="answer",
    )
    assert "kept in metadata: <code>topic</code>" in shown.content.decode()
    confirm(user_client, shown)
    task = Task.objects.get()
    assert (task.input, task.expected, task.metadata) == (
        "Who painted the Mona Lisa?",
        "Leonardo",
        {"topic": "art"},
    )


def test_the_preview_pages_rows_on_the_server_and_the_default_split_can_be_changed(user_client):
    shown = preview(user_client, "Tickets", upload("t.jsonl", rows(45)))
    assert "Page 1 of 3" in shown.content.decode() and "t20" not in shown.content.decode()
    url = shown.request["PATH_INFO"] + "?" + shown.request["QUERY_STRING"]
    third = user_client.get(url + "&page=3").content.decode()
    assert "<code>t40</code>" in third and "<code>t00</code>" not in third
    assert "22 train · 14 val · 9 holdout" in shown.content.decode()
    assert (
        "45 rows without a split dealt by the rule: 50/30/20 from 10 rows, seed 0 "
        "(22 train, 14 val, 9 holdout)." in shown.content.decode()
    )
    changed = user_client.get(url + "&default_train=0.8&default_val=0.2&split_seed=5")
    assert "36 train · 9 val · 0 holdout" in changed.content.decode()
    assert "dealt as asked: train 0.8, val 0.2, seed 5" in changed.content.decode()


def test_the_browse_page_is_paginated_and_searchable(user, user_client):
    task_set, _ = taskset_import(owner=user, name="Big", filename="t.jsonl", content=rows(60))
    first = user_client.get(f"/tasksets/{task_set.pk}/").content.decode()
    assert "t49" in first and "t50" not in first and "Page 1 of 2" in first
    found = user_client.get(f"/tasksets/{task_set.pk}/?q=number 55").content.decode()
    assert "t55" in found and "t01" not in found


def test_searches_ignore_a_nul_character_which_no_database_query_may_hold(user, user_client):
    task_set, _ = taskset_import(owner=user, name="Big", filename="t.jsonl", content=rows(3))
    found = user_client.get(f"/tasksets/{task_set.pk}/", {"q": "number\x00 2"}).content.decode()
    assert "t02" in found and "t01" not in found
    assert "Big" in user_client.get("/tasksets/", {"q": "B\x00ig"}).content.decode()
    assert [s["name"] for s in user_client.get("/api/tasksets/", {"q": "B\x00ig"}).json()] == [
        "Big"
    ]
    assert user_client.get("/verifiers/", {"q": "\x00", "kind": "\x00"}).status_code == 200


def test_a_nul_character_in_a_set_name_or_a_task_field_is_refused_and_nothing_saved(
    user, user_client
):
    response = preview(user_client, "Tick\x00ets", upload("t.jsonl", rows(2)))
    assert "name: contains a NUL character" in response.content.decode()
    assert "name: contains a NUL character" in confirm(user_client, response).content.decode()
    assert not TaskSet.objects.exists()
    task_set, _ = taskset_import(owner=user, name="S", filename="t.jsonl", content=rows(1))
    task = task_set.tasks.get()
    response = user_client.post(
        f"/tasksets/{task_set.pk}/tasks/{task.pk}/",
        {
            "input": "Ticket\x00",
            "expected": "NaN",
            "params": "{}",
            "metadata": "{}",
            "verifier": "",
            "split": "train",
        },
    )
    page = response.content.decode()
    assert response.status_code == 400
    assert (
        "expected: nan is not a JSON number" in page and "input: contains a NUL character" in page
    )
    task.refresh_from_db()
    assert task.input == "Ticket number 0" and task.expected is None


def test_editing_a_task_validates_it_and_names_the_bad_field(user, user_client):
    task_set, _ = taskset_import(owner=user, name="S", filename="t.jsonl", content=rows(1))
    task = task_set.tasks.get()
    url = f"/tasksets/{task_set.pk}/tasks/{task.pk}/"
    bad = {
        "input": "hi",
        "metadata": '{"expectations": {"mustMention": [{"anyOf": []}]}}',
        "split": "val",
    }
    response = user_client.post(url, bad)
    assert (
        response.status_code == 400
        and "metadata.expectations.mustMention[0].anyOf" in response.content.decode()
    )
    good = {
        **bad,
        "metadata": '{"expectations": {"mustMention": [{"text": "refund"}]}}',
        "expected": '"yes"',
    }
    assert user_client.post(url, good).status_code == 302
    task.refresh_from_db()
    assert (task.split, task.expected, task.metadata["expectations"]["mustMention"][0]["text"]) == (
        "val",
        "yes",
        "refund",
    )


def test_splits_are_assigned_by_hand_and_by_a_seeded_random_split(user, user_client):
    task_set, _ = taskset_import(
        owner=user,
        name="S",
        filename="t.jsonl",
        content=rows(10),
        default_split=DefaultSplit(ratios={"train": 0.6, "val": 0.4}),
    )
    user_client.post(
        f"/tasksets/{task_set.pk}/assign/", {"task_ids": ["t00", "t01"], "split": "holdout"}
    )
    assert set(task_set.tasks.filter(split="holdout").values_list("task_id", flat=True)) == {
        "t00",
        "t01",
    }
    response = user_client.post(
        f"/tasksets/{task_set.pk}/split/",
        {"train": "0.7", "val": "0.3", "holdout": "0", "seed": "3"},
        follow=True,
    )
    assert (
        "Split as asked: train 0.7, val 0.3, seed 3: 7 train, 3 val." in response.content.decode()
    )
    by_rule = user_client.post(f"/tasksets/{task_set.pk}/split/", {"seed": "3"}, follow=True)
    assert (
        "Split by the rule: 50/30/20 from 10 rows, seed 3: 5 train, 3 val, 2 holdout."
        in by_rule.content.decode()
    )


def test_a_split_form_with_a_ratio_that_is_not_a_number_names_the_field_and_changes_nothing(
    user, user_client
):
    task_set, _ = taskset_import(owner=user, name="S", filename="t.jsonl", content=rows(4))
    before = dict(task_set.tasks.values_list("task_id", "split"))
    response = user_client.post(
        f"/tasksets/{task_set.pk}/split/", {"train": "most", "val": "0.3", "seed": "x"}, follow=True
    )
    page = response.content.decode()
    assert "Not split: train: must be a number (and 1 more problem)." in page
    assert dict(task_set.tasks.values_list("task_id", "split")) == before


def test_moving_tasks_to_a_split_that_does_not_exist_names_the_splits(user, user_client):
    task_set, _ = taskset_import(owner=user, name="S", filename="t.jsonl", content=rows(2))
    page = user_client.post(
        f"/tasksets/{task_set.pk}/assign/", {"task_ids": ["t00"], "split": "test"}, follow=True
    ).content.decode()
    assert "Not changed: split: use one of train, val, holdout." in page


def test_other_users_cannot_see_a_private_set_and_cannot_change_a_shared_one(user, other_client):
    task_set, _ = taskset_import(owner=user, name="S", filename="t.jsonl", content=rows(2))
    assert other_client.get(f"/tasksets/{task_set.pk}/").status_code == 404
    task_set.shared = True
    task_set.save()
    assert other_client.get(f"/tasksets/{task_set.pk}/").status_code == 200
    assert (
        other_client.post(
            f"/tasksets/{task_set.pk}/split/", {"train": "1", "seed": "1"}
        ).status_code
        == 404
    )
    task = task_set.tasks.first()
    other_client.post(
        f"/tasksets/{task_set.pk}/tasks/{task.pk}/", {"input": "hacked", "split": "train"}
    )
    task.refresh_from_db()
    assert task.input != "hacked"


def test_task_and_set_text_is_escaped_on_every_task_set_page(user, user_client):
    script = "<script>alert(1)</script>"
    row = {
        "task_id": "t<b>1</b>",
        "input": script,
        "expected": script,
        "metadata": {
            "note": script,
            "expectations": {"mustMention": [{"text": script, "message": script}]},
        },
    }
    task_set, _ = taskset_import(
        owner=user, name=script, filename="t.jsonl", content=json.dumps(row)
    )
    task = task_set.tasks.get()
    for url in (
        "/tasksets/",
        f"/tasksets/{task_set.pk}/",
        f"/tasksets/{task_set.pk}/tasks/{task.pk}/",
        f"/tasksets/{task_set.pk}/?q=<b>",
    ):
        page = user_client.get(url).content.decode()
        assert script not in page and "<b>1</b>" not in page
        assert "&lt;script&gt;" in page
    refused = preview(user_client, script, upload("<i>.jsonl", '{"task_id": "<i>", "input": 5}'))
    assert "input: must be non-empty text" in refused.content.decode()
    assert "<i>" not in refused.content.decode() and script not in refused.content.decode()


def test_a_kept_upload_is_only_usable_by_the_user_who_sent_it_and_a_forged_token_is_refused(
    user_client, other_client
):
    shown = preview(user_client, "Tickets", upload("t.jsonl", rows(2)))
    query = shown.request["QUERY_STRING"]
    stolen = other_client.get(f"/tasksets/import/preview/?{query}")
    assert "this preview has expired or was already imported" in stolen.content.decode()
    assert "Nothing was imported" in confirm(other_client, shown).content.decode()
    forged = user_client.get("/tasksets/import/preview/?name=T&token=eyJ1IjoxfQ:forged:sig")
    assert (
        forged.status_code == 400
        and "this preview has expired or is not valid" in forged.content.decode()
    )
    assert not TaskSet.objects.exists()


def test_import_options_that_are_not_numbers_or_formats_are_named_and_nothing_is_kept(user_client):
    response = preview(
        user_client,
        "Tickets",
        upload("t.jsonl", rows(2)),
        default_train="most",
        split_seed="x",
        format="xlsx",
    )
    page = response.content.decode()
    assert response.status_code == 400
    for problem in (
        "default_train: must be a number",
        "split_seed: must be a whole number",
        "format: use one of",
    ):
        assert problem in page
    assert not TaskSet.objects.exists()


def test_an_upload_without_a_file_is_refused_naming_the_file_field_and_nothing_is_kept(user_client):
    response = user_client.post("/tasksets/import/", {"name": "Tickets"})
    assert response.status_code == 400
    assert "file: choose a .jsonl, .json, .yaml, .csv or .tsv file" in response.content.decode()
    assert not TaskSet.objects.exists()


def test_the_confirm_page_reads_the_shared_box_and_a_bad_option_there_imports_nothing(user_client):
    shown = preview(user_client, "Tickets", upload("t.jsonl", rows(2)))
    refused = confirm(user_client, shown, shared="on", split_seed="soon")
    assert "Nothing was imported: split_seed: must be a whole number" in refused.content.decode()
    assert not TaskSet.objects.exists()
    confirm(user_client, shown, shared="on")
    assert TaskSet.objects.get().shared is True


def test_the_confirm_page_leaves_a_set_private_when_the_shared_box_is_not_ticked(user_client):
    confirm(user_client, preview(user_client, "Tickets", upload("t.jsonl", rows(2))))
    assert TaskSet.objects.get().shared is False
