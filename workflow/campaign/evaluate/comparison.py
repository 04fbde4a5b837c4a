"""The comparison layer: pure statistics over per-item scores of runs, with no policy.

One variance model for cells and effects: seeds and items are crossed (every seed of every cell
is scored on the same items). For a cell c with k_c seeds, `Y_c: (k_c, n_items)` holds 1 where
the run was right on the item. A contrast sum_c w_c * mean(Y_c) (a cell, a cell against the
control, a main effect, an interaction, a cell against the floor) has variance

    sum_c w_c^2 / k_c * (s2_seed + s2_res / n)  +  s2_item(contrast) / n

estimated by method of moments (two-way ANOVA mean squares) and pooled over the whole design:
  A = sum_c w_c^2 / k_c * MS_within   MS_within: spread of run means within cells, pooled over
                                      all cells (df = runs - cells): the seed-level error
  B = var_i(d_i) / n                  d_i = sum_c w_c * mean over seeds of Y_c[:, i]: the items'
                                      share, shared by every seed (df = n - 1)
  C = sum_c w_c^2 / k_c * MS_res / n  MS_res: the seed x item residual, pooled (it is in both A
                                      and B once: subtracted once)
  Var = B + max(A - C, 0), Satterthwaite df = Var^2 / (A^2/df_A + B^2/df_B + C^2/df_C)
  (at most n - 1; A's df count even where the seed part is truncated at 0). Against a floor
  (a cell without seed spread) the df are counted with A at its upper FLOOR_DF_QUANTILE bound,
  and at a cell's own level at its LEVEL_DF_QUANTILE (median) value: plain Satterthwaite
  claims 7-8 % at 5 % against a floor at 2 seeds (the seed df alone about 1 %), and covers a
  cell's level on [0, 1] scores 93.3 % at 95.
Seeds are replicates, not blocks (a seed number is not assumed to mean the same thing in two
cells): pooling then gives a 2 x 2 design with 2 seeds 8 - 4 = 4 error df. With one seed per
cell everywhere the seed part is not measured (nan) and the variance is the items' alone.

Cell intervals are Wilson score intervals at the design's effective sample size
n_eff = p (1 - p) / Var with a t quantile: inside [0, 1] by construction and still informative at
0 or 100 % (a Wald interval with a clip would collapse there). Effect intervals are t intervals
clipped to the contrast's range (they reach it only when almost every item flips).

Non-inferiority of a compressed variant against its reference (same weights, so items are the
only noise): Tango's score interval for a paired difference of proportions, valid with zero
discordant items, and its one-sided score test.

Macro-F1 is not a mean over items: for it the same decomposition is read off the runs' values on
the split's shared item resamples (draws_estimate): the seed level from the run values' spread
within cells, pooled over the design (MS_within, df = runs - cells), the items' share from the
resamples' variance of the contrast, the run x item residual from the resamples' variance of each
run around its cell's seed mean. (Resampling 2 seeds with replacement instead would treat the
seeds' own values as the seed population: intervals far too short at few seeds.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.special import stdtr

# The chi-square quantile of the seed level's bound that a contrast counts its Satterthwaite df
# with (comparison.contrast), where plain Satterthwaite is liberal at few seeds: a cell against
# a floor, and a cell's own level (its items' spread is not differenced away, so the seed and
# item parts are of a size and a seed spread measured low by chance raises the df most). A
# difference of cells (an effect) keeps plain Satterthwaite: there the seed level dominates and
# the df stay near the seed df. A cell's level takes the median (0.5: the seed level's
# median-unbiased value; at 2 df a measured mean square lies below its mean in 63 % of
# campaigns). Chosen by simulation on bench_stats's generators: a floor at 0.2 claims
# 4.4 / 5.1 / 4.4 % at 2 / 3 / 5 seeds (plain Satterthwaite 7.7 / 6.4 / 4.9; 4,000 campaigns
# each); a cell at 0.5 covers [0, 1] scores at 2 seeds x 300 items 94.0 % (plain 93.3) and
# 0/1 scores 96.6 % (plain 95.9; at 0.2 98.0, too wide; 5,000 campaigns each).
FLOOR_DF_QUANTILE = 0.2
LEVEL_DF_QUANTILE = 0.5


@dataclass(frozen=True)
class Estimate:
    """A contrast's value with its standard error and where that error comes from."""

    estimate: float
    se: float
    df: float  # Satterthwaite; inf for items alone on many items
    var_seeds: float  # the part of se^2 that more seeds shrink (nan: one seed, not measured)
    var_items: float  # the part of se^2 that more items shrink
    n_seeds: int  # fewest seeds among the cells the contrast weighs
    n_items: int
    seed_df: int  # error df of the seed level, pooled over the design (0: not measured)
    seed_sd: float  # sqrt(MS_within): the spread of one run's mean around its cell's
    # C, the seed x item residual sum_c w_c^2 / k_c * MS_res / n held in var_items: more seeds
    # shrink it as 1 / k as well as more items as 1 / n (0: one seed, not measured)
    var_residual: float = 0.0

    def quantile(self, level: float) -> float:
        """The two-sided critical value at `level` (e.g. 0.95) on this estimate's df."""
        tail = 1 - (1 - level) / 2
        return float(
            stats.norm.ppf(tail) if not math.isfinite(self.df) else stats.t.ppf(tail, self.df)
        )

    def interval(self, level: float, lo: float = -math.inf, hi: float = math.inf) -> tuple:
        half = self.quantile(level) * self.se
        return max(lo, self.estimate - half), min(hi, self.estimate + half)

    def p_value(self) -> float:
        """Two-sided p that the contrast is 0."""
        if self.se <= 0:
            return 1.0 if self.estimate == 0 else 0.0
        t = abs(self.estimate) / self.se
        sf = stats.norm.sf(t) if not math.isfinite(self.df) else stats.t.sf(t, self.df)
        return float(min(1.0, 2 * sf))


