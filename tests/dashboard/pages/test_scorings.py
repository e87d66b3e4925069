"""The re-scoring pages: the form, the result beside the original, the fork from its best."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from optimizer.models import Scoring, ScoringStatus
from optimizer.scorings.execute import scoring_execute
from tests.factories import WINDOW_ONLY, recorded_run
from verifiers_app.models import Verifier

pytestmark = pytest.mark.django_db


def _ask(client, run, spec, **extra):
    return client.post(
        reverse("runs:scoring_new", args=[run.pk]),
        {"mode": "spec", "spec": json.dumps(spec), **extra},
    )


def test_the_form_starts_from_the_runs_own_verifiers(user, user_client):
    run = recorded_run(user, candidates=2, val_tasks=2)
    page = user_client.get(reverse("runs:scoring_new", args=[run.pk])).content.decode()
    assert "&quot;id&quot;: &quot;policy&quot;" in page and "&quot;format&quot;" in page


def test_an_edited_spec_opens_the_scoring_page_with_the_ranking_beside_the_original(
    user, user_client
):
    run = recorded_run(user, candidates=6, val_tasks=4)
    response = _ask(user_client, run, WINDOW_ONLY, name="window")
    scoring = Scoring.objects.get(run=run)
    assert response.status_code == 302
    assert response["Location"] == reverse("runs:scoring", args=[run.pk, scoring.pk])
    assert "0 / 24 outputs scored" in user_client.get(response["Location"]).content.decode()

    scoring_execute(scoring.pk)
    scoring.refresh_from_db()
    page = user_client.get(response["Location"]).content.decode()
    assert 'data-field="ranking"' in page and "Original rank" in page
    assert f'data-index="{scoring.summary["best"]["index"]}"' in page
    for field, lift in (
        ("best-vs-seed", scoring.summary["best_vs_seed"]),
        ("original-best-vs-seed", scoring.summary["original_best_vs_seed"]),
    ):
        assert f'data-field="{field}">#{lift["best"]} against seed #{lift["seed"]}' in page
        assert lift["text"].split(";")[0] in page
    run_page = user_client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert f'href="{reverse("runs:detail", args=[run.pk])}?scoring={scoring.pk}"' in run_page


def test_the_run_page_switched_to_a_scoring_names_it_and_carries_its_table(user, user_client):
    run = recorded_run(user, candidates=6, val_tasks=4)
    _ask(user_client, run, WINDOW_ONLY, name="window")
    scoring = Scoring.objects.get(run=run)
    scoring_execute(scoring.pk)
    scoring.refresh_from_db()
    url = reverse("runs:detail", args=[run.pk])

    page = user_client.get(url, {"scoring": scoring.pk}).content.decode()
    assert "Scores: re-scoring ‘<strong>window</strong>’" in page
    assert "The charts and the best score above show the original scoring." in page
    start = page.index('<script id="scoring-table" type="application/json">') + 51
    table = json.loads(page[start : page.index("</script>", start)])
    best = scoring.summary["best"]["index"]
    assert table["best"] == best
    under = {c.index: [c.val_score, c.rank, c.on_front] for c in scoring.candidates.all()}
    assert {int(i): row for i, row in table["rows"].items()} == under

    original = user_client.get(url).content.decode()
    assert 'id="scoring-table"' not in original and "Scores: re-scoring" not in original


def test_the_run_page_says_when_the_asked_scoring_is_not_one_it_can_show(user, user_client):
    run = recorded_run(user, candidates=2, val_tasks=2)
    page = user_client.get(reverse("runs:detail", args=[run.pk]), {"scoring": "999"})
    assert page.status_code == 200
    assert "scoring 999 is not a scoring of this run: showing the original scores" in (
        page.content.decode()
    )


def test_a_bad_spec_names_the_field_and_saves_nothing(user, user_client):
    run = recorded_run(user, candidates=2, val_tasks=2)
    bad = {**WINDOW_ONLY, "checks": [{"id": "w", "type": "regex", "params": {"pattern": "("}}]}
    response = _ask(user_client, run, bad)
    assert response.status_code == 400
    assert "<code>spec.checks[0].params.pattern</code>" in response.content.decode()
    assert not Scoring.objects.exists()


def test_a_sharer_sees_scorings_but_cannot_rescore(user, other_user, other_client):
    run = recorded_run(user, candidates=2, val_tasks=2)
    run.shared_with.add(other_user)
    assert other_client.get(reverse("runs:scoring_new", args=[run.pk])).status_code == 404
    assert (
        'data-action="rescore"'
        not in other_client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    )


def test_launching_from_the_best_saves_the_spec_and_prefills_the_fork(user, user_client):
    run = recorded_run(user, candidates=5, val_tasks=3)
    _ask(user_client, run, WINDOW_ONLY)
    scoring = Scoring.objects.get(run=run)
    scoring_execute(scoring.pk)
    scoring.refresh_from_db()
    assert scoring.status == ScoringStatus.DONE

    response = user_client.post(reverse("runs:scoring_fork", args=[run.pk, scoring.pk]))

    best = scoring.summary["best"]["index"]
    assert response.status_code == 302
    assert f"fork={run.pk}" in response["Location"]
    assert f"candidate={best}" in response["Location"]
    assert Verifier.objects.get(owner=user, slug="window-only").spec == WINDOW_ONLY
    form = user_client.get(response["Location"]).content.decode()
    prefill = json.loads(
        form.split('id="launch-prefill" type="application/json">')[1].split("<")[0]
    )
    assert prefill["verifier_ids"] == ["window-only"]
    assert prefill["seed_components"] == run.candidates.get(index=best).components
