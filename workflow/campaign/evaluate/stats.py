"""Resampling and test primitives shared by the evaluate phase: bootstrap intervals over items
(one variant's metric on one split), McNemar's exact test and Holm's correction. Pure functions
over arrays; every random draw takes an explicit numpy Generator. The variance model of cells
and effects is campaign.evaluate.comparison; the decision policy campaign.evaluate.decide.

Shapes: `correct: (n_items,)`, `indices: (n_resamples, n_items)`, `draws: (n_resamples,)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Interval:
    """A point estimate and its two-sided interval at `confidence` (`over`: what the interval
    comes from)."""

    value: float
    low: float
    high: float
    confidence: float
    over: str = "items (bootstrap)"

    def as_dict(self) -> dict:
        return {"value": self.value, "ci_low": self.low, "ci_high": self.high}


def resample_indices(rng: np.random.Generator, n_items: int, n_resamples: int) -> np.ndarray:
    """(n_resamples, n_items) item indices drawn with replacement. Draw them once per split and
    use them for every variant scored on those items: differences are then paired."""
    if n_items < 1:
        raise ValueError("no items to resample")
    return rng.integers(0, n_items, size=(n_resamples, n_items))


def percentile_interval(point: float, draws: np.ndarray, confidence: float) -> Interval:
    """The percentile bootstrap interval of `draws: (n_resamples,)` around `point`."""
    tail = (1 - confidence) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return Interval(float(point), float(low), float(high), confidence)


def mean_interval(values: np.ndarray, indices: np.ndarray, confidence: float) -> Interval:
    """Bootstrap interval of the mean of `values: (n_items,)` (e.g. 1 where an item is right:
    accuracy) over the resamples `indices: (n_resamples, n_items)`."""
    values = np.asarray(values, dtype=np.float64)
    return percentile_interval(values.mean(), values[indices].mean(axis=1), confidence)


# How an interval at the ceiling or the floor is labelled (edge_interval).
EDGE_OVER = "items' exact bound (every score at the ceiling or every one at the floor: no spread)"


def edge_interval(scores: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """The interval of a mean of per-item scores in [0, 1] when every score sits at the ceiling
    (1) or at the floor (0), else None. `scores: (n_items,)` or `(n_runs, n_items)`; n counts
    the items (the columns), not runs x items: seeds on the same items are not independent.

    There is no spread to resample (a bootstrap gives [1, 1]) or to pool (a design's pooled
    error at ~0 df gives [0, 1]). The items' exact bound does: an item scoring 1 with
    probability at most the mean mu (Markov, for any score in [0, 1]; equality for 0/1), n items
    all at 1 have probability at most mu^n, so mu >= (alpha / 2)^(1/n) at two-sided level 1 -
    alpha (Clopper-Pearson's bound for n successes in n trials); the floor mirrors it. It is the
    items' bound: seed-to-seed spread, none observed, is not in it."""
    y = np.asarray(scores, dtype=np.float64)
    if y.size == 0:
        return None
    n = y.shape[-1]
    bound = ((1 - confidence) / 2) ** (1 / n)
    if np.all(y == 1.0):
        return float(bound), 1.0
    if np.all(y == 0.0):
        return 0.0, float(1 - bound)
    return None


# How an interval over scores that are all 0 or 1 is labelled (score_interval).
EXACT_OVER = "items' exact binomial interval (Clopper-Pearson: every score 0 or 1)"


def exact_interval(scores: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """Clopper-Pearson's interval of the share of items right when every score in
    `scores: (n_items,)` is 0 or 1, else None: the beta quantiles of k right of n, each tail at
    (1 - confidence) / 2, so it covers at least `confidence` for every true share. At k = n it
    is edge_interval's [(alpha / 2)^(1/n), 1]."""
    y = np.asarray(scores, dtype=np.float64)
    if y.size == 0 or not np.all((y == 0.0) | (y == 1.0)):
        return None
    n, k = y.size, int(y.sum())
    tail = (1 - confidence) / 2
    low = float(stats.beta.ppf(tail, k, n - k + 1)) if k > 0 else 0.0
    high = float(stats.beta.isf(tail, k + 1, n - k)) if k < n else 1.0
    return low, high


def score_interval(values: np.ndarray, indices: np.ndarray, confidence: float) -> Interval:
    """The interval of the mean of per-item scores in [0, 1] (`values: (n_items,)`): for scores
    that are all 0 or 1 Clopper-Pearson's exact interval (exact_interval), else the bootstrap
    over `indices`. The percentile bootstrap of a share near its ceiling is too short: 49 of
    50 right gives [94, 100] %, above the 50-of-50 bound (92.9 %), exact [89, 99.95] %; at a
    true 93 % over 50 items it covered 89 % of campaigns against 95, exact 97.8 %
    (tests/evaluate/test_stats.py)."""
    values = np.asarray(values, dtype=np.float64)
    exact = exact_interval(values, confidence)
    if exact is None:
        return mean_interval(values, indices, confidence)
    return Interval(float(values.mean()), exact[0], exact[1], confidence, EXACT_OVER)


def mcnemar_p(a_correct: np.ndarray, b_correct: np.ndarray) -> float:
    """Exact McNemar test (two-sided binomial on the discordant items) that two variants scored
    on the same items are equally accurate."""
    a = np.asarray(a_correct, dtype=bool)
    b = np.asarray(b_correct, dtype=bool)
    only_a = int(np.sum(a & ~b))
    only_b = int(np.sum(~a & b))
    if only_a + only_b == 0:
        return 1.0
    return float(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue)


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values, same order as given (nan stays nan and is not
    counted)."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full_like(p, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    m = finite.size
    if m == 0:
        return out
    order = finite[np.argsort(p[finite], kind="stable")]
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out[order] = adjusted
    return out
