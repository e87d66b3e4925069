"""The runs list's sort and filters, tags and notes, archive and delete (refused
while a run is active, in the pages and the API), and forks that link both ways."""

import json

import pytest
from django.urls import reverse

from optimizer import selectors
from optimizer.models import Run, RunStatus
from tests.dashboard.pages.test_runs import config, post_json, task_set, verifier  # noqa: F401 - fixtures
from tests.factories import recorded_run

pytestmark = pytest.mark.django_db


def listed(client, **query) -> list[int]:
    return [row["id"] for row in client.get(reverse("runs:list_json"), query).json()["runs"]]


@pytest.fixture
def three_runs(user):
    # Seeds whose runs have three different best scores (a tie would leave the order to the database).
    a = recorded_run(owner=user, candidates=2, val_tasks=2, name="alpha", seed=2)
    b = recorded_run(
        owner=user, candidates=3, val_tasks=2, name="bravo", seed=3, status=RunStatus.RUNNING
    )
    c = recorded_run(owner=user, candidates=4, val_tasks=2, name="charlie", seed=4)
    Run.objects.filter(pk=b.pk).update(
        config=dict(b.config, task_lm={"provider": "openai", "model": "gpt-4o-mini"})
    )
    return a, b, c


def test_the_runs_list_sorts_by_every_column_both_ways(user_client, three_runs):
    for key in selectors.RUN_SORTS:
        up, down = listed(user_client, sort=key), listed(user_client, sort=f"-{key}")
        assert sorted(up) == sorted(down) == sorted(r.pk for r in three_runs), key
    a, b, c = three_runs
    assert listed(user_client, sort="name") == [a.pk, b.pk, c.pk]
    assert listed(user_client, sort="-name") == [c.pk, b.pk, a.pk]
    scores = {r.pk: Run.objects.get(pk=r.pk).best_score for r in three_runs}
    assert listed(user_client, sort="-best_score") == sorted(scores, key=lambda pk: -scores[pk])
    assert (
        listed(user_client, sort="model")[-1] == b.pk
        and listed(user_client, sort="-model")[0] == b.pk
    )  # "demo simulator" < "gpt-4o-mini"
    assert listed(user_client, sort="nonsense") == listed(user_client)  # newest first


def test_each_heading_of_the_runs_list_is_a_sort_link_that_flips_on_the_second_click(
    user_client, three_runs
):
    page = user_client.get(reverse("runs:list"), {"sort": "name"}).content.decode()
    assert 'aria-sort="ascending" data-sort-key="name"><a href="?sort=-name">' in page
    assert 'data-sort-key="best_score"><a href="?sort=-best_score">' in page
    assert page.index("alpha") < page.index("bravo") < page.index("charlie")


def test_the_runs_list_filters_by_task_set_model_and_verifier(
    user_client, user, three_runs, task_set, verifier
):
    a, b, c = three_runs
    assert listed(user_client, task_set=a.task_set_id) == [a.pk]
    assert listed(user_client, model="gpt-4o-mini") == [b.pk]
    assert set(listed(user_client, model="demo simulator")) == {a.pk, c.pk}
    launched = post_json(user_client, "runs:new", config(task_set)).json()["run_id"]
    assert listed(user_client, verifier="refund-policy") == [launched]
    page = user_client.get(reverse("runs:list")).content.decode()
    assert '<option value="refund-policy"' in page and '<option value="gpt-4o-mini"' in page


def test_tags_and_notes_are_saved_from_the_run_page_and_shown_in_the_list(user_client, three_runs):
    a = three_runs[0]
    user_client.post(
        reverse("runs:annotate", args=[a.pk]),
        {"tags": " baseline, gpt , baseline,", "notes": "First <try>"},
    )
    a.refresh_from_db()
    assert a.tags == ["baseline", "gpt"] and a.notes == "First <try>"
    assert user_client.get(reverse("runs:list_json")).json()["runs"][-1]["tags"] == [
        "baseline",
        "gpt",
    ]
    page = user_client.get(reverse("runs:detail", args=[a.pk])).content.decode()
    assert "First &lt;try&gt;" in page and '<span class="tag">baseline</span>' in page


def test_a_tag_too_long_is_refused_naming_the_field_and_nothing_is_saved(user_client, three_runs):
    a = three_runs[0]
    response = user_client.post(
        reverse("runs:annotate", args=[a.pk]),
        {"tags": "ok, " + "x" * 41, "notes": "kept?"},
        follow=True,
    )
    assert "tags: each tag is at most 40 characters" in response.content.decode()
    a.refresh_from_db()
    assert a.tags == [] and a.notes == ""


def test_an_archived_run_leaves_the_list_and_appears_under_archived(user_client, three_runs):
    a = three_runs[0]
    user_client.post(reverse("runs:archive", args=[a.pk]), {"archived": "1"})
    assert a.pk not in listed(user_client) and listed(user_client, archived="1") == [a.pk]
    user_client.post(reverse("runs:archive", args=[a.pk]), {"archived": "0"})
    assert a.pk in listed(user_client)


