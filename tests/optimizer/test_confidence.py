"""The lift interval against scipy's bootstrap on the same pairs."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer import confidence
from optimizer.confidence import lift_of_pairs, paired_lift
from tests.bootstrap_reference import scipy_interval


@pytest.mark.parametrize(
    "seed,n", [(1, 10), (2, 24), (3, 60), (4, 300)], ids=["10", "24", "60", "300"]
)
def test_the_interval_is_the_one_scipy_computes_on_the_same_pairs(seed, n):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, 1, n).round(3).tolist()
    b = np.clip(np.asarray(a) + rng.normal(0.05, 0.2, n), 0, 1).round(3).tolist()
    lift = lift_of_pairs(zip(a, b))
    low, high = scipy_interval(a, b)
    assert lift.low == pytest.approx(low, abs=1e-12)
    assert lift.high == pytest.approx(high, abs=1e-12)
    assert lift.difference == pytest.approx(np.mean(np.asarray(b) - np.asarray(a)))
    assert lift.low < lift.difference < lift.high


def test_it_counts_tasks_improved_worse_and_unchanged():
    a = {f"t{i}": 0.5 for i in range(12)}
    b = {**a, "t0": 1.0, "t1": 1.0, "t2": 0.0, "t3": 0.5 + 1e-12}
    lift = paired_lift(a, b)
    assert (lift.improved, lift.worse, lift.unchanged) == (2, 1, 9)
    assert lift.tasks == 12


def test_it_pairs_only_the_tasks_both_candidates_were_scored_on():
    a = {"x": 0.0, "y": 0.0, "only-a": 1.0}
    b = {"x": 1.0, "y": 0.5, "only-b": 0.0}
    lift = paired_lift(a, b)
    assert lift.tasks == 2
    assert lift.difference == pytest.approx(0.75)


def test_below_the_stated_size_it_says_too_few_tasks_to_tell():
    pairs = [(0.0, 1.0)] * (confidence.MIN_PAIRS - 1)
    lift = lift_of_pairs(pairs)
    assert lift.low is None and not lift.confirmed and not lift.enough
    assert "too few tasks to tell" in lift.describe()
    assert lift_of_pairs([(0.0, 1.0)] * confidence.MIN_PAIRS).confirmed


def test_a_lift_is_confirmed_only_when_the_interval_lies_above_zero():
    noisy = [(0.5, 1.0)] * 6 + [(1.0, 0.5)] * 5
    lift = lift_of_pairs(noisy)
    assert lift.difference is not None and lift.difference > 0
    assert lift.low is not None and lift.low < 0 < lift.high
    assert not lift.confirmed and not lift.excludes_zero
    worse = lift_of_pairs([(1.0, 0.0)] * 12)
    assert worse.excludes_zero and not worse.confirmed


def test_no_shared_tasks_give_no_lift():
    lift = paired_lift({"a": 1.0}, {"b": 1.0})
    assert lift.tasks == 0 and lift.difference is None
    assert lift.describe() == "no tasks scored for both"


def test_the_result_states_its_method_seed_and_resamples():
    data = lift_of_pairs([(0.2, 0.4)] * 10).as_dict()
    assert data["resamples"] == confidence.RESAMPLES and data["seed"] == confidence.SEED
    assert "paired bootstrap" in data["method"] and data["text"].startswith("+0.200 [")


def test_lifts_over_the_same_tasks_on_one_page_draw_once_and_keep_their_intervals(monkeypatch):
    """The compare page bootstraps up to 7 pairs of the same tasks: inside
    shared_draws the 10,000 resamples are drawn once per number of tasks, and
    every interval is exactly the one computed alone."""
    rng = np.random.default_rng(9)
    pairs = [
        list(zip(rng.uniform(0, 1, n).round(3), rng.uniform(0, 1, n).round(3)))
        for n in (300, 300, 300, 40)
    ]
    alone = [lift_of_pairs(p) for p in pairs]
    confidence._interval.cache_clear()
    draws = []
    default_rng = np.random.default_rng
    monkeypatch.setattr(
        confidence.np.random, "default_rng", lambda seed: draws.append(seed) or default_rng(seed)
    )
    with confidence.shared_draws():
        together = [lift_of_pairs(p) for p in pairs]
    assert together == alone
    assert len(draws) == 2  # 300 tasks, then 40


def test_an_interval_over_many_tasks_holds_a_block_of_its_draws_not_all():
    """The 10,000 resamples of 5,000 tasks are 50 M draws (400 MB as scipy's
    int64): one interval draws, counts and averages them a block at a time,
    so its peak stays a few MB (tracemalloc sees numpy's arrays)."""
    import tracemalloc

    d = np.random.default_rng(5).uniform(-1, 1, 5_000)
    confidence._interval.cache_clear()
    tracemalloc.start()
    try:
        confidence.bootstrap_interval(d)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000
