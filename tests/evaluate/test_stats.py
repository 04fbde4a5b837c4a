"""The statistics behind the decisions: answers computed by hand on tiny arrays, interval
properties, determinism, and simulations (vectorized, seconds) of coverage, false adoptions
under no difference, and power at twice the minimum detectable effect."""

from __future__ import annotations

import math

import numpy as np
import pytest

from campaign.evaluate import stats
from campaign.evaluate.metrics import classification_metrics, metric_draws, perplexity


# ------------------------------------------------------------------ by hand
def test_holm_by_hand():
    adjusted = stats.holm(np.array([0.01, 0.04, 0.03, np.nan]))
    # sorted 0.01, 0.03, 0.04 times 3, 2, 1 = 0.03, 0.06, 0.04 -> running max 0.03, 0.06, 0.06
    np.testing.assert_allclose(adjusted[:3], [0.03, 0.06, 0.06])
    assert math.isnan(adjusted[3])
    assert stats.holm(np.array([0.6, 0.9]))[1] == 1.0  # capped at 1


def test_mcnemar_by_hand():
    a = np.array([1, 1, 1, 0, 0], dtype=bool)
    b = np.array([1, 0, 0, 0, 1], dtype=bool)
    assert stats.mcnemar_p(a, b) == pytest.approx(1.0)  # 2 vs 1 discordant
    a = np.zeros(6, dtype=bool)
    assert stats.mcnemar_p(a, ~a) == pytest.approx(2 * 0.5**6)  # 0 vs 6: 0.03125
    assert stats.mcnemar_p(a, a) == 1.0  # no discordant item


def test_paired_seeds_by_hand():
    c = stats.paired_seeds(np.array([0.01, 0.03]), confidence=0.95)
    assert c.mean == pytest.approx(0.02) and c.sd == pytest.approx(math.sqrt(2) / 100)
    half = 12.7062 * (math.sqrt(2) / 100) / math.sqrt(2)  # t(0.975, 1) x sd / sqrt(2)
    assert (c.low, c.high) == pytest.approx((0.02 - half, 0.02 + half), rel=1e-4)
    assert c.t_p == pytest.approx(0.29517, rel=1e-4)  # t = 2 with 1 degree of freedom
    one = stats.paired_seeds(np.array([0.05]), 0.95)
    assert one.mean == 0.05 and math.isnan(one.low) and math.isnan(one.t_p)


def test_minimum_detectable_effect_and_seeds_needed_by_hand():
    # Exact (noncentral t): at 4 seeds the power is 0.8 at 2.1279 sd; the normal shortcut
    # (t(0.975, 3) + t(0.8, 3)) / sqrt(4) = 2.0805 is optimistic (power 0.78 there).
    assert stats.minimum_detectable_effect(1.0, 4) == pytest.approx(2.1279, rel=1e-4)
    assert stats.t_test_power(2.0805, 1.0, 4) == pytest.approx(0.78, abs=0.01)
    # Two seeds: a t-test over one degree of freedom needs 11.5 sd for 80 % power.
    assert stats.minimum_detectable_effect(1.0, 2) == pytest.approx(11.55, rel=1e-3)
    # k = 9: power 0.76 at 1 sd; k = 10: 0.80
    assert stats.t_test_power(1.0, 1.0, 9) < 0.8 <= stats.t_test_power(1.0, 1.0, 10)
    assert stats.seeds_needed(1.0, 1.0) == 10
    assert stats.minimum_detectable_effect(1.0, 1) == math.inf
    assert stats.seeds_needed(0.0, 1.0) is None


def test_decisions_by_hand():
    # significant, positive, useful size -> adopt; significant but too small -> inconclusive
    assert stats.decide(0.05, 0.02, 0.08, 0.001, 0.01, 0.05) == stats.ADOPT
    assert stats.decide(0.005, 0.002, 0.008, 0.001, 0.01, 0.05) == stats.REJECT
    assert stats.decide(0.02, -0.01, 0.05, 0.2, 0.01, 0.05) == stats.INCONCLUSIVE
    assert stats.decide(-0.05, -0.08, -0.02, 0.001, 0.01, 0.05) == stats.REJECT
    # compressed variants: non-inferiority against max_quality_loss 0.01
    assert stats.decide_loss(-0.005, 0.002, 0.01) == stats.ADOPT
    assert stats.decide_loss(-0.05, -0.02, 0.01) == stats.REJECT
    assert stats.decide_loss(-0.02, 0.01, 0.01) == stats.INCONCLUSIVE