def test_a_running_run_can_be_neither_archived_nor_deleted(user_client, three_runs):
    b = three_runs[1]
    response = user_client.post(reverse("runs:delete", args=[b.pk]), follow=True)
    assert "stop or cancel it before deleting it" in response.content.decode()
    response = user_client.post(
        reverse("runs:archive", args=[b.pk]), {"archived": "1"}, follow=True
    )
    assert "stop it before archiving it" in response.content.decode()
    b.refresh_from_db()
    assert not b.archived and Run.objects.filter(pk=b.pk).exists()


def test_deleting_a_finished_run_removes_it_and_everything_recorded_for_it(user_client, three_runs):
    a = three_runs[0]
    response = user_client.post(reverse("runs:delete", args=[a.pk]))
    assert response["Location"] == reverse("runs:list")
    assert not Run.objects.filter(pk=a.pk).exists()
    assert user_client.get(reverse("runs:detail", args=[a.pk])).status_code == 404


def test_another_user_can_neither_delete_nor_annotate_a_run(other_client, three_runs):
    a = three_runs[0]
    assert other_client.post(reverse("runs:delete", args=[a.pk])).status_code == 404
    assert (
        other_client.post(reverse("runs:annotate", args=[a.pk]), {"tags": "mine"}).status_code
        == 404
    )
    assert Run.objects.filter(pk=a.pk, tags=[]).exists()


def test_the_api_sets_tags_notes_archived_and_refuses_to_delete_a_running_run(
    user_client, three_runs
):
    a, b, _ = three_runs
    response = user_client.patch(
        f"/api/runs/{a.pk}",
        {"tags": ["x"], "notes": "n", "archived": True},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    assert {k: response.json()[k] for k in ("tags", "notes", "archived")} == {
        "tags": ["x"],
        "notes": "n",
        "archived": True,
    }
    response = user_client.patch(
        f"/api/runs/{b.pk}", {"tags": ["y"], "archived": True}, content_type="application/json"
    )
    assert response.status_code == 409
    b.refresh_from_db()
    assert b.tags == [] and not b.archived  # all or nothing
    assert (
        user_client.patch(
            f"/api/runs/{a.pk}", {"tags": ["z" * 41]}, content_type="application/json"
        ).json()["problems"][0]["field"]
        == "tags"
    )
    assert user_client.delete(f"/api/runs/{b.pk}").status_code == 409
    assert user_client.delete(f"/api/runs/{a.pk}").status_code == 204
    assert not Run.objects.filter(pk=a.pk).exists()


def test_fork_opens_the_launch_form_prefilled_and_the_fork_links_back_and_forth(
    user_client, user, task_set, verifier
):
    parent = Run.objects.get(
        pk=post_json(user_client, "runs:new", config(task_set, name="parent")).json()["run_id"]
    )
    parent.candidates.create(index=0, components={"instructions": "Seed text."}, origin="seed")
    parent.candidates.create(
        index=1, components={"instructions": "Mention 30 days."}, origin="reflection", parents=[0]
    )
    page = user_client.get(
        reverse("runs:new"), {"fork": parent.pk, "candidate": 1}
    ).content.decode()
    prefill = json.loads(
        page.split('<script id="launch-prefill" type="application/json">')[1].split("</script>")[0]
    )
    assert prefill["seed_components"] == {"instructions": "Mention 30 days."}
    assert (
        prefill["budget"] == parent.config["budget"]
        and prefill["name"] == "parent · fork of candidate 1"
    )
    assert f'action="/runs/new/?fork={parent.pk}&amp;candidate=1"' in page

    changed = dict(prefill, budget={"max_metric_calls": 30})
    response = user_client.post(
        f"{reverse('runs:new')}?fork={parent.pk}&candidate=1",
        json.dumps(changed),
        content_type="application/json",
    )
    fork = Run.objects.get(pk=response.json()["run_id"])
    assert (
        fork.forked_from == parent and fork.forked_from_candidate == 1 and fork.budget_total == 30
    )
    assert (
        f'href="/runs/{parent.pk}/" data-field="fork-parent"'
        in user_client.get(reverse("runs:detail", args=[fork.pk])).content.decode()
    )
    assert (
        f'href="/runs/{fork.pk}/" data-field="fork-child"'
        in user_client.get(reverse("runs:detail", args=[parent.pk])).content.decode()
    )


def test_a_fork_of_a_candidate_that_does_not_exist_says_so_on_the_form(
    user_client, user, task_set, verifier
):
    parent = Run.objects.get(
        pk=post_json(user_client, "runs:new", config(task_set)).json()["run_id"]
    )
    response = user_client.get(reverse("runs:new"), {"fork": parent.pk, "candidate": 9})
    assert f"run {parent.pk} has no candidate 9" in response.content.decode()
