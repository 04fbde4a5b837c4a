"""Statistics for decisions: bootstrap intervals over items, paired comparisons over items and
over seeds, minimum detectable effects, Holm's correction, and the adopt / reject / inconclusive
rule. Pure functions over arrays; every random draw takes an explicit numpy Generator.

Shapes are in the names or docstrings: `correct: (n_items,)`, `indices: (n_resamples, n_items)`,
`diffs: (n_seeds,)`. A metric is "higher is better" unless said otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

ADOPT, REJECT, INCONCLUSIVE = "adopt", "reject", "inconclusive"


@dataclass(frozen=True)
class Interval:
    """A point estimate and its two-sided interval at `confidence`."""

    value: float
    low: float
    high: float
    confidence: float

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


def paired_mean_difference(
    a: np.ndarray, b: np.ndarray, indices: np.ndarray, confidence: float
) -> Interval:
    """Interval of mean(b) - mean(a) for two variants scored on the same items (paired: each
    resample takes the same items for both)."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    return mean_interval(d, indices, confidence)


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


@dataclass(frozen=True)
class SeedComparison:
    """A variant against the control, paired by seed: diffs[s] = variant - control at seed s."""

    n_seeds: int
    mean: float
    sd: float  # of the per-seed differences (ddof 1); nan with one seed
    low: float
    high: float
    t_p: float  # paired t-test, two-sided; nan with one seed
    wilcoxon_p: float  # Wilcoxon signed-rank, two-sided; nan when it cannot be computed


def paired_t(diffs: np.ndarray, confidence: float) -> tuple[np.ndarray, ...]:
    """(mean, sd, low, high, t_p) of per-seed differences `diffs: (..., n_seeds)`, over the last
    axis, for many comparisons at once: the t interval and the two-sided paired t-test."""
    d = np.asarray(diffs, dtype=np.float64)
    k = d.shape[-1]
    mean = d.mean(axis=-1)
    if k < 2:
        nan = np.full_like(mean, np.nan)
        return mean, nan, nan, nan, nan
    sd = d.std(axis=-1, ddof=1)
    se = sd / math.sqrt(k)
    half = stats.t.ppf(1 - (1 - confidence) / 2, k - 1) * se
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, mean / se, np.where(mean == 0, 0.0, np.inf))
    t_p = np.minimum(1.0, 2 * stats.t.sf(np.abs(t), k - 1))
    return mean, sd, mean - half, mean + half, t_p


def paired_seeds(diffs: np.ndarray, confidence: float) -> SeedComparison:
    """Mean difference over seeds with its t interval, the paired t-test and Wilcoxon."""
    d = np.asarray(diffs, dtype=np.float64)
    k = d.size
    mean, sd, low, high, t_p = (float(v) for v in paired_t(d, confidence))
    if k < 2:
        return SeedComparison(k, mean, math.nan, math.nan, math.nan, math.nan, math.nan)
    try:
        wilcoxon_p = float(stats.wilcoxon(d).pvalue) if np.any(d != 0) else 1.0
    except ValueError:
        wilcoxon_p = math.nan
    return SeedComparison(k, mean, sd, low, high, t_p, wilcoxon_p)


def t_test_power(effect: float, sd: float, n_seeds: int, alpha: float = 0.05) -> float:
    """The probability that a two-sided paired t-test at `alpha` over `n_seeds` seeds, whose
    differences have standard deviation `sd`, rejects when the true mean difference is `effect`
    (exact: the noncentral t distribution)."""
    if n_seeds < 2 or not math.isfinite(sd) or sd <= 0:
        return math.nan
    df = n_seeds - 1
    crit = stats.t.ppf(1 - alpha / 2, df)
    nc = abs(effect) * math.sqrt(n_seeds) / sd
    # scipy's nct gives nan far in a tail: there the upper tail is ~1, the lower one ~0.
    upper = float(stats.nct.sf(crit, df, nc))
    lower = float(stats.nct.cdf(-crit, df, nc))
    upper = upper if math.isfinite(upper) else 1.0
    lower = lower if math.isfinite(lower) else 0.0
    return min(1.0, upper + lower)


def minimum_detectable_effect(
    sd: float, n_seeds: int, alpha: float = 0.05, power: float = 0.8
) -> float:
    """The smallest true mean difference a two-sided paired t-test at `alpha` detects with
    probability `power`, with `n_seeds` seeds whose differences have standard deviation `sd`
    (exact noncentral t; the usual (t_a + t_b) sd / sqrt(n) is optimistic at few seeds)."""
    if n_seeds < 2 or not math.isfinite(sd):
        return math.inf
    if sd == 0:
        return 0.0
    from scipy.optimize import brentq

    df = n_seeds - 1
    guess = (stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * sd / math.sqrt(n_seeds)
    high = guess
    while t_test_power(high, sd, n_seeds, alpha) < power:
        high *= 2
    return float(
        brentq(lambda d: t_test_power(d, sd, n_seeds, alpha) - power, 0.0, high, xtol=1e-12)
    )


def seeds_needed(
    effect: float, sd: float, alpha: float = 0.05, power: float = 0.8, most: int = 1000
) -> int | None:
    """The fewest seeds at which a true difference of `effect` is significant (p < alpha) with
    probability `power` (None: more than `most`, or no spread measured yet)."""
    if effect <= 0 or not math.isfinite(sd):
        return None
    if sd == 0:
        return 2
    for k in range(2, most + 1):
        if t_test_power(effect, sd, k, alpha) >= power:
            return k
    return None


def holm_rows(p_values: np.ndarray) -> np.ndarray:
    """Holm's adjusted p-values along the last axis of `p_values: (..., m)` (no nan)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=-1) * (m - np.arange(m))
    adjusted = np.minimum(1.0, np.maximum.accumulate(ranked, axis=-1))
    out = np.empty_like(p)
    np.put_along_axis(out, order, adjusted, axis=-1)
    return out


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


def decide(
    estimate: float,
    low: float,
    high: float,
    p_adjusted: float,
    min_useful_effect: float,
    alpha: float,
) -> str:
    """adopt: the difference is real after correction (p_adjusted < alpha), positive, and at
    least the useful size; reject: the interval rules out a useful effect (its upper end is below
    min_useful_effect, a harmful change included); inconclusive: neither."""
    if math.isfinite(p_adjusted) and p_adjusted < alpha and estimate > 0:
        if estimate >= min_useful_effect:
            return ADOPT
    if math.isfinite(high) and high < min_useful_effect:
        return REJECT
    return INCONCLUSIVE


def decide_rows(
    estimate: np.ndarray,
    high: np.ndarray,
    p_adjusted: np.ndarray,
    min_useful_effect: float,
    alpha: float,
) -> np.ndarray:
    """`decide` for arrays of comparisons at once (same shapes in, strings out)."""
    adopt = (p_adjusted < alpha) & (estimate > 0) & (estimate >= min_useful_effect)
    reject = ~adopt & (high < min_useful_effect)
    return np.where(adopt, ADOPT, np.where(reject, REJECT, INCONCLUSIVE))


def decide_loss(low: float, high: float, max_quality_loss: float) -> str:
    """For a compressed variant against its reference (difference = variant - reference):
    adopt when the interval rules out a loss larger than max_quality_loss (non-inferiority),
    reject when it rules out a loss that small, inconclusive otherwise."""
    if math.isfinite(low) and low > -max_quality_loss:
        return ADOPT
    if math.isfinite(high) and high < -max_quality_loss:
        return REJECT
    return INCONCLUSIVE