def _cell_moments(y: np.ndarray) -> tuple[float, int, float, int]:
    """(SS within of run means, its df, SS of the seed x item residual, its df) of
    `y: (k, n_items)`."""
    k, n = y.shape
    run_means = y.mean(axis=1)
    ss_within = float(((run_means - run_means.mean()) ** 2).sum())
    if k < 2:
        return ss_within, 0, 0.0, 0
    resid = y - run_means[:, None] - y.mean(axis=0)[None, :] + y.mean()
    return ss_within, k - 1, float((resid**2).sum()), (k - 1) * (n - 1)


def design_moments(
    design: Mapping, fixed: frozenset = frozenset()
) -> tuple[float, int, float, int]:
    """(MS_within, its df, MS_res, its df) pooled over the cells of `design: {cell: Y (k, n)}`
    that vary by seed (cells in `fixed`, e.g. a floor, have no seed spread)."""
    ss_w = df_w = ss_r = df_r = 0
    for cell, y in design.items():
        if cell in fixed:
            continue
        a, b, c, d = _cell_moments(np.asarray(y, dtype=np.float64))
        ss_w, df_w, ss_r, df_r = ss_w + a, df_w + b, ss_r + c, df_r + d
    ms_w = ss_w / df_w if df_w else math.nan
    ms_r = ss_r / df_r if df_r else 0.0
    return ms_w, df_w, ms_r, df_r