def test_classification_metrics_by_hand():
    truth = np.array([0, 0, 1, 1])
    probs = np.array([[0.9, 0.1], [0.4, 0.6], [0.2, 0.8], [0.3, 0.7]])
    rng = np.random.default_rng(0)
    m = classification_metrics(truth, probs, ["a", "b"], stats.resample_indices(rng, 4, 200), 0.9)
    assert m["accuracy"].value == 0.75
    # class a: tp 1 of 1 predicted, 2 actual -> P 1, R 0.5, F1 2/3; class b: P 2/3, R 1, F1 0.8
    assert m["precision[a]"].value == 1.0 and m["recall[a]"].value == 0.5
    assert m["f1[b]"].value == pytest.approx(0.8)
    assert m["macro_f1"].value == pytest.approx((2 / 3 + 0.8) / 2)
    assert m["log_loss"].value == pytest.approx(-np.mean(np.log([0.9, 0.4, 0.8, 0.7])))
    # ECE, 15 bins: confidences 0.9 (bin 13), 0.6 (bin 9), 0.8 (bin 12), 0.7 (bin 10), all
    # alone: |1 - 0.9| + |0 - 0.6| + |1 - 0.8| + |1 - 0.7| = 1.2, over 4 items
    assert m["ece"].value == pytest.approx(0.3)
    unseen = classification_metrics(
        np.array([0, -1]), probs[:2], ["a", "b"], np.zeros((3, 2), int), 0.9
    )
    assert unseen["accuracy"].value == 0.5  # a label the model never saw counts as wrong


# ------------------------------------------------------------------ properties, determinism
def test_intervals_hold_their_point_and_are_deterministic():
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(20, 200))
        truth = rng.integers(0, 3, n)
        probs = rng.dirichlet(np.ones(3), n)
        idx = stats.resample_indices(np.random.default_rng(1), n, 300)
        for interval in classification_metrics(truth, probs, ["x", "y", "z"], idx, 0.95).values():
            assert (
                interval.low <= interval.value + 1e-12 and interval.value <= interval.high + 1e-12
            )
    a = stats.resample_indices(np.random.default_rng(3), 50, 10)
    assert np.array_equal(a, stats.resample_indices(np.random.default_rng(3), 50, 10))
    assert not np.array_equal(a, stats.resample_indices(np.random.default_rng(4), 50, 10))


# ------------------------------------------------------------------ simulations
def test_paired_item_interval_covers_at_nominal_rate():
    """1,000 comparisons of two variants on 300 items: the 95% paired bootstrap interval of the
    accuracy difference covers the true difference 93-97% of the time."""
    rng = np.random.default_rng(2026)
    n, sims, covered = 300, 1000, 0
    q_minus, q_plus = 0.08, 0.12  # P(only a right), P(only b right): true difference 0.04
    for _ in range(sims):
        u = rng.random(n)
        d = np.where(u < q_minus, -1.0, np.where(u < q_minus + q_plus, 1.0, 0.0))
        idx = stats.resample_indices(rng, n, 1000)
        ci = stats.mean_interval(d, idx, 0.95)
        covered += ci.low <= q_plus - q_minus <= ci.high
    assert 0.93 <= covered / sims <= 0.97, covered / sims


def simulate_seeds(rng, effects, n_sims, n_seeds, n_items=300, base=0.7, seed_sd=0.02):
    """Per-seed accuracy differences (n_sims, n_comparisons, n_seeds) of variants against the
    control, each measured on n_items items; every seed moves both arms (shared data order)
    plus its own noise."""
    effects = np.asarray(effects)
    shared = rng.normal(0, seed_sd, (n_sims, 1, n_seeds))
    control = rng.binomial(n_items, np.clip(base + shared, 0, 1)) / n_items
    own = rng.normal(0, seed_sd, (n_sims, effects.size, n_seeds))
    p = np.clip(base + effects[None, :, None] + shared + own, 0, 1)
    return rng.binomial(n_items, p) / n_items - control


def decisions(diffs, min_useful, alpha=0.05):
    """The decision of each comparison (n_sims, n_comparisons), Holm within a campaign."""
    mean, _sd, _low, high, t_p = stats.paired_t(diffs, 0.95)
    return stats.decide_rows(mean, high, stats.holm_rows(t_p), min_useful, alpha)


def test_the_batch_functions_agree_with_the_one_at_a_time_ones():
    rng = np.random.default_rng(5)
    diffs = simulate_seeds(rng, [0.0, 0.02, 0.05], 40, 4)
    mean, sd, low, high, t_p = stats.paired_t(diffs, 0.95)
    adjusted = stats.holm_rows(t_p)
    for i in range(40):
        np.testing.assert_allclose(adjusted[i], stats.holm(t_p[i]))
        for j in range(3):
            one = stats.paired_seeds(diffs[i, j], 0.95)
            np.testing.assert_allclose(
                [one.mean, one.sd, one.low, one.high, one.t_p],
                [mean[i, j], sd[i, j], low[i, j], high[i, j], t_p[i, j]],
            )
            assert decisions(diffs[i : i + 1], 0.01)[0, j] == stats.decide(
                one.mean, one.low, one.high, adjusted[i, j], 0.01, 0.05
            )


