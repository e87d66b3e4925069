import pytest
from django.http import QueryDict

from dashboard import compare_selectors as sel
from optimizer.confidence import paired_lift
from optimizer.export import run_export, run_import
from optimizer.models import Evaluation
from tests.factories import parents_of, recorded_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(user):
    return recorded_run(
        user,
        candidates=5,
        val_tasks=8,
        holdout_tasks=4,
        name="Refund policy run",
        task_prefix="val-",
    )


def _filters(run, cands, **params):
    q = QueryDict(mutable=True)
    q.update(params)
    return sel.TaskFilters.from_query(q, cands)


def _score(run, index, key, split="val"):
    return Evaluation.objects.get(
        candidate__run=run, candidate__index=index, task_key=key, split=split
    ).score


def test_it_keeps_the_chosen_order_and_drops_repeated_indices(run):
    assert [c.index for c in sel.compare_candidates(run, ["3", "0", "3"])] == [3, 0]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (["1"], "at least two"),
        (["0", "x"], "'x' is not a candidate index"),
        (["0", "77"], "no candidate 77"),
        (["0", "-1"], "'-1' is not a candidate index"),
        (
            ["0", "9" * 30],
            f"'{'9' * 30}' is not a candidate index",
        ),  # beyond the integer column, not a database error
        ([str(i) for i in range(9)], "at most 8"),
    ],
)
def test_it_rejects_an_unusable_selection_naming_the_parameter(run, raw, message):
    with pytest.raises(sel.CompareError, match=message) as err:
        sel.compare_candidates(run, raw)
    assert str(err.value).startswith("c:")


def test_the_table_shows_every_val_task_with_deltas_against_the_baseline(run):
    cands = sel.compare_candidates(run, ["0", "4"])
    table = sel.task_table(run, cands, _filters(run, cands))
    rows = list(table.page)
    assert table.total == 8 and len(rows) == 8
    for row in rows:
        seed, last = row.cells
        assert seed.delta is None
        assert last.delta == pytest.approx(
            _score(run, 4, row.task_key) - _score(run, 0, row.task_key)
        )
    regressions = sum(1 for r in rows if r.cells[1].change == "regressed")
    assert (
        table.summaries[1].regressed == regressions >= 1
    )  # the factory always regresses on val-000


def test_sorting_by_regression_puts_the_largest_drop_first(run):
    cands = sel.compare_candidates(run, ["0", "4"])
    rows = list(sel.task_table(run, cands, _filters(run, cands, sort="regression")).page)
    deltas = [r.cells[1].delta for r in rows]
    assert deltas == sorted(deltas)
    assert rows[0].task_key == "val-000"


def test_a_different_baseline_flips_the_deltas(run):
    cands = sel.compare_candidates(run, ["0", "4"])
    rows = list(sel.task_table(run, cands, _filters(run, cands, baseline="4")).page)
    assert all(r.cells[1].delta is None for r in rows)
    assert rows[0].cells[0].delta == pytest.approx(
        _score(run, 0, "val-000") - _score(run, 4, "val-000")
    )


def test_filters_keep_only_failures_differences_a_verdict_or_a_search_hit(run):
    cands = sel.compare_candidates(run, ["0", "1", "4"])
    fails = list(sel.task_table(run, cands, _filters(run, cands, only="fail")).page)
    assert fails and all(any(c.verdict == "fail" for c in r.cells) for r in fails)
    diffs = list(sel.task_table(run, cands, _filters(run, cands, only="diff")).page)
    assert all(len({c.score for c in r.cells}) > 1 for r in diffs)
    passes = list(sel.task_table(run, cands, _filters(run, cands, verdict="pass")).page)
    assert all(any(c.verdict == "pass" for c in r.cells) for r in passes)
    hits = list(sel.task_table(run, cands, _filters(run, cands, q="order #1003")).page)
    assert [r.task_key for r in hits] == ["val-003"]  # matched in the task's input


def test_the_holdout_split_shows_holdout_tasks_only(run):
    cands = sel.compare_candidates(run, ["0", "2"])
    rows = list(sel.task_table(run, cands, _filters(run, cands, split="holdout")).page)
    assert [r.task_key for r in rows] == ["hold-000", "hold-001", "hold-002", "hold-003"]


