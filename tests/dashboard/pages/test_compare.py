import json

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape

from optimizer.export import run_export
from optimizer.models import Evaluation, Run, Scoring
from tests.factories import WINDOW_ONLY, recorded_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(user):
    return recorded_run(
        user,
        candidates=4,
        val_tasks=6,
        holdout_tasks=4,
        name="Refund policy run",
        task_prefix="val-",
    )


def _compare(run, *indices, **params):
    pairs = [("c", i) for i in indices] + list(params.items())
    return reverse("compare:compare", args=[run.pk]) + "?" + "&".join(f"{k}={v}" for k, v in pairs)


def test_the_compare_view_shows_prompts_side_by_side_with_the_diff_and_a_red_regression_row(
    user_client, run
):
    response = user_client.get(_compare(run, 0, 3))
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count('class="candidate-col"') == 2
    assert "<ins>" in html  # candidate 3 adds a rule to its parent, the seed
    assert 'class="regression" data-task="val-000"' in html
    assert "cell-regressed" in html


def test_outputs_and_prompts_are_escaped_never_executed(user_client, run):
    cand = run.candidates.get(index=1)
    cand.components = {"system_prompt": "Be kind. <script>alert('prompt')</script>"}
    cand.save()
    compare = user_client.get(_compare(run, 0, 1)).content.decode()
    task = user_client.get(
        reverse("compare:task", args=[run.pk]) + "?c=0&c=1&task=val-001"
    ).content.decode()
    assert "<script>alert" not in compare and "&lt;script&gt;alert(&#x27;prompt&#x27;)" in compare
    assert "<script>alert" not in task and "&lt;script&gt;alert(&#x27;x&#x27;)" in task


def test_with_fewer_than_two_candidates_it_offers_a_picker(user_client, run):
    response = user_client.get(_compare(run, 2))
    assert response.status_code == 200
    assert b'name="c" value="3"' in response.content


def test_a_bad_parameter_gets_a_400_naming_it(user_client, run):
    response = user_client.get(_compare(run, 0, 1, verdict="great"))
    assert response.status_code == 400
    assert b"verdict: must be one of" in response.content


def test_someone_else_s_run_is_not_found(other_client, run):
    assert other_client.get(_compare(run, 0, 1)).status_code == 404
    assert other_client.get(reverse("compare:export_json", args=[run.pk])).status_code == 404


def test_filter_state_survives_in_the_pagination_links(user_client, user):
    big = recorded_run(
        user, candidates=2, val_tasks=120, holdout_tasks=0, name="big", task_prefix="val-"
    )
    html = user_client.get(_compare(big, 0, 1, only="diff", sort="regression")).content.decode()
    assert "only=diff&amp;sort=regression&amp;page=2" in html


def test_the_drilldown_shows_each_check_hit_and_miss_and_the_feedback(user_client, run):
    html = user_client.get(
        reverse("compare:task", args=[run.pk]) + "?c=0&c=3&task=val-000"
    ).content.decode()
    missed = Evaluation.objects.get(candidate__run=run, candidate__index=3, task_key="val-000")
    reasons = [c["reason"] for v in missed.result["verifiers"] for c in v["checks"] if c["reason"]]
    assert reasons and missed.feedback
    for reason in reasons:
        assert escape(reason) in html
    assert escape(missed.feedback) in html
    assert html.count('class="check-miss"') >= len(reasons)


def test_the_history_page_names_the_candidate_and_reflection_behind_each_sentence(user_client, run):
    html = user_client.get(reverse("compare:history", args=[run.pk, 2])).content.decode()
    child = run.candidates.get(index=2)
    assert "Quote the order number back to the customer." in html
    assert escape(child.reflection) in html


def test_a_candidate_downloads_as_text_and_as_json(user_client, run):
    text = user_client.get(reverse("compare:download_txt", args=[run.pk, 2]))
    data = user_client.get(reverse("compare:download_json", args=[run.pk, 2]))
    components = run.candidates.get(index=2).components
    assert text["Content-Disposition"] == f'attachment; filename="run-{run.pk}-candidate-2.txt"'
    assert text.content.decode() == components["system_prompt"]
    assert json.loads(data.content)["components"] == components