def contrast(
    design: Mapping,
    weights: Mapping,
    fixed: frozenset = frozenset(),
    moments: tuple | None = None,
) -> Estimate:
    """sum_c w_c * mean(Y_c) with its crossed seed x item variance, the seed level pooled over
    the whole `design: {cell: Y_c (k_c, n_items)}` (every cell, weighed or not). `fixed`: cells
    without seed spread (a floor). `moments`: design_moments(design, fixed), when computed once
    for many contrasts."""
    ys = {c: np.asarray(design[c], dtype=np.float64) for c in weights}
    n = next(iter(ys.values())).shape[1]
    ms_w, df_w, ms_r, df_r = moments if moments is not None else design_moments(design, fixed)
    estimate = float(sum(w * ys[c].mean() for c, w in weights.items()))
    d = sum(w * ys[c].mean(axis=0) for c, w in weights.items())
    b = float(np.var(d, ddof=1)) / n if n > 1 else 0.0
    inv_k = sum(w**2 / ys[c].shape[0] for c, w in weights.items() if c not in fixed)
    n_seeds = min((ys[c].shape[0] for c in weights if c not in fixed), default=1)
    if df_w == 0 or inv_k == 0:
        var_seeds = math.nan if inv_k else 0.0
        return Estimate(
            estimate,
            math.sqrt(b),
            n - 1.0,
            var_seeds,
            b,
            n_seeds,
            n,
            df_w,
            math.sqrt(ms_w) if df_w else math.nan,
        )
    a, c = inv_k * ms_w, inv_k * ms_r / n
    # A seed part estimated at or below 0 is truncated at 0, but its df still count: a small
    # seed spread measured on few seeds is weak evidence that there is none (jumping to the
    # items' n - 1 df there under-covers at 2 seeds).
    var_seeds = max(a - c, 0.0)
    var = b + var_seeds

    # Against a floor (no seed spread of its own) or at a cell's own level, Satterthwaite's df
    # is liberal at 2-3 seeds (a floor: 7.7 % false claims at 5 %; a cell's [0, 1] level:
    # 93.3 % coverage at 95): a seed spread measured low by chance also reads as "items
    # dominate", raising the df exactly when the statistic is large. Its df are counted here
    # with the seed level at a chi-square bound (the se itself is unchanged); capping
    # at the seed df instead gives about 1 % against a floor, far too conservative.
    def satterthwaite(a: float) -> float:
        var_df = b + max(a - c, 0.0)  # the variance the df are counted for (= var but above)
        terms = a**2 / df_w + b**2 / max(n - 1, 1) + (c**2 / df_r if df_r else 0.0)
        return min(var_df**2 / terms, n - 1.0) if terms > 0 else n - 1.0

    df = satterthwaite(a)
    quantile = _df_quantile(weights, fixed)
    if quantile is not None:  # more conservative only: never more df than plain Satterthwaite
        df = min(df, satterthwaite(a * df_w / float(stats.chi2.ppf(quantile, df_w))))
    return Estimate(
        estimate, math.sqrt(var), df, var_seeds, b, n_seeds, n, df_w, math.sqrt(ms_w), min(c, b)
    )


def _df_quantile(weights: Mapping, fixed: frozenset) -> float | None:
    """The upper-bound quantile a contrast's df are counted at: a cell against a floor
    (FLOOR_DF_QUANTILE), a level (weights of the seeded cells not summing to 0: a cell's own
    value, LEVEL_DF_QUANTILE), or None for a difference of cells (plain Satterthwaite)."""
    if fixed & set(weights):
        return FLOOR_DF_QUANTILE
    if abs(sum(w for c, w in weights.items() if c not in fixed)) > 1e-12:
        return LEVEL_DF_QUANTILE
    return None


def contrast_range(weights: Mapping) -> tuple[float, float]:
    """The values sum_c w_c * p_c can take with every p_c in [0, 1]."""
    w = list(weights.values())
    return float(sum(min(0.0, x) for x in w)), float(sum(max(0.0, x) for x in w))


def wilson_interval(e: Estimate, level: float, n_total: int) -> tuple[float, float]:
    """A proportion's interval inside [0, 1]: Wilson's score interval at the effective sample
    size p (1 - p) / se^2 (Kish's design effect), t quantile on the estimate's df. At p = 0 or 1
    (no spread to measure) the effective size is the `n_total` scores."""
    p = min(1.0, max(0.0, e.estimate))
    n_eff = p * (1 - p) / e.se**2 if e.se > 0 and 0 < p < 1 else float(n_total)
    n_eff = max(1.0, n_eff)
    z = e.quantile(level)
    z2n = z * z / n_eff
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / n_eff + z2n / (4 * n_eff))
    return max(0.0, centre - half), min(1.0, centre + half)


