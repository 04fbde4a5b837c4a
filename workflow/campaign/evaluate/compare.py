"""Comparisons between variants: paired by item (two variants scored on the same items: the
paired bootstrap of the difference, McNemar for accuracy) and paired by seed (a cell against the
control at each shared seed: the mean difference, its t interval, the paired t-test and Wilcoxon,
the seeds' spread, the minimum detectable effect and the seeds a wanted effect needs).

A comparison is a dict (one row of comparisons.parquet); `estimate` is always b - a, in the
metric's units (a fraction: 0.041 is 4.1 points), higher is better.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from campaign.evaluate.stats import (
    mcnemar_p,
    minimum_detectable_effect,
    paired_seeds,
    percentile_interval,
    seeds_needed,
)


def bootstrap_p(diff_draws: np.ndarray) -> float:
    """Two-sided bootstrap p-value that a difference is zero: twice the smaller tail share,
    counted as (1 + k) / (1 + B) so that it is never 0."""
    d = np.asarray(diff_draws)
    tail = min(np.sum(d <= 0), np.sum(d >= 0))
    return float(min(1.0, 2 * (1 + tail) / (1 + d.size)))


def by_items(a: dict, b: dict, metric: str, confidence: float) -> dict:
    """b - a on the same items. a, b: {"point", "draws", "correct"} of one split (draws over the
    shared resamples)."""
    estimate = b["point"] - a["point"]
    interval = percentile_interval(estimate, b["draws"] - a["draws"], confidence)
    if metric == "accuracy":
        p, test = mcnemar_p(a["correct"], b["correct"]), "McNemar (exact)"
    else:
        p, test = bootstrap_p(b["draws"] - a["draws"]), "paired bootstrap"
    return {
        "n_seeds": 1,
        "estimate": estimate,
        "ci_low": interval.low,
        "ci_high": interval.high,
        "p_value": p,
        "test": test,
        "wilcoxon_p": math.nan,
        "seed_sd": math.nan,
        "mde": math.nan,
        "seeds_needed": None,
        "interval_over": "items (one seed: seed-to-seed spread not measured)",
    }


def by_seeds(
    a: dict[int, float],
    b: dict[int, float],
    confidence: float,
    alpha: float,
    power: float,
    wanted: float,
    item_se: float = 0.0,
) -> dict | None:
    """b - a paired by seed over the seeds both ran ({seed: metric}); None under two seeds.

    The standard error is that of the seeds' mean difference with the items' share added:
    sqrt(sd^2 / k + item_se^2), item_se being the bootstrap standard error over items of the
    mean-over-seeds difference. Seeds that happen to agree exactly (common with accuracy on a
    few hundred items) then give an interval as wide as the items allow, never a p of 0."""
    seeds = sorted(set(a) & set(b))
    if len(seeds) < 2:
        return None
    diffs = np.array([b[s] - a[s] for s in seeds])
    k = len(seeds)
    mean, sd = float(diffs.mean()), float(diffs.std(ddof=1))
    se = math.sqrt(sd**2 / k + item_se**2)
    half = float(stats.t.ppf(1 - (1 - confidence) / 2, k - 1)) * se
    p = float(min(1.0, 2 * stats.t.sf(abs(mean) / se, k - 1))) if se > 0 else 1.0
    effective_sd = se * math.sqrt(k)  # what one more seed's difference varies by, items too
    return {
        "n_seeds": k,
        "estimate": mean,
        "ci_low": mean - half,
        "ci_high": mean + half,
        "p_value": p,
        "test": "paired t over seeds (items' share added)",
        "wilcoxon_p": paired_seeds(diffs, confidence).wilcoxon_p,
        "seed_sd": sd,
        "mde": minimum_detectable_effect(effective_sd, k, alpha, power),
        "seeds_needed": seeds_needed(wanted, effective_sd, alpha, power),
        "interval_over": f"seeds (t interval over {k} seeds, items' standard error added)",
    }


def points(value: float) -> str:
    """A metric difference in points, signed: +4.1."""
    return f"{value * 100:+.1f}"


def interval_words(row: dict) -> str:
    low, high = row["ci_low"], row["ci_high"]
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{points(row['estimate'])} points (no interval)"
    return f"{points(row['estimate'])} points [{low * 100:.1f}, {high * 100:.1f}]"