def test_the_table_paginates_on_the_server(user):
    big = recorded_run(
        user,
        candidates=2,
        val_tasks=sel.PAGE_SIZE + 7,
        holdout_tasks=0,
        name="big",
        task_prefix="val-",
    )
    cands = sel.compare_candidates(big, ["0", "1"])
    second = sel.task_table(big, cands, _filters(big, cands, page="2")).page
    assert len(second) == 7 and second.number == 2


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"split": "test"}, "split"),
        ({"only": "x"}, "only"),
        ({"verdict": "great"}, "verdict"),
        ({"sort": "up"}, "sort"),
        ({"baseline": "3"}, "baseline"),
        ({"baseline": "z"}, "baseline"),
    ],
)
def test_bad_filter_parameters_are_rejected_by_name(run, params, field):
    cands = sel.compare_candidates(run, ["0", "1"])
    with pytest.raises(sel.CompareError) as err:
        _filters(run, cands, **params)
    assert str(err.value).startswith(f"{field}:")


def test_diffs_against_the_parent_show_what_the_reflection_added(run):
    cands = sel.compare_candidates(run, ["0", "2"])
    seed_diff, child_diff = sel.component_diffs(run, cands, "parent")
    assert seed_diff.reference is None and seed_diff.components[0].ops is None
    assert child_diff.reference.index == parents_of(2)[0]
    added = "".join(t for op, t in child_diff.components[0].ops if op == "added")
    assert added.strip() and added.strip() in child_diff.candidate.components["system_prompt"]
    assert added.strip() not in child_diff.reference.components["system_prompt"]


def test_diffs_against_the_seed_or_a_fixed_candidate(run):
    cands = sel.compare_candidates(run, ["2", "4"])
    assert {d.reference.index for d in sel.component_diffs(run, cands, "seed")} == {0}
    two_vs = sel.component_diffs(run, cands, "2")
    assert two_vs[0].reference is None and two_vs[1].reference.index == 2
    with pytest.raises(sel.CompareError, match="^diff:"):
        sel.component_diffs(run, cands, "grandparent")


def test_prompt_history_attributes_each_sentence_to_the_candidate_that_added_it(run):
    cand = run.candidates.get(index=2)
    ancestry, components = sel.prompt_history(run, cand)
    assert [a.index for a in ancestry] == [0, 1, 2]
    origins = [s.candidate.index for s in components["system_prompt"]]
    assert origins[0] == 0 and origins[-1] == 2 and 1 in origins
    assert components["system_prompt"][-1].candidate.reflection


def test_the_lift_breakdown_counts_every_task_once_per_split(run):
    tables = {t.split: t for t in sel.lift_breakdown(run)}
    assert set(tables) == {"val", "holdout"}
    assert sum(map(sum, tables["val"].counts)) == 8
    assert tables["val"].up + tables["val"].down + tables["val"].same == 8
    seed, best = tables["val"].seed, tables["val"].best
    moved_up = 0
    order = ["fail", "borderline", "pass"]
    for key in (f"val-{i:03d}" for i in range(8)):
        before = Evaluation.objects.get(candidate=seed, task_key=key).verdict
        after = Evaluation.objects.get(candidate=best, task_key=key).verdict
        moved_up += order.index(after) > order.index(before)
    assert tables["val"].up == moved_up


def test_runs_on_different_task_sets_cannot_be_compared(user):
    a = recorded_run(user, name="a", candidates=4, val_tasks=6, holdout_tasks=4, task_prefix="val-")
    b = recorded_run(user, name="b", candidates=4, val_tasks=6, holdout_tasks=4, task_prefix="val-")
    with pytest.raises(sel.CompareError, match="same task set"):
        sel.check_same_task_set(a, b)
    sel.check_same_task_set(a, recorded_run(user, name="c", task_set=a.task_set, candidates=4))


def test_an_imported_run_compares_with_runs_on_the_same_task_rows(user):
    a = recorded_run(user, name="a", candidates=4, val_tasks=6, holdout_tasks=4, task_prefix="val-")
    copy = run_import(owner=user, data=run_export(a))
    sel.check_same_task_set(a, copy)
    other = recorded_run(
        user, name="other", val_tasks=3, candidates=4, holdout_tasks=4, task_prefix="val-"
    )
    with pytest.raises(sel.CompareError, match="same task set"):
        sel.check_same_task_set(copy, other)


def test_the_config_diff_lists_only_settings_that_differ():
    assert sel.config_diff(
        {"model": "a", "lm": {"t": 0.2, "k": 1}}, {"model": "a", "lm": {"t": 0.7}, "new": True}
    ) == [
        ("lm.k", "1", None),
        ("lm.t", "0.2", "0.7"),
        ("new", None, "true"),
    ]