def test_the_run_page_downloads_whichever_candidate_is_best_at_the_time(user_client, user, run):
    detail = user_client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert f'href="{reverse("compare:download_best_txt", args=[run.pk])}"' in detail
    best = run.best_candidate
    text = user_client.get(reverse("compare:download_best_txt", args=[run.pk]))
    assert (
        text["Content-Disposition"]
        == f'attachment; filename="run-{run.pk}-candidate-{best.index}.txt"'
    )
    assert text.content.decode() == best.components["system_prompt"]
    run.best_candidate = run.candidates.get(index=1)
    run.save()
    assert (
        json.loads(user_client.get(reverse("compare:download_best_json", args=[run.pk])).content)[
            "index"
        ]
        == 1
    )
    empty = Run.objects.create(owner=user, name="nothing yet", config=run.config)
    assert user_client.get(reverse("compare:download_best_txt", args=[empty.pk])).status_code == 404


def test_the_run_exports_as_json_and_csv_downloads(user_client, run):
    exported = user_client.get(reverse("compare:export_json", args=[run.pk]))
    assert (
        b"".join(exported.streaming_content)
        == json.dumps(run_export(run), ensure_ascii=False).encode()
    )
    csv_response = user_client.get(reverse("compare:export_csv", args=[run.pk]))
    assert csv_response["Content-Type"].startswith("text/csv")
    assert (
        b"".join(csv_response.streaming_content).decode().splitlines()[0]
        == "task_key,split,candidate_0,candidate_1,candidate_2,candidate_3"
    )


@pytest.mark.django_db(transaction=True)
async def test_the_web_server_streams_the_exports_byte_for_byte_as_the_test_client_does(
    user, run, async_client
):
    # Under ASGI the export goes out one paced piece at a time on the event loop
    # (optimizer.downloads); the bytes are the same document and CSV.
    await async_client.aforce_login(user)
    expected = await sync_to_async(
        lambda: json.dumps(run_export(run), ensure_ascii=False).encode()
    )()
    exported = await async_client.get(reverse("compare:export_json", args=[run.pk]))
    assert (
        exported.is_async
        and b"".join([piece async for piece in exported.streaming_content]) == expected
    )
    csv_response = await async_client.get(reverse("compare:export_csv", args=[run.pk]))
    assert csv_response.is_async
    rows = b"".join([piece async for piece in csv_response.streaming_content]).decode().splitlines()
    assert (
        rows[0] == "task_key,split,candidate_0,candidate_1,candidate_2,candidate_3"
        and len(rows) == 1 + 6 + 4
    )


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["plain", "with a UTF-8 BOM"])
def test_importing_an_export_creates_a_run_with_the_same_scores(other_client, other_user, run, bom):
    body = bom + json.dumps(run_export(run)).encode()
    response = other_client.post(
        reverse("compare:import"), {"file": SimpleUploadedFile("run.json", body)}
    )
    imported = Run.objects.get(owner=other_user)
    assert response.status_code == 302 and response["Location"].startswith(
        reverse("compare:compare", args=[imported.pk])
    )
    assert imported.imported
    ours = sorted(
        Evaluation.objects.filter(candidate__run=run).values_list(
            "candidate__index", "task_key", "score"
        )
    )
    theirs = sorted(
        Evaluation.objects.filter(candidate__run=imported).values_list(
            "candidate__index", "task_key", "score"
        )
    )
    assert theirs == ours


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", b"file: not valid JSON at line 1, column 2"),
        (b"\xff\xfe", b"file: not UTF-8 text."),
        (
            json.dumps({"format": "frontier.run", "version": 2}).encode(),
            b"version: Input should be 1",
        ),
    ],
)
def test_a_broken_import_shows_the_error_and_saves_nothing(other_client, body, message):
    response = other_client.post(
        reverse("compare:import"), {"file": SimpleUploadedFile("run.json", body)}
    )
    assert response.status_code == 400
    assert message in response.content
    assert not Run.objects.exists()


def test_the_promotion_report_shows_the_rule_verdict_and_per_task_deltas(user_client, run):
    html = user_client.get(reverse("compare:promotion", args=[run.pk])).content.decode()
    assert "holdout task" in html and 'data-verdict="' in html
    assert html.count("<td>hold-") == 4