def _tango_z(losses: int, gains: int, n: int, delta: float) -> float:
    """Tango's score statistic for H0: (gains - losses) / n = delta on `n` paired items."""
    a = 2.0 * n
    b = -losses - gains + (2 * n - gains + losses) * delta
    c = -losses * delta * (1 - delta)
    q = (-b + math.sqrt(max(b * b - 4 * a * c, 0.0))) / (2 * a)  # restricted MLE of P(loss)
    var = n * (2 * q + delta * (1 - delta))
    diff = gains - losses - n * delta
    if var <= 0:
        return 0.0 if diff == 0 else math.copysign(math.inf, diff)
    return diff / math.sqrt(var)


def paired_score_interval(losses: int, gains: int, n: int, level: float) -> tuple[float, float]:
    """Tango's (1998) score interval for the paired difference of proportions (gains - losses)
    / n on `n` items (losses: right before, wrong after; gains: the other way). Valid with zero
    discordant items: then it is +/- z^2 / (n + z^2)."""
    z = float(stats.norm.ppf(1 - (1 - level) / 2))
    point = (gains - losses) / n

    def root(lo: float, hi: float, inside_at_hi: bool) -> float:
        for _ in range(80):
            mid = (lo + hi) / 2
            inside = abs(_tango_z(losses, gains, n, mid)) < z
            if inside == inside_at_hi:
                hi = mid
            else:
                lo = mid
        return (lo + hi) / 2

    low = -1.0 if abs(_tango_z(losses, gains, n, -1 + 1e-12)) < z else root(-1 + 1e-12, point, True)
    high = 1.0 if abs(_tango_z(losses, gains, n, 1 - 1e-12)) < z else root(1 - 1e-12, point, True)
    return low, high


def noninferiority_p(losses: int, gains: int, n: int, margin: float) -> float:
    """One-sided p of H0: the difference (gains - losses) / n <= -margin (Tango's score test):
    small when the variant is shown to lose less than `margin`."""
    return float(stats.norm.sf(_tango_z(losses, gains, n, -margin)))


def unseen_share(n: int, alpha_one: float) -> float:
    """The largest share of the item population that can hold every change while none of `n`
    sampled items shows one with probability at least `alpha_one`: 1 - alpha_one^(1/n), about
    3.7 / n at 2.5 %. A loss confined to fewer items than that is invisible to any test on the
    sample's mean (300 items, 0.55 % of items collapsing to 0: a loss of 1.05 x the margin
    adopted in about a fifth of campaigns, bench_stats)."""
    return 1.0 - alpha_one ** (1.0 / n) if n > 0 else 1.0


# The tail guard beside a variant's mean (collapse_guard): an item "collapses" when the variant
# keeps less than COLLAPSE_KEEP of the run's own score on it (1 -> 0 on 0/1 items); the guard
# says how many items would bound the share of collapsing items at COLLAPSE_BOUND.
COLLAPSE_KEEP, COLLAPSE_BOUND = 0.5, 0.005


def collapse_guard(reference: np.ndarray, variant: np.ndarray, level: float) -> dict:
    """The items on which a variant lost more than half the run's own score (`reference`,
    `variant`: (n_items,) scores in [0, 1]) and the share of the item population that
    collapses so, bounded exactly: {collapsed, collapse_low, collapse_high, collapse_items}.
    The interval is Clopper-Pearson's for `collapsed` of n at `level` (it covers the true share
    at least that often, whatever it is); collapse_items: the items on which none collapsing
    would put the upper end at COLLAPSE_BOUND. A mean over items weighs a collapse on 0.5 %
    of them like a 0.5 % loss everywhere, and a sample may hold none of them: this is what
    the mean cannot say."""
    ref = np.asarray(reference, dtype=np.float64)
    var = np.asarray(variant, dtype=np.float64)
    n = ref.size
    collapsed = int(np.count_nonzero((ref > 0) & (var < COLLAPSE_KEEP * ref)))
    tail = (1 - level) / 2
    low = float(stats.beta.ppf(tail, collapsed, n - collapsed + 1)) if collapsed else 0.0
    high = float(stats.beta.isf(tail, collapsed + 1, n - collapsed)) if collapsed < n else 1.0
    items = math.ceil(math.log(tail) / math.log1p(-COLLAPSE_BOUND))
    return {
        "collapsed": collapsed,
        "collapse_low": low,
        "collapse_high": high,
        "collapse_items": items,
    }


