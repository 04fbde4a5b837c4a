"""The statistics behind the decisions: answers computed by hand on tiny arrays, interval
properties, determinism, and the coverage of the paired item bootstrap. The crossed seed x item
model and the decisions are tested in test_comparison.py and simulated in test_bench_stats.py."""

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


def test_debiased_ece_by_hand():
    # 10 items at confidence 0.55, all right; 10 at 0.75, 8 right. Binned ECE:
    # (10 * 0.45 + |8 - 7.5|) / 20 = 0.25. Debiased (Kumar et al.): half the items at gap 0.45
    # with no noise, half at (0.05^2 - 0.8 * 0.2 / 9): sqrt(0.10125 - 0.0076389) = 0.30596,
    # above the binned 0.25 here: the bins' noise no longer cancels the 0.45 gap's sign
    probs = np.array([[0.55, 0.45]] * 10 + [[0.75, 0.25]] * 10)
    truth = np.array([0] * 10 + [0] * 8 + [1] * 2)
    rng = np.random.default_rng(0)
    m = classification_metrics(truth, probs, ["a", "b"], stats.resample_indices(rng, 20, 300), 0.9)
    assert m["ece"].value == pytest.approx(0.25)
    assert m["ece_debiased"].value == pytest.approx(
        math.sqrt(0.5 * 0.45**2 + 0.5 * (0.05**2 - 0.16 / 9))
    )
    for name in ("ece", "ece_debiased"):
        assert 0 <= m[name].low <= m[name].value <= m[name].high


def test_a_calibrated_model_has_debiased_ece_near_zero_and_binned_ece_above():
    rng = np.random.default_rng(3)
    conf = rng.uniform(0.5, 1.0, 2000)
    truth = (rng.random(2000) >= conf).astype(int)  # class 0 right with probability conf
    probs = np.stack([conf, 1 - conf], axis=1)
    m = classification_metrics(
        truth, probs, ["a", "b"], stats.resample_indices(rng, 2000, 300), 0.95
    )
    assert m["ece_debiased"].value < m["ece"].value
    assert m["ece_debiased"].low == 0.0  # calibrated: the interval reaches 0


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


def test_a_level_with_no_spread_has_the_items_exact_bound_not_a_point_or_the_whole_scale():
    """Every item at 1 (a perfect cell on test) or at 0: the bootstrap gave [1, 1] for a run and
    the design's pooled error at ~0.5 df gave [0.003, 1] for a cell. Both now give the exact bound
    for n items all at the edge, (alpha / 2)^(1/n), counting items, not seeds x items."""
    from campaign.evaluate.questions import cell_rows

    n = 50
    bound = 0.025 ** (1 / 50)  # 0.92884: 50 items all right, 95 %
    assert math.isclose(bound, math.exp(math.log(0.025) / 50))
    rng = np.random.default_rng(3)
    indices = stats.resample_indices(rng, n, 200)
    run = stats.score_interval(np.ones(n), indices, 0.95)
    assert (run.value, run.high) == (1.0, 1.0) and math.isclose(run.low, bound)
    assert run.over == stats.EXACT_OVER
    none = stats.score_interval(np.zeros(n), indices, 0.95)
    assert (none.value, none.low) == (0.0, 0.0) and math.isclose(none.high, 1 - bound)
    # a cell of 2 seeds beside one with spread (whose error the design pools)
    design = {"perfect": np.ones((2, n)), "spread": (rng.random((2, n)) < 0.7).astype(float)}
    design["empty"] = np.zeros((2, n))
    rows = cell_rows(design, 0.95)
    assert math.isclose(rows["perfect"]["ci_low"], bound) and rows["perfect"]["ci_high"] == 1.0
    assert rows["empty"]["ci_low"] == 0.0 and math.isclose(rows["empty"]["ci_high"], 1 - bound)
    assert rows["perfect"]["interval_over"] == stats.EDGE_OVER
    # a cell with spread keeps the crossed interval; scores in (0, 1) at the edge do not count
    assert rows["spread"]["interval_over"] != stats.EDGE_OVER
    assert stats.edge_interval(np.full(n, 0.9), 0.95) is None
    spread = stats.score_interval(np.r_[np.ones(n - 1), 0.5], indices, 0.95)
    assert spread.over == "items (bootstrap)"