@pytest.fixture
def wide_run(user):
    """12 val and 12 holdout tasks, candidate 2 a steady +0.1 over the seed on
    each (scores with three decimals, as the pages show them)."""
    run = recorded_run(
        user, candidates=3, val_tasks=12, holdout_tasks=12, name="wide", task_prefix="val-"
    )
    run.best_candidate = run.candidates.get(index=2)
    run.save(update_fields=["best_candidate"])
    for split, prefix in (("val", "val-"), ("holdout", "hold-")):
        for i in range(12):
            seed = round(0.3 + 0.05 * (i % 5), 3)
            best = round(seed + (0.1 if i % 4 else -0.05) + 0.001 * i, 3)
            for index, score in ((0, seed), (2, best)):
                Evaluation.objects.filter(
                    candidate__run=run,
                    candidate__index=index,
                    split=split,
                    task_key=f"{prefix}{i:03d}",
                ).update(score=score)
    return run


def test_the_promotion_report_promotes_a_confirmed_lift_and_a_huge_margin_turns_it_to_keep(
    user_client, wide_run
):
    url = reverse("compare:promotion", args=[wide_run.pk])
    html = user_client.get(url).content.decode()
    assert 'data-verdict="promote"' in html and "Promote: the lift is confirmed" in html
    assert '<span class="interval delta-up" data-lift="holdout" data-tasks="12"' in html
    assert "paired bootstrap, percentile, 10,000 resamples, seed 0" in html
    html = user_client.get(url + "?margin=1").content.decode()
    assert 'data-verdict="keep"' in html and "below the margin 1" in html


def test_with_four_holdout_tasks_the_promotion_report_says_too_few_tasks_to_tell(user_client, run):
    html = user_client.get(reverse("compare:promotion", args=[run.pk])).content.decode()
    assert 'data-verdict="keep"' in html
    assert "Do not promote: too few tasks to tell (fewer than 10 paired tasks)" in html
    assert 'data-lift="holdout" data-tasks="4" data-enough="false"' in html


def _page_pairs(html: str, baseline: int, other: int) -> list[tuple[float, float]]:
    """The (baseline, other) scores the per-task table shows, in its row order."""
    import re

    heads = re.findall(r'<th class="num">#(\d+)', html.split('class="data tasks"')[1])
    a, b = heads.index(str(baseline)), heads.index(str(other))
    pairs = []
    for row in re.findall(r'data-task="[^"]+">(.*?)</tr>', html, re.S):
        scores = re.findall(r"(\d\.\d{3}) <span class=\"verdict-", row)
        pairs.append((float(scores[a]), float(scores[b])))
    return pairs


def test_the_interval_the_compare_view_shows_is_scipy_s_bootstrap_of_the_scores_it_shows(
    user_client, wide_run
):
    import re

    import numpy as np

    from tests.bootstrap_reference import scipy_interval

    html = user_client.get(_compare(wide_run, 0, 2)).content.decode()
    pairs = _page_pairs(html, 0, 2)
    assert len(pairs) == 12
    seed, best = np.asarray(pairs).T
    low, high = scipy_interval(seed, best)
    improved = int(((best - seed) > 1e-9).sum())
    worse = int(((best - seed) < -1e-9).sum())
    row = html.split('data-pair="0-2"')[1].split("</tr>")[0]
    shown = re.search(r'data-lift="val"[^>]*>([^<]*)</span>', row).group(1)
    assert shown == (
        f"{np.mean(best - seed):+.3f} [{low:+.3f}, {high:+.3f}] (95% interval, 12 tasks) · "
        f"{improved} improved · {worse} worse · {12 - improved - worse} unchanged"
    )
    assert low > 0  # the steady lift is confirmed: a real interval, not a degenerate one


def test_the_compare_view_shows_each_candidate_s_interval_per_split_against_the_baseline(
    user_client, run
):
    html = user_client.get(_compare(run, 0, 2, 3, baseline=2)).content.decode()
    section = html.split('data-section="pair-lifts"')[1].split("</section>")[0]
    assert 'data-pair="2-0"' in section and 'data-pair="2-3"' in section
    assert section.count('data-lift="val" data-tasks="6" data-enough="false"') == 2
    assert section.count('data-lift="holdout" data-tasks="4"') == 2
    assert "too few tasks to tell" in section