def _hall_s(target: float, gamma: float, n: int) -> float:
    """The standardized distance S = (mean - mu) / sd at which Hall's (1992) skewness-corrected
    statistic sqrt(n) (S + gamma S^2 / 3 + gamma^2 S^3 / 27 + gamma / (6 n)) equals `target`:
    its inverse, in closed form (the statistic is ((1 + gamma S / 3)^3 - 1) / gamma + gamma /
    (6 n) times sqrt(n), increasing in S).

    S = 3 / gamma (c - 1) with c = cbrt(1 + gamma step) is written as 3 step / (c^2 + c + 1),
    the same number without the cancellation in c - 1: at gamma 2e-12 the first form's round
    trip missed the target by 1e-3, and this one needs no gamma = 0 case (c = 1 gives step)."""
    step = target / math.sqrt(n) - gamma / (6 * n)
    c = float(np.cbrt(1.0 + gamma * step))
    return 3.0 * step / (c * c + c + 1.0)


def _hall_t(s_dist: float, gamma: float, n: int) -> float:
    """Hall's skewness-corrected statistic at the standardized distance `s_dist` (_hall_s)."""
    g = gamma
    return math.sqrt(n) * (s_dist + g * s_dist**2 / 3 + g**2 * s_dist**3 / 27 + g / (6 * n))


# Fewer moved items than this: no test on the moved items. Below ten the count bound of
# questions.continuous_quantized_row (questions.SPARSE_MOVED) guards the t; the moved items'
# own test, whose statistic levels off at sqrt(m n / (n - m)) as its bound moves out, could
# never pass there (5 of 300 items moved by a few hundredths: inconclusive at [-1, 1]).
MOVED_MIN = 10


