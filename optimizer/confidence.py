"""How sure a lift is: a paired bootstrap interval of the mean score difference.

Two candidates scored on the same tasks give pairs (a_i, b_i). The lift is the
mean of d_i = b_i - a_i; its 95 % interval is the percentile bootstrap over the
tasks: draw n task indices with replacement, RESAMPLES times, from a generator
seeded with SEED, and take the 2.5th and 97.5th percentiles of the resampled
means. The draws are numpy's ``default_rng(SEED).integers(0, n, (RESAMPLES, n))``,
the same ones ``scipy.stats.bootstrap(..., method="percentile", batch=None)``
makes, so the interval can be checked against scipy exactly (the tests do).

Below MIN_PAIRS tasks a bootstrap interval says little (few distinct
resamples, a coarse percentile): the result says "too few tasks to tell" and
confirms nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

RESAMPLES = 10_000
SEED = 0
LEVEL = 0.95
MIN_PAIRS = 10
# Two scores closer than this are the same score (floating-point noise of weighted means).
TIE = 1e-9
METHOD = f"paired bootstrap, percentile, {RESAMPLES:,} resamples, seed {SEED}"
TOO_FEW = f"too few tasks to tell (fewer than {MIN_PAIRS} paired tasks)"


@dataclass(frozen=True)
class Lift:
    """B minus A on the tasks both were scored on."""

    tasks: int
    mean_a: float | None
    mean_b: float | None
    difference: float | None  # mean of b_i - a_i
    low: float | None  # the interval; None below MIN_PAIRS tasks
    high: float | None
    improved: int
    worse: int
    unchanged: int
    level: float = LEVEL
    resamples: int = RESAMPLES
    seed: int = SEED

    @property
    def enough(self) -> bool:
        return self.low is not None

    @property
    def excludes_zero(self) -> bool:
        """The interval lies wholly above or wholly below 0: the sign of the lift is settled."""
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)

    @property
    def confirmed(self) -> bool:
        """B is better than A beyond the bootstrap's doubt."""
        return self.low is not None and self.low > 0

    def describe(self) -> str:
        """One line a page can show as it is."""
        if self.difference is None:
            return "no tasks scored for both"
        counts = f"{self.improved} improved · {self.worse} worse · {self.unchanged} unchanged"
        if self.low is None or self.high is None:
            return f"{self.difference:+.3f} on {self.tasks} tasks; {TOO_FEW} · {counts}"
        return (
            f"{self.difference:+.3f} [{self.low:+.3f}, {self.high:+.3f}] "
            f"({self.level:.0%} interval, {self.tasks} tasks) · {counts}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "enough": self.enough,
            "confirmed": self.confirmed,
            "method": METHOD,
            "text": self.describe(),
        }


def paired_lift(a: Mapping[str, float], b: Mapping[str, float]) -> Lift:
    """B against A over the task keys both have (any others are left out)."""
    keys = sorted(a.keys() & b.keys())
    return lift_of_pairs((a[k], b[k]) for k in keys)


def lift_of_pairs(pairs: Iterable[tuple[float, float]]) -> Lift:
    """The lift of b over a for (a, b) pairs, with its interval and counts."""
    values = np.asarray(list(pairs), dtype=float).reshape(-1, 2)
    n = len(values)
    if n == 0:
        return Lift(0, None, None, None, None, None, 0, 0, 0)
    d = values[:, 1] - values[:, 0]
    improved = int((d > TIE).sum())
    worse = int((d < -TIE).sum())
    low = high = None
    if n >= MIN_PAIRS:
        low, high = bootstrap_interval(d)
    return Lift(
        tasks=n,
        mean_a=float(values[:, 0].mean()),
        mean_b=float(values[:, 1].mean()),
        difference=float(d.mean()),
        low=low,
        high=high,
        improved=improved,
        worse=worse,
        unchanged=n - improved - worse,
    )


def bootstrap_interval(differences: np.ndarray) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of `differences`."""
    return _interval(np.ascontiguousarray(differences, dtype=float).tobytes())


# The draws depend only on the number of tasks: within shared_draws(), intervals
# over the same number of tasks draw once (n -> the draws, as counts: see _shared_counts).
_shared: ContextVar[dict[int, list[np.ndarray]] | None] = ContextVar("shared_draws", default=None)
# The draws are made, counted and turned into resampled means a block of
# resamples at a time: about this many draws at once (1 MB as int64 or
# float64), not RESAMPLES × n of them (800 MB as int64 at 10,000 tasks).
_DRAWS_AT_ONCE = 125_000


@contextmanager
def shared_draws() -> Iterator[None]:
    """Within the block, intervals over the same number of tasks reuse one set
    of draws (a page with 7 lifts of 500 tasks draws 5 M indices once, not 7
    times); they are dropped at its end. The intervals are the same either way."""
    token = _shared.set({})
    try:
        yield
    finally:
        _shared.reset(token)


def _count_blocks(n: int) -> Iterator[np.ndarray]:
    """The RESAMPLES × n draws as counts, a block of rows at a time: row r,
    column i holds how many times resample r drew task i. A resample's mean
    is then its row of counts times the differences, over n: a matrix
    product (BLAS), ~2 ms for 500 tasks once the counts are made, where
    indexing the differences with every draw takes ~15 ms. numpy's generator
    gives the same numbers drawn a block at a time as scipy draws in one call."""
    rng = np.random.default_rng(SEED)
    rows = max(1, _DRAWS_AT_ONCE // n)
    # Each row's draws shifted into a range of its own, so one bincount counts a block of rows.
    shift = np.arange(rows, dtype=np.int64)[:, None] * n
    for row in range(0, RESAMPLES, rows):
        size = min(rows, RESAMPLES - row)
        block = rng.integers(0, n, (size, n))
        block += shift[:size]
        yield np.bincount(block.ravel(), minlength=size * n).reshape(size, n)


def _shared_counts(n: int, shared: dict[int, list[np.ndarray]]) -> list[np.ndarray]:
    """The blocks of counts for n tasks, kept for the other intervals of the
    block, one byte a count (5 MB at 500 tasks): a count above 255 needs 256
    of a resample's n draws on one task, impossible below 256 tasks and,
    above, rarer than 1 in 10**500 (a count is Binomial(n, 1/n), about Poisson(1))."""
    if n not in shared:
        shared[n] = [block.astype(np.uint8) for block in _count_blocks(n)]
    return shared[n]


# A finished run's scores never change, and a compare page asks for the same pairs
# again on every filter and page.
@functools.lru_cache(maxsize=512)
def _interval(differences: bytes) -> tuple[float, float]:
    d = np.frombuffer(differences, dtype=float)
    shared = _shared.get()
    blocks = _count_blocks(len(d)) if shared is None else _shared_counts(len(d), shared)
    means = np.concatenate([block.astype(float) @ d for block in blocks]) / len(d)
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)