def test_the_owner_promotes_a_candidate_as_the_chosen_prompt(user_client, run):
    response = user_client.post(reverse("compare:promotion", args=[run.pk]), {"candidate": "2"})
    run.refresh_from_db()
    assert response.status_code == 302 and run.chosen_candidate.index == 2
    page = user_client.get(response["Location"]).content.decode()
    assert (
        'data-chosen="2"' in page
        and f'href="{reverse("compare:download_txt", args=[run.pk, 2])}"' in page
    )
    # The run page and the API say which prompt was chosen, too.
    run_page = user_client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert (
        f'<a href="{reverse("runs:candidate", args=[run.pk, 2])}" data-field="chosen">#2</a>'
        in run_page
    )
    assert user_client.get(f"/api/runs/{run.pk}").json()["chosen_candidate"] == 2


def test_a_collaborator_who_can_see_the_run_cannot_promote(other_client, other_user, run):
    run.shared_with.add(other_user)
    response = other_client.post(reverse("compare:promotion", args=[run.pk]), {"candidate": "2"})
    run.refresh_from_db()
    assert response.status_code == 403 and run.chosen_candidate is None


def test_compare_runs_overlays_curves_and_lists_config_differences(user_client, user, run):
    other = recorded_run(user, name="second", task_set=run.task_set, seed=11, candidates=4)
    Run.objects.filter(pk=other.pk).update(
        config=other.config | {"task_lm": other.config["task_lm"] | {"model": "demo-large"}}
    )
    response = user_client.get(reverse("compare:runs") + f"?a={run.pk}&b={other.pk}")
    html = response.content.decode()
    assert response.status_code == 200
    assert (
        "<code>task_lm.model</code>" in html
        and "demo-large" in html
        and "<code>seed</code>" in html
    )
    figure = json.loads(
        html.split('<script id="figure-data" type="application/json">')[1].split("</script>")[0]
    )
    assert len(figure["data"]) == 4


def test_compare_runs_refuses_runs_on_different_task_sets(user_client, user, run):
    other = recorded_run(
        user, name="elsewhere", candidates=4, val_tasks=6, holdout_tasks=4, task_prefix="val-"
    )
    response = user_client.get(reverse("compare:runs") + f"?a={run.pk}&b={other.pk}")
    assert response.status_code == 400 and b"not run on the same task set" in response.content


def test_the_run_pages_link_to_promotion_exports_history_downloads_and_import(user_client, run):
    detail = user_client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    for name in ("compare:promotion", "compare:export_json", "compare:export_csv"):
        assert f'href="{reverse(name, args=[run.pk])}"' in detail
    candidate = user_client.get(reverse("runs:candidate", args=[run.pk, 2])).content.decode()
    for name in ("compare:history", "compare:download_txt", "compare:download_json"):
        assert f'href="{reverse(name, args=[run.pk, 2])}"' in candidate
    listing = user_client.get(reverse("runs:list")).content.decode()
    assert (
        f'href="{reverse("compare:runs")}"' in listing
        and f'href="{reverse("compare:import")}"' in listing
    )


def _import(client, body: bytes):
    return client.post(reverse("compare:import"), {"file": SimpleUploadedFile("run.json", body)})