@dataclass(frozen=True)
class SkewedMean:
    """The mean of per-item paired differences `d: (n_items,)` with one-sided tests and
    intervals for skewed, bounded scores at a few hundred items, provided the loss is spread
    over enough of the items that a sample of n holds some of it. A loss confined to fewer
    than about 3.7 / n of the items (unseen_share) may be on none of the n sampled and no test
    on the mean sees it: 300 items, 0.55 % of them collapsing to 0 and the rest shrinking
    slightly (a true loss of 1.05 x the margin): adopted in about a fifth of campaigns
    (bench_stats' known-limit row); at 1,000 items under 1 %.

    The plain t is liberal on the side the skew points away from: quality losses of a
    compressed variant are mostly small with a long tail of larger ones (left skew), so a
    sample that happened to miss the tail has both a high mean and a small sd; the t adopted
    non-inferiority at a true loss equal to the margin in 2.6-2.8 % of campaigns at 300 items
    against 2.5 % (bench_stats). Hall's (1992) transformation of the studentized mean removes
    the skewness term of its distribution; each side takes the larger of the t's p and Hall's
    (the t where the skew makes it conservative: Hall alone overshoots there, rejecting
    2.64 % at the margin over 100,000 simulated campaigns), so neither side is ever more
    liberal than the t: at 300 items adoption 2.37 %, the reject side 2.37 % as before. The
    interval is the two one-sided tests inverted: an end is the farther of the t's and
    Hall's, so the interval and the decision agree."""

    mean: float
    sd: float  # ddof=1
    gamma: float  # the sample skewness (third central moment over sd^3, ddof=0); 0: no spread
    n: int
    # the differences that are not 0, as their own sample (None: every item moved, or fewer
    # than MOVED_MIN moved): the test on the moved items (_moved_p)
    moved: SkewedMean | None = None

    @classmethod
    def of(cls, d: np.ndarray) -> SkewedMean:
        d = np.asarray(d, dtype=np.float64)
        n = d.size
        mean = float(d.mean())
        sd = float(d.std(ddof=1)) if n > 1 else math.inf
        pop_sd = float(d.std(ddof=0))
        if n > 1 and pop_sd <= 1e-12:  # rounding in variant - reference is not spread
            sd = pop_sd = 0.0
        gamma = float(((d - mean) ** 3).mean() / pop_sd**3) if pop_sd > 0 else 0.0
        moved = d[d != 0]
        inner = None
        if MOVED_MIN <= moved.size < n and float(moved.std(ddof=0)) > 1e-12:
            inner = cls.of(moved)
        return cls(mean, sd, gamma, n, inner)

    @property
    def df(self) -> float:
        return max(self.n - 1.0, 1.0)

    def p_above(self, mu0: float) -> float:
        """One-sided p of H0: the true mean <= mu0 (small when it is shown above mu0): the
        larger of the test on every item and the test on the moved items (_moved_p)."""
        return max(self._p(self.mean - mu0, self.gamma), self._moved_p(mu0, True))

    def p_below(self, mu0: float) -> float:
        """One-sided p of H0: the true mean >= mu0 (small when it is shown below mu0)."""
        return max(self._p(mu0 - self.mean, -self.gamma), self._moved_p(mu0, False))

    def _moved_p(self, mu0: float, above: bool) -> float:
        """The one-sided p of the same hypothesis read on the moved items alone (0 when every
        item moved: the test on every item is then this test). When most differences are
        exactly 0 (unchanged generations, items every model fails) the t on all n items is
        a t on the few moved ones in disguise, with n - 1 df it does not have and a skewness
        read through the zeros: at 88 % unmoved items it adopted 3.1-3.7 % at a loss equal
        to the margin against 2.5 %. The moved items, m of n, are a sample of their own:
        the overall mean is mu0 exactly when theirs is mu0 n / m, tested by Hall's t on m - 1
        df with their own skewness, its variance widened by the delta method's term for the
        share m / n that is itself estimated (mu0^2 (n - m) n / m^3)."""
        inner = self.moved
        if inner is None:
            return 0.0
        m, n = inner.n, self.n
        shifted = mu0 * n / m
        sd = math.sqrt(inner.sd**2 + mu0 * mu0 * (n - m) * n / (m * m))
        test = SkewedMean(inner.mean, sd, inner.gamma, m)
        return test.p_above(shifted) if above else test.p_below(shifted)

    def _no_spread_share(self, alpha_one: float) -> float:
        """The interval's half-width when every difference is the same: the t has nothing to
        measure (it gave p 0 and an interval of zero width at any n). No item moved: a true
        mean at distance L from 0 on differences in [-1, 1] needs a share of at least L of the
        items to move, and none of n moved has probability at most (1 - L)^n, so the share
        where that is alpha_one is the bound (0.036 on 100 items: a one-point loss is not
        ruled out). Every item moved by the same amount: the count says nothing (the whole
        range), as the p (_p) says."""
        if self.mean != 0:
            return math.inf
        return unseen_share(self.n, alpha_one)

    def _p(self, distance: float, gamma: float) -> float:
        if self.sd == 0:  # no spread: the count bound (_no_spread_share), never the distance
            if self.mean != 0 or distance <= 0:
                return 1.0
            return (1.0 - min(distance, 1.0)) ** self.n
        if not math.isfinite(self.sd):
            return 1.0
        s_dist = distance / self.sd
        # stdtr(df, -x) is t.sf(x, df) at a hundredth of its cost (the interval inverts it)
        t_p = float(stdtr(self.df, -math.sqrt(self.n) * s_dist))
        hall_p = float(stdtr(self.df, -_hall_t(s_dist, gamma, self.n)))
        return max(t_p, hall_p)

    def interval(self, level: float, lo: float = -1.0, hi: float = 1.0) -> tuple[float, float]:
        """The two-sided interval at `level`: each end the bound of its one-sided test at
        (1 - level) / 2 (p_above / p_below inverted), clipped to [lo, hi]."""
        if not (self.sd > 0 and math.isfinite(self.sd)):
            half = self._no_spread_share((1 - level) / 2) if self.sd == 0 else math.inf
            return max(lo, self.mean - half), min(hi, self.mean + half)
        crit = float(stats.t.isf((1 - level) / 2, self.df))
        t_half = crit / math.sqrt(self.n)
        low_hall = _hall_s(crit, self.gamma, self.n)
        high_hall = _hall_s(crit, -self.gamma, self.n)
        low = self.mean - self.sd * max(t_half, low_hall)
        high = self.mean + self.sd * max(t_half, high_hall)
        if self.moved is not None:  # the moved items' tests inverted: the farther end
            alpha_one = (1 - level) / 2
            low = min(low, _invert(lambda mu: self._moved_p(mu, True), alpha_one, self.mean, -1))
            high = max(high, _invert(lambda mu: self._moved_p(mu, False), alpha_one, self.mean, 1))
        return max(lo, low), min(hi, high)