def test_a_share_of_zero_one_items_has_the_exact_interval_at_every_count():
    """0/1 scores (a run's, a slice's or a classifier's accuracy) take Clopper-Pearson's
    interval: the percentile bootstrap gave 49 of 50 right [0.94, 1.00], shorter than the
    50-of-50 bound below it (0.929), and exact is [0.894, 0.9995]. Simulated through
    score_interval itself at a true 93 % over 50 items, 4,000 campaigns: the bootstrap
    covered 89 % (its lower end above the truth at 48-49 right), the exact interval covers at
    least 95 % (97.8 % by enumeration); at a true 98 % both cover."""
    from scipy import stats as st

    n = 50
    indices = stats.resample_indices(np.random.default_rng(0), n, 2000)
    iv = stats.score_interval(np.r_[np.ones(n - 1), 0.0], indices, 0.95)
    assert iv.over == stats.EXACT_OVER and iv.value == 0.98
    assert iv.low == pytest.approx(st.beta.ppf(0.025, 49, 2))  # 0.8935
    assert iv.high == pytest.approx(st.beta.ppf(0.975, 50, 1))  # 0.99949
    lows = [stats.score_interval(np.r_[np.ones(k), np.zeros(n - k)], indices, 0.95).low
            for k in range(n + 1)]  # fmt: skip
    assert lows == sorted(lows)  # more items right never lowers the lower end
    rng = np.random.default_rng(33)
    for truth in (0.93, 0.98):
        hits = 0
        for _ in range(4000):
            y = (rng.random(n) < truth).astype(np.float64)
            iv = stats.score_interval(y, indices, 0.95)
            hits += iv.low <= truth <= iv.high
        assert hits / 4000 >= 0.95, (truth, hits / 4000)


def test_the_edge_bound_is_exact_for_zero_one_items():
    """At the bound, n items all right happen with probability (alpha / 2): the bound is the
    lowest rate the data does not exclude, simulated with 0/1 items at rates around it."""
    n, level = 30, 0.9
    low, _ = stats.edge_interval(np.ones(n), level)
    rng = np.random.default_rng(11)
    for rate, expected in ((low, 0.05), (low - 0.03, None)):
        all_right = (rng.random((40_000, n)) < rate).all(axis=1).mean()
        if expected is None:
            assert all_right < 0.05 - 0.01  # below the bound: excluded more often
        else:
            assert abs(all_right - expected) < 0.006


def test_a_one_seed_cell_of_zero_one_items_has_the_exact_interval():
    """With one seed per cell the items are a cell's only measured noise, and its 0/1 scores
    are k right of n: Wilson's interval at n_eff = n with a t quantile ended short near the
    ceiling (49 of 50: [0.890, 0.9966], exact [0.894, 0.9995]) and covered a true 99 % in 91 %
    of campaigns over 50 items. Through cell_rows itself, by enumeration over k: at least 95 %
    at every true share tried; a cell beside cells with seeds keeps the design's interval."""
    from scipy import stats as st

    from campaign.evaluate.questions import cell_rows

    n = 50

    def one_seed_cell(k: int) -> dict:
        y = np.r_[np.ones(k), np.zeros(n - k)][None, :]
        other = np.r_[np.ones(n // 2), np.zeros(n - n // 2)][None, :]
        return cell_rows({"cell": y, "other": other}, 0.95)["cell"]

    row = one_seed_cell(n - 1)
    assert row["interval_over"].startswith(stats.EXACT_OVER) and "one seed" in row["interval_over"]
    assert row["ci_low"] == pytest.approx(st.beta.ppf(0.025, 49, 2))
    assert row["ci_high"] == pytest.approx(st.beta.ppf(0.975, 50, 1))
    rows = [one_seed_cell(k) for k in range(n + 1)]
    for truth in (0.92, 0.97, 0.99):
        pmf = st.binom.pmf(np.arange(n + 1), n, truth)
        covered = sum(
            p for p, r in zip(pmf, rows, strict=True) if r["ci_low"] <= truth <= r["ci_high"]
        )
        assert covered >= 0.95, (truth, covered)
    # every item right: the same bound as the edge's, and the label still says one seed
    assert rows[n]["interval_over"] == rows[n - 1]["interval_over"]
    assert rows[n]["ci_low"] == pytest.approx(0.025 ** (1 / n))
    # a one-seed cell beside a cell of two seeds: the seed level is measured (pooled over the
    # design), so the crossed interval stays
    design = {"cell": np.r_[np.ones(n - 1), 0.0][None, :]}
    design["other"] = np.r_[np.ones(n // 2), np.zeros(n - n // 2)][None, :].repeat(2, axis=0)
    design["other"][1, :3] = 1 - design["other"][1, :3]
    assert not cell_rows(design, 0.95)["cell"]["interval_over"].startswith(stats.EXACT_OVER)