def _hostile(run, mutate) -> bytes:
    data = json.loads(json.dumps(run_export(run)))
    mutate(data)
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda run: b"[" * 200_000 + b"]" * 200_000, b"file: nested more than 100 levels deep"),
        (
            lambda run: b'{"format": "frontier.run", "version": ' + b"9" * 5000 + b"}",
            b"file: not valid JSON",
        ),
        (
            lambda run: _hostile(
                run, lambda d: d["candidates"][1]["evaluations"][0].update(score=float("nan"))
            ),
            b"candidates.1.evaluations.0.score: nan is not a JSON number",
        ),
        (
            lambda run: _hostile(
                run, lambda d: d["run"]["config"].update(minibatch_size=float("-inf"))
            ),
            b"run.config.minibatch_size: -inf is not a JSON number",
        ),
        (
            lambda run: _hostile(
                run, lambda d: d["candidates"][0]["evaluations"][0].update(latency_ms=float("inf"))
            ),
            b"candidates.0.evaluations.0.latency_ms: inf is not a JSON number",
        ),
        (
            lambda run: _hostile(run, lambda d: d["candidates"][1].update(index=2**63)),
            b"candidates.1.index: Input should be less than or equal to",
        ),
        (
            lambda run: _hostile(run, lambda d: d["candidates"][1].update(iteration=-(2**40))),
            b"candidates.1.iteration: Input should be greater than or equal to",
        ),
        (
            lambda run: _hostile(run, lambda d: d["events"][0].update(type="x" * 51)),
            b"events.0.type: String should have at most 50 characters",
        ),
        (
            lambda run: _hostile(
                run, lambda d: d["run"].update(started_at="0001-01-01T00:00:00+05:00")
            ),
            b"run.started_at: must be a date between 1970 and 9998",
        ),
        (
            lambda run: _hostile(
                run, lambda d: d["run"].update(finished_at="9999-12-31T23:59:59-05:00")
            ),
            b"run.finished_at: must be a date between 1970 and 9998",
        ),
        (
            lambda run: _hostile(
                run, lambda d: d["candidates"][2]["components"].update(system_prompt="a\x00b")
            ),
            b"candidates.2.components.system_prompt: contains a NUL character",
        ),
        (
            lambda run: _hostile(
                run, lambda d: d["candidates"][0]["evaluations"][1]["result"].update({"k\x00": 1})
            ),
            b"candidates.0.evaluations.1.result: contains a NUL character",
        ),
    ],
)
def test_a_hostile_import_gets_a_400_naming_the_problem_and_saves_nothing(
    other_client, other_user, run, build, message
):
    before = Run.objects.count()
    response = _import(other_client, build(run))
    assert response.status_code == 400
    assert message in response.content, response.content.decode()[-2000:]
    assert Run.objects.count() == before and not Run.objects.filter(owner=other_user).exists()


def test_an_upload_over_the_size_limit_is_refused_and_nothing_is_saved(other_client, monkeypatch):
    from dashboard.pages import compare as compare_views

    monkeypatch.setattr(compare_views, "MAX_IMPORT_BYTES", 1024)
    response = _import(other_client, b" " * 4096)
    assert response.status_code == 400
    assert b"file: 4096 bytes is more than the" in response.content
    assert not Run.objects.exists()


def test_an_import_without_a_file_is_refused_naming_the_file_field_and_nothing_is_saved(
    other_client,
):
    response = other_client.post(
        reverse("compare:import"), {"fil": SimpleUploadedFile("run.json", b"{}")}
    )
    assert response.status_code == 400
    assert b"file: choose an exported run JSON file." in response.content
    assert not Run.objects.exists()


def test_a_nul_character_in_the_search_or_the_task_never_reaches_the_database(user_client, run):
    search = user_client.get(_compare(run, 0, 1, q="val-001%00"))
    assert search.status_code == 200 and 'data-task="val-001"' in search.content.decode()
    task = user_client.get(reverse("compare:task", args=[run.pk]) + "?c=0&c=1&task=val-001%00")
    assert task.status_code == 400 and b"task: contains a NUL character." in task.content