def _invert(p_of, alpha_one: float, inside: float, outside: float) -> float:
    """The point between `inside` (where p_of is at least alpha_one) and `outside` where the
    one-sided p_of crosses alpha_one (bisection; p_of monotone on the way)."""
    if p_of(outside) >= alpha_one:
        return outside
    for _ in range(40):
        mid = (inside + outside) / 2
        inside, outside = (mid, outside) if p_of(mid) >= alpha_one else (inside, mid)
    return (inside + outside) / 2


# Berger and Boos's gamma: the nuisance (the rate of items gained) ranges over its one-sided
# 1 - gamma upper bound, and gamma is added to the p (exact: the test's level holds for every rate).
REJECT_GAMMA = 0.001


def _loss_tail(n: int, p_loss: float, p_gain: float, excess: int) -> float:
    """P(losses - gains >= excess) for trinomial counts on `n` paired items."""
    from scipy.stats import binom

    if p_gain > 0:
        g = np.arange(0, int(binom.isf(1e-13, n, p_gain)) + 2)
        g = g[g <= n]
        weights = binom.pmf(g, n, p_gain)
    else:
        g, weights = np.zeros(1, dtype=np.int64), np.ones(1)
    cond = min(1.0, p_loss / (1.0 - p_gain)) if p_gain < 1 else 0.0
    return float(np.sum(weights * binom.sf(excess + g - 1, n - g, cond)))


def loss_exceeds_p(losses: int, gains: int, n: int, margin: float) -> float:
    """Exact one-sided p of H0: the variant loses at most `margin` ((losses - gains) / n true
    rate <= margin): small when it is shown to lose more. Tango's score interval, read for
    this side, is anti-conservative when discordant items are rare (5.3 % at a 2.5 % level
    with 0.45 % of 1,000 items lost, 0.05 % gained); here the statistic losses - gains is
    referred to its exact trinomial distribution at the margin, maximized over the rate of
    gains up to its Clopper-Pearson 1 - REJECT_GAMMA upper bound, plus REJECT_GAMMA
    (Berger and Boos 1994): valid for every discordance rate."""
    from scipy.stats import beta

    excess = losses - gains
    if n < 1 or excess <= n * margin:
        return 1.0
    top = float(beta.ppf(1 - REJECT_GAMMA, gains + 1, n - gains)) if gains < n else 1.0
    top = min(top, (1 - margin) / 2)
    tails = [_loss_tail(n, margin + q, q, excess) for q in np.linspace(0.0, top, 17)]
    return min(1.0, max(tails) + REJECT_GAMMA)


