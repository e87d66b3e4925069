"""The candidate and compare pages ask the database the same few questions
whatever the number of candidates in the run (a page of a big run costs what a small one does)."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.factories import recorded_run

pytestmark = pytest.mark.django_db


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries)


def test_the_candidate_page_does_not_ask_more_of_the_database_for_a_bigger_run(user, user_client):
    small = recorded_run(owner=user, candidates=5, val_tasks=4)
    large = recorded_run(owner=user, candidates=60, val_tasks=4, seed=3)
    counts = [
        _queries(user_client, reverse("runs:candidate", args=[run.pk, 3])) for run in (small, large)
    ]
    assert counts[0] == counts[1], counts


def test_the_compare_view_of_five_candidates_does_not_ask_more_of_the_database_for_a_bigger_run(
    user, user_client
):
    small = recorded_run(owner=user, candidates=6, val_tasks=4)
    large = recorded_run(owner=user, candidates=60, val_tasks=4, seed=3)
    counts = []
    for run in (small, large):
        url = reverse("compare:compare", args=[run.pk]) + "?c=1&c=2&c=3&c=4&c=5&diff=seed"
        counts.append(_queries(user_client, url))
    assert counts[0] == counts[1], counts


def test_the_compare_view_answers_in_a_handful_of_queries(
    user, user_client, django_assert_max_num_queries
):
    run = recorded_run(owner=user, candidates=60, val_tasks=4, seed=3)
    with django_assert_max_num_queries(20):
        response = user_client.get(
            reverse("compare:compare", args=[run.pk]) + "?c=1&c=2&c=3&c=4&c=5"
        )
    assert response.status_code == 200


def test_the_compare_views_diff_picker_offers_the_compared_the_best_and_the_asked_for_candidate(
    user, user_client
):
    run = recorded_run(owner=user, candidates=30, val_tasks=3)
    url = reverse("compare:compare", args=[run.pk]) + "?c=1&c=2&diff=17"
    html = user_client.get(url).content.decode()
    offered = {int(i) for i in re.findall(r'<option value="(\d+)"', html)}
    assert offered == {1, 2, 17, run.best_candidate.index}
    assert '<option value="17" selected>' in html