@pytest.mark.parametrize(
    ("result", "field"),
    [
        ({"verifiers": 5}, "candidates.0.evaluations.0.result.verifiers"),
        (
            {"verifiers": [{"id": "v", "checks": 7}]},
            "candidates.0.evaluations.0.result.verifiers.0.checks",
        ),
        (
            {"verifiers": [{"id": "v", "checks": ["miss"]}]},
            "candidates.0.evaluations.0.result.verifiers.0.checks.0",
        ),
    ],
)
def test_an_import_whose_check_breakdown_is_not_the_engine_s_shape_is_refused(
    other_client, run, result, field
):
    response = _import(
        other_client,
        _hostile(run, lambda d: d["candidates"][0]["evaluations"][0].update(result=result)),
    )
    assert response.status_code == 400 and field.encode() + b": " in response.content
    assert Run.objects.count() == 1


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["run"].update(config={"splits": 5, "task_lm": [1]}), b"run.config: "),
        (
            lambda d: d["run"]["config"].update(minibatch_size="many"),
            b"run.config: minibatch_size: ",
        ),
        (
            lambda d: d["run"]["tasks_snapshot"][1].pop("task_id"),
            b"run.tasks_snapshot.1.task_id: is required",
        ),
        (
            lambda d: d["run"]["tasks_snapshot"][0].update(split="later"),
            b"run.tasks_snapshot.0.split: ",
        ),
        (lambda d: d["run"]["verifier_specs"][0].update(id=5), b"run.verifier_specs.0.id: "),
    ],
)
def test_an_import_whose_config_tasks_or_verifiers_the_pages_cannot_read_is_refused(
    other_client, user, run, mutate, message
):
    response = _import(other_client, _hostile(run, mutate))
    assert response.status_code == 400 and message in response.content, response.content.decode()[
        -1500:
    ]
    assert Run.objects.count() == 1
    # What such a file used to do: the runs list of whoever imported it answered 500.
    assert other_client.get(reverse("runs:list")).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_two_real_runs_on_one_task_set_compare_best_vs_best_with_their_config_difference(
    user, user_client, settings, tmp_path, monkeypatch
):
    from optimizer.runs import runner
    from tests.optimizer.run_helpers import run_demo_with_holdout

    settings.RUNS_DIR = tmp_path / "runs"
    monkeypatch.setattr(
        runner, "HEARTBEAT_SECONDS", 3600
    )  # see tests/optimizer/runs/test_runner.py
    a = run_demo_with_holdout(user)
    b = run_demo_with_holdout(user, task_set=a.task_set, minibatch_size=3)

    html = user_client.get(reverse("compare:runs") + f"?a={a.pk}&b={b.pk}").content.decode()

    assert (
        "<td><code>minibatch_size</code></td><td><code>2</code></td><td><code>3</code></td>" in html
    )
    val_keys = sorted(
        Evaluation.objects.filter(candidate=a.best_candidate, split="val").values_list(
            "task_key", flat=True
        )
    )
    rows = html.split("Best vs best per task (val)")[1]
    assert [k for k in val_keys if f"<td>{k}</td>" in rows] == val_keys and len(val_keys) == 3
    assert 'data-lift="val" data-tasks="3" data-enough="false"' in rows  # too few to tell
    for run in (a, b):
        assert f"best #{run.best_candidate.index} (val {run.best_score:.3f})" in html
    figure = json.loads(
        html.split('<script id="figure-data" type="application/json">')[1].split("</script>")[0]
    )
    curves = [t for t in figure["data"] if t["mode"] == "lines"]
    assert [max(t["y"]) for t in curves] == pytest.approx([a.best_score, b.best_score])


def test_every_compare_page_showing_verdicts_names_the_thresholds_its_run_judged_them_by(
    user_client, run
):
    """A verdict is the run's (docs/verifier-semantics.md "Passed and verdict"): the
    compare grid, its lift table, a task's view, the promotion report and the
    compare-runs table say the thresholds that decided it, the run's own ones."""
    Run.objects.filter(pk=run.pk).update(
        config={**run.config, "thresholds": {"pass": 0.9, "borderline": 0.7}}
    )
    rule = "run thresholds: pass ≥ 0.9, borderline ≥ 0.7"
    pages = [
        _compare(run, 0, 3),
        reverse("compare:task", args=[run.pk]) + "?c=0&c=3&task=val-000",
        reverse("compare:promotion", args=[run.pk]),
        reverse("compare:runs") + f"?a={run.pk}&b={run.pk}",
    ]
    for url in pages:
        html = user_client.get(url).content.decode()
        assert rule in html, url
    grid = user_client.get(_compare(run, 0, 3)).content.decode()
    assert grid.count(rule) == 2  # above the task grid and the lift table


# Scores the refund window phrase only: a different score per task from the run's own verifiers.


@pytest.fixture
def rescored(user):
    """A run of 12 val and 4 holdout tasks and a finished re-scoring 'window' of it."""
    from optimizer.scorings.execute import scoring_execute
    from optimizer.scorings.services import scoring_create

    run = recorded_run(user, candidates=4, val_tasks=12, holdout_tasks=4, task_prefix="val-")
    scoring = scoring_create(
        run=run, user=user, specs=[WINDOW_ONLY], source=[{"edited": True}], name="window"
    )
    assert scoring_execute(scoring.pk) == "done"
    scoring.refresh_from_db()
    return run, scoring