def smallest_provable_loss(n: int, alpha_one_sided: float) -> float:
    """The smallest margin that `n` items can show at all: the score bound with zero discordant
    items, z^2 / (n + z^2)."""
    z2 = float(stats.norm.isf(alpha_one_sided)) ** 2
    return z2 / (n + z2)


def items_to_prove(margin: float, alpha_one_sided: float) -> int:
    """The fewest items whose best case (no item changes) shows a loss under `margin`."""
    z2 = float(stats.norm.isf(alpha_one_sided)) ** 2
    return math.floor(z2 * (1 - margin) / margin) + 1


def draws_estimate(
    draws: Mapping,
    points: Mapping,
    weights: Mapping,
    n_items: int,
    fixed: frozenset = frozenset(),
) -> Estimate:
    """sum_c w_c * mean(points_c) with the crossed seed x item variance of a metric that is not a
    mean over items. `draws: {cell: (k_c, n_resamples)}` each run's metric on the shared item
    resamples, `points: {cell: (k_c,)}` on all items; the seed level pooled over every cell of
    `draws` not in `fixed` (as `contrast`): A = sum w^2/k MS_within, B = var over resamples of
    the contrast, C = sum w^2/k of the pooled resample variance of a run around its cell's mean
    (the residual, in A and B once); Var = B + max(A - C, 0), Satterthwaite df."""
    ss_w = ss_r = 0.0
    df_w = 0
    for c, d in draws.items():
        if c in fixed:
            continue
        d, p = np.asarray(d, dtype=np.float64), np.asarray(points[c], dtype=np.float64)
        if len(p) < 2:
            continue
        ss_w += float(((p - p.mean()) ** 2).sum())
        ss_r += float((d - d.mean(axis=0)).var(axis=1, ddof=1).sum())
        df_w += len(p) - 1
    estimate = float(sum(w * np.mean(points[c]) for c, w in weights.items()))
    values = sum(
        w * np.asarray(draws[c], dtype=np.float64).mean(axis=0) for c, w in weights.items()
    )
    b = float(np.var(values, ddof=1))
    inv_k = sum(w**2 / len(points[c]) for c, w in weights.items() if c not in fixed)
    n_seeds = min((len(points[c]) for c in weights if c not in fixed), default=1)
    items_df = max(n_items - 1.0, 1.0) if n_items else math.inf  # 0: not known
    if df_w == 0 or inv_k == 0:
        var_seeds = math.nan if inv_k else 0.0
        seed_sd = math.nan
        return Estimate(
            estimate, math.sqrt(b), items_df, var_seeds, b, n_seeds, n_items, 0, seed_sd
        )
    ms_w = ss_w / df_w
    a, c = inv_k * ms_w, inv_k * ss_r / df_w
    var_seeds = max(a - c, 0.0)
    var = b + var_seeds
    terms = a**2 / df_w + b**2 / items_df
    df = min(var**2 / terms, items_df) if terms > 0 else items_df
    return Estimate(
        estimate,
        math.sqrt(var),
        df,
        var_seeds,
        b,
        n_seeds,
        n_items,
        df_w,
        math.sqrt(ms_w),
        min(c, b),
    )


def two_way_draws(draws: Mapping, weights: Mapping, rng: np.random.Generator) -> np.ndarray:
    """(n_resamples,) draws of sum_c w_c * (mean over seeds of cell c) for a metric that is not
    a mean over items (macro-F1). `draws: {cell: (k_c, n_resamples)}` each run's metric on the
    shared item resamples; seeds are resampled within each cell, independently of the items."""
    out = 0.0
    for c, w in weights.items():
        d = np.asarray(draws[c], dtype=np.float64)
        k, b = d.shape
        pick = rng.integers(0, k, size=(b, k))
        out = out + w * d[pick, np.arange(b)[:, None]].mean(axis=1)
    return np.asarray(out)