def test_score_curves_escape_run_names_for_plotly(user):
    run = recorded_run(
        user,
        name="<img src=x onerror=alert(1)>",
        candidates=4,
        val_tasks=6,
        holdout_tasks=4,
        task_prefix="val-",
    )
    figure = sel.score_curves([run])
    names = [trace["name"] for trace in figure["data"]]
    assert all("<img" not in n and "&lt;img" in n for n in names)
    assert figure["data"][0]["y"] == sorted(figure["data"][0]["y"])  # best so far never drops


@pytest.mark.django_db(transaction=True)
def test_on_a_real_run_each_sentence_is_credited_to_the_ancestor_that_first_wrote_it(
    user, user_client, settings, tmp_path, monkeypatch
):
    from django.urls import reverse

    from optimizer.runs import runner
    from optimizer.textdiff import split_sentences
    from tests.optimizer.run_helpers import run_demo_with_holdout

    settings.RUNS_DIR = tmp_path / "runs"
    monkeypatch.setattr(
        runner, "HEARTBEAT_SECONDS", 3600
    )  # see tests/optimizer/runs/test_runner.py
    run = run_demo_with_holdout(user)
    best = run.best_candidate

    ancestry, history = sel.prompt_history(run, best)

    assert ancestry[0].origin == "seed" and ancestry[-1] == best
    by_index = {c.index: c for c in run.candidates.all()}
    credited = set()
    for name, sentences in history.items():
        assert [s.text for s in sentences] == split_sentences(best.components[name])
        for s in sentences:
            assert s.candidate in ancestry and s.text in split_sentences(
                s.candidate.components[name]
            )
            if s.candidate.parents:  # its parent did not have it yet
                assert s.text not in split_sentences(
                    by_index[s.candidate.parents[0]].components.get(name, "")
                )
            credited.add(s.candidate.index)
    assert credited - {0}, "the simulator's reflections added sentences"
    html = user_client.get(reverse("compare:history", args=[run.pk, best.index])).content.decode()
    for index in credited - {0}:
        assert (
            f'#{index} <span class="muted">iteration {by_index[index].iteration}, reflection</span>'
            in html
        )


def _scores(candidate, split):
    return dict(
        Evaluation.objects.filter(candidate=candidate, split=split).values_list("task_key", "score")
    )


@pytest.fixture
def wide_run(user):
    """Enough val and holdout tasks for an interval (MIN_PAIRS)."""
    return recorded_run(
        user, candidates=4, val_tasks=14, holdout_tasks=11, name="wide", task_prefix="val-"
    )


def test_each_compared_candidate_carries_its_interval_against_the_baseline_per_split(wide_run):
    cands = sel.compare_candidates(wide_run, ["0", "2", "3"])
    lifts = sel.pair_lifts(cands, 2)
    assert [(p.index, p.baseline) for p in lifts] == [(0, 2), (3, 2)]
    base = cands[1]
    for pair, cand in zip(lifts, [cands[0], cands[2]]):
        assert pair.val == paired_lift(_scores(base, "val"), _scores(cand, "val"))
        assert pair.holdout == paired_lift(_scores(base, "holdout"), _scores(cand, "holdout"))
        assert pair.val.tasks == 14 and pair.val.enough
        assert pair.holdout.tasks == 11 and pair.holdout.low is not None


def test_a_split_the_two_candidates_share_no_task_of_has_no_lift(wide_run):
    Evaluation.objects.filter(candidate__run=wide_run, candidate__index=3, split="holdout").delete()
    (pair,) = sel.pair_lifts(sel.compare_candidates(wide_run, ["0", "3"]), None)
    assert pair.baseline == 0 and pair.val is not None and pair.holdout is None


def test_the_lift_breakdown_carries_the_interval_of_best_minus_seed(wide_run, run):
    for split, table in {t.split: t for t in sel.lift_breakdown(wide_run)}.items():
        assert table.lift == paired_lift(_scores(table.seed, split), _scores(table.best, split))
        assert table.lift.enough
    # The small run's 4 holdout tasks are too few to tell.
    holdout = next(t for t in sel.lift_breakdown(run) if t.split == "holdout")
    assert holdout.lift.tasks == 4 and not holdout.lift.enough and holdout.lift.low is None


def test_best_vs_best_of_two_runs_carries_the_interval_on_their_shared_val_tasks(user, wide_run):
    other = recorded_run(
        user, candidates=3, seed=11, name="other", task_set=wide_run.task_set, task_prefix="val-"
    )
    pair = sel.best_vs_best(wide_run, other, "1")
    assert pair.lift == paired_lift(
        _scores(wide_run.best_candidate, "val"), _scores(other.best_candidate, "val")
    )
    assert pair.lift.tasks == 14