def test_the_compare_view_under_a_rescoring_shows_its_scores_and_lift(user_client, rescored):
    import re

    from optimizer.confidence import paired_lift

    run, scoring = rescored
    under = dict(scoring.candidates.values_list("index", "task_scores"))
    original = {
        (e.candidate.index, e.task_key): e.score
        for e in Evaluation.objects.filter(candidate__run=run, split="val").select_related(
            "candidate"
        )
    }
    assert any(  # the re-scoring changes what the page shows
        abs(under[i][k] - original[(i, k)]) > 0.001 for i in (0, 3) for k in under[i]
    )

    html = user_client.get(_compare(run, 0, 3, scoring=scoring.pk)).content.decode()

    assert "Scores: re-scoring ‘<strong>window</strong>’ (val)" in html
    assert "outputs, verdicts and feedback as recorded" in html
    keys = re.findall(r'data-task="([^"]+)">', html)
    assert keys == sorted(under[0]) and len(keys) == 12
    assert _page_pairs(html, 0, 3) == [(round(under[0][k], 3), round(under[3][k], 3)) for k in keys]
    row = html.split('data-pair="0-3"')[1].split("</tr>")[0]
    shown = re.search(r'data-lift="val"[^>]*>([^<]*)</span>', row).group(1)
    assert shown == escape(paired_lift(under[0], under[3]).describe())
    assert "[" in shown  # 12 tasks: an interval, not "too few tasks"


def test_the_compare_view_under_a_rescoring_keeps_other_splits_original(user_client, rescored):
    run, scoring = rescored
    html = user_client.get(_compare(run, 0, 3, scoring=scoring.pk, split="holdout")).content
    page = html.decode()
    assert "covers the val split only: these holdout scores are the original's" in page
    holdout = dict(
        Evaluation.objects.filter(
            candidate__run=run, candidate__index=0, split="holdout"
        ).values_list("task_key", "score")
    )
    assert [a for a, _ in _page_pairs(page, 0, 3)] == [
        round(holdout[k], 3) for k in sorted(holdout)
    ]


def test_the_compare_view_says_when_the_asked_scoring_is_not_one_it_can_show(user_client, rescored):
    run, scoring = rescored
    original = user_client.get(_compare(run, 0, 3)).content.decode()
    for wanted in ("999999", "nonsense"):
        response = user_client.get(_compare(run, 0, 3, scoring=wanted))
        page = response.content.decode()
        assert response.status_code == 200
        assert f"scoring {wanted} is not a scoring of this run: showing the original scores" in page
        assert _page_pairs(page, 0, 3) == _page_pairs(original, 0, 3)
        assert f"scoring={wanted}" not in page  # its links show the original
    Scoring.objects.filter(pk=scoring.pk).update(status="running")
    page = user_client.get(_compare(run, 0, 3, scoring=scoring.pk)).content.decode()
    assert f"scoring {scoring.pk} is not finished: showing the original scores" in page


def test_the_compare_view_s_links_keep_the_chosen_scoring(user_client, rescored, monkeypatch):
    from dashboard import compare_selectors

    monkeypatch.setattr(compare_selectors, "PAGE_SIZE", 5)  # 12 tasks: three pages
    run, scoring = rescored
    html = user_client.get(
        _compare(run, 0, 3, scoring=scoring.pk, sort="regression", page=2)
    ).content.decode()
    pager = html.split('class="pager"')[1].split("</nav>")[0]
    for page in (1, 3):
        assert f"c=0&amp;c=3&amp;scoring={scoring.pk}&amp;sort=regression&amp;page={page}" in pager
    switch = html.split('data-field="scorings"')[1].split("</nav>")[0]
    assert '<strong aria-current="page">window</strong>' in switch
    assert 'href="?c=0&amp;c=3&amp;sort=regression">original</a>' in switch
    assert f'<input type="hidden" name="scoring" value="{scoring.pk}">' in html
    original = user_client.get(_compare(run, 0, 3, sort="regression")).content.decode()
    switch = original.split('data-field="scorings"')[1].split("</nav>")[0]
    assert f'href="?c=0&amp;c=3&amp;sort=regression&amp;scoring={scoring.pk}">window</a>' in switch
