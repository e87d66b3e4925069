"""Our own 400/403/404/500 pages, with DEBUG on (as under `make demo`) as well as off."""

import pytest
from django.test import Client
from django.urls import reverse

from optimizer.models import Run, RunStatus
from tests.factories import recorded_run

pytestmark = pytest.mark.django_db


@pytest.fixture(params=[True, False], ids=["debug-on", "debug-off"])
def debug(request, settings):
    settings.DEBUG = request.param
    return request.param


def _is_ours(response, code: int) -> bool:
    body = response.content.decode()
    return (
        response.status_code == code
        and 'class="card error-page"' in body
        and "Traceback" not in body
        and "DEBUG = True" not in body
    )


def test_an_address_that_matches_nothing_shows_our_404_page(user_client, debug):
    response = user_client.get("/no/such/page/")
    assert _is_ours(response, 404)
    assert "There is no page at this address." in response.content.decode()


def test_a_missing_trailing_slash_still_redirects_instead_of_404(user_client, debug):
    response = user_client.get("/runs")
    assert response.status_code == 301 and response["Location"] == "/runs/"


def test_another_users_run_shows_our_404_page_not_the_debug_page(user_client, other_user, debug):
    run = recorded_run(owner=other_user, candidates=1, val_tasks=1)
    assert _is_ours(user_client.get(reverse("runs:detail", args=[run.pk])), 404)


def test_an_unknown_api_address_answers_json(user_client, debug):
    response = user_client.get("/api/no-such-thing")
    assert response.status_code == 404 and response.json()["detail"]


def test_a_form_posted_without_its_csrf_token_shows_our_403_page(user, debug):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post(reverse("runs:new"), data="{}", content_type="application/json")
    assert _is_ours(response, 403)
    assert "Reload the page and try again" in response.content.decode()


def test_a_server_error_shows_our_500_page_and_logs_the_traceback(user, debug, monkeypatch, caplog):
    def broken(run):
        raise RuntimeError("kaboom in the summary")

    monkeypatch.setattr("dashboard.pages.runs.run_summary", broken)
    run = recorded_run(owner=user, candidates=1, val_tasks=1)
    client = Client(raise_request_exception=False)
    client.force_login(user)
    response = client.get(reverse("runs:detail", args=[run.pk]))
    assert _is_ours(response, 500)
    assert "kaboom" not in response.content.decode()
    assert any("kaboom in the summary" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)


def test_best_prompt_of_a_run_without_candidates_says_so_plainly(user_client, user, debug):
    run = Run.objects.create(owner=user, name="empty", status=RunStatus.QUEUED, config={})
    response = user_client.get(reverse("compare:download_best_txt", args=[run.pk]))
    assert _is_ours(response, 404)
    assert f"Run {run.pk} has no scored candidate yet." in response.content.decode()
