"""The reference the lift intervals are checked against: scipy's bootstrap,
paired, percentile, with the seed, resamples and level Frontier states."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from optimizer import confidence


def scipy_interval(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """The 95 % interval of mean(b − a) that scipy.stats.bootstrap computes."""
    result = stats.bootstrap(
        (np.asarray(a, dtype=float), np.asarray(b, dtype=float)),
        lambda x, y, axis=-1: np.mean(y - x, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=confidence.RESAMPLES,
        confidence_level=confidence.LEVEL,
        method="percentile",
        rng=np.random.default_rng(confidence.SEED),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)