@pytest.mark.parametrize("n_seeds", [2, 3, 5])
def test_seed_interval_covers_at_nominal_rate(n_seeds):
    rng = np.random.default_rng(n_seeds)
    diffs = simulate_seeds(rng, [0.03], 4000, n_seeds)[:, 0, :]
    _mean, _sd, low, high, _p = stats.paired_t(diffs, 0.95)
    covered = np.mean((low <= 0.03) & (0.03 <= high))
    assert 0.93 <= covered <= 0.97, covered


def test_no_difference_adopts_at_most_five_percent_after_holm():
    rng = np.random.default_rng(11)
    diffs = simulate_seeds(rng, [0.0, 0.0, 0.0, 0.0], 1000, n_seeds=3)
    made = decisions(diffs, min_useful=0.0)
    campaigns_with_an_adoption = np.mean((made == stats.ADOPT).any(axis=1))
    assert campaigns_with_an_adoption <= 0.05, campaigns_with_an_adoption


def test_twice_the_minimum_detectable_effect_is_adopted_at_least_80_percent():
    rng = np.random.default_rng(12)
    n_seeds = 5
    # The sd of the per-seed differences, measured on a large A/A sample, gives the MDE.
    sd = simulate_seeds(rng, [0.0], 20000, n_seeds)[:, 0, :].std(ddof=1)
    mde = stats.minimum_detectable_effect(sd, n_seeds)
    diffs = simulate_seeds(rng, [2 * mde, 0.0, 0.0], 1000, n_seeds)
    made = decisions(diffs, min_useful=mde)
    assert np.mean(made[:, 0] == stats.ADOPT) >= 0.8, (mde, np.mean(made[:, 0] == stats.ADOPT))
    assert np.mean(made[:, 1:] == stats.ADOPT) <= 0.05


@pytest.mark.parametrize("n_seeds", [2, 3, 5])
def test_at_the_minimum_detectable_effect_the_t_test_rejects_80_percent(n_seeds):
    """Not at twice the MDE (which hides a formula off by almost 2x): at the MDE itself."""
    rng = np.random.default_rng(n_seeds)
    mde = stats.minimum_detectable_effect(1.0, n_seeds)
    diffs = rng.normal(mde, 1.0, (20000, n_seeds))
    *_, t_p = stats.paired_t(diffs, 0.95)
    assert np.mean(t_p < 0.05) == pytest.approx(0.80, abs=0.015)


def test_a_perfect_model_has_macro_f1_one_in_every_resample_even_with_a_rare_class():
    """A resample that misses the 2-item class must not score that class 0 (it does not occur
    there): a perfect model's macro-F1 interval is [1, 1]."""
    truth = np.array([0] * 198 + [1] * 2)
    probs = np.eye(2)[truth]
    idx = stats.resample_indices(np.random.default_rng(0), 200, 2000)
    m = classification_metrics(truth, probs, ["common", "rare"], idx, 0.95)
    assert (m["macro_f1"].value, m["macro_f1"].low, m["macro_f1"].high) == (1.0, 1.0, 1.0)
    point, draws = metric_draws(truth, probs, idx, "macro_f1")
    assert point == 1.0 and (draws == 1.0).all()


def test_perplexity_is_the_ratio_of_sums_resampled_by_item():
    # items: nll 2, 4, 6 nats over 1, 1, 2 tokens -> exp(12 / 4) = e^3
    nll, tokens = np.array([2.0, 4.0, 6.0]), np.array([1, 1, 2])
    idx = np.array([[0, 0, 0], [2, 2, 2], [0, 1, 2], [1, 1, 2]])
    p = perplexity(nll, tokens, idx, 0.5)
    assert p.value == pytest.approx(math.exp(3.0))
    # the resamples' ratios: 6/3=2, 18/6=3, 12/4=3, 14/4=3.5; the 50 % interval: numpy's linear
    # quantiles at 0.25 and 0.75 of their exponentials [e^2, e^3, e^3, e^3.5]
    e = np.exp([2.0, 3.0, 3.0, 3.5])
    assert p.low == pytest.approx(e[0] + 0.75 * (e[1] - e[0]))
    assert p.high == pytest.approx(e[2] + 0.25 * (e[3] - e[2]))
    # not the mean of per-item perplexities (exp(2), exp(4), exp(3)): a ratio of sums
    assert p.value != pytest.approx(np.mean(np.exp(nll / tokens)))
    # an item whose label the model never saw (nll NaN, no tokens) weighs nothing
    q = perplexity(np.array([2.0, np.nan]), np.array([1, 0]), np.array([[0, 1], [1, 1]]), 0.9)
    assert q.value == pytest.approx(math.exp(2.0)) and q.low == q.high == q.value
    with pytest.raises(ValueError, match="no response tokens"):
        perplexity(np.array([np.nan]), np.array([0]), np.zeros((2, 1), int), 0.9)
