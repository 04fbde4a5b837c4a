"""One comparison row per question a campaign asks, from per-item scores: the cells, the
contrasts (cells against the control, main effects, interactions), the cells against the floor,
the compressed variants against their reference; then Holm per family, family-adjusted intervals
and the decisions. The stage and benchmarks/bench_stats.py both call these, so the simulated path
is the shipped one.

`design: {cell: Y (k_c, n_items)}`: 1.0 where the run of that cell and seed was right on the item
(rows in seed order). For a metric that is not a mean over items (macro_f1), `draws:
{cell: (k_c, n_resamples)}` each run's metric on the split's shared item resamples and `points:
{cell: (k_c,)}` its value on all items.
"""

from __future__ import annotations

import math

import numpy as np

from campaign.evaluate import comparison as cmp
from campaign.evaluate import decide
from campaign.evaluate.stats import (
    EDGE_OVER,
    EXACT_OVER,
    edge_interval,
    exact_interval,
    holm,
    percentile_interval,
)

CROSSED = "crossed seed x item (pooled over the design, Satterthwaite df)"
ONE_SEED = "one seed: seed-to-seed spread not measured"
ITEMS_ONLY = f"items ({ONE_SEED})"
# A quantized variant's fp32 copy of its own run: never a decision. With identical outputs its
# interval is [0, 0] (nothing differs; an interval of the items' bound would read +/-10 points).
CONSISTENCY = "consistency (the same weights)"
TWO_WAY = "crossed seed x item on the item resamples (pooled over the design, Satterthwaite df)"


def _base(e: cmp.Estimate, level: float, lo: float, hi: float, test: str, over: str) -> dict:
    low, high = e.interval(level, lo, hi)
    return {
        "n_seeds": e.n_seeds,
        "estimate": e.estimate,
        "ci_low": low,
        "ci_high": high,
        "p_value": e.p_value(),
        "test": test,
        "wilcoxon_p": math.nan,
        "seed_sd": e.seed_sd,
        "se": e.se,
        "df": e.df,
        "var_seeds": e.var_seeds,
        "var_items": e.var_items,
        "var_residual": e.var_residual,
        "n_items": e.n_items,
        "seed_df": e.seed_df,
        "interval_over": over,
        "_range": (lo, hi),
    }


def cell_rows(
    design: dict,
    level: float,
    draws: dict | None = None,
    points: dict | None = None,
    rng: np.random.Generator | None = None,
    n_items: int | None = None,
) -> dict:
    """{cell: {value, ci_low, ci_high, sel_low, sel_high, interval_over, n_seeds, se, df}} over
    the cell's seeds and the items (Wilson at the design's effective size; two-way bootstrap
    without a design). sel_low, sel_high: the interval at the level Bonferroni gives every cell
    of the design at once, 1 - (1 - level) / cells: it holds for a cell kept because of its
    value (records._kept_cell). A cell whose every score is 1 (or every one 0) has the items'
    exact bound instead (stats.edge_interval); a cell of one seed on 0/1 items, where no seed
    level is measured, Clopper-Pearson's interval (stats.exact_interval)."""
    out = {}
    if draws is None:
        moments = cmp.design_moments(design)
        every = decide.adjusted_level(level, len(design))
        for cell, y in design.items():
            e = cmp.contrast(design, {cell: 1.0}, moments=moments)
            interval, over = _cell_interval(e, y, level)
            selected, _ = _cell_interval(e, y, every)
            out[cell] = _cell_row(e, interval, selected, over, y.shape[0])
        return out
    every = decide.adjusted_level(level, len(draws))
    for cell in draws:
        e = cmp.draws_estimate(draws, points, {cell: 1.0}, n_items or 0)
        interval, selected = e.interval(level, 0.0, 1.0), e.interval(every, 0.0, 1.0)
        over = TWO_WAY if e.seed_df else ITEMS_ONLY
        out[cell] = _cell_row(e, interval, selected, over, len(points[cell]))
    return out


def _cell_row(e: cmp.Estimate, interval: tuple, selected: tuple, over: str, n_seeds: int) -> dict:
    """One cell's row of cell_rows: its level `e`, its interval (low, high) at the level and at
    the level every cell shares (`selected`), what the interval is over, and its seeds."""
    (low, high), (sel_low, sel_high) = interval, selected
    return {
        "value": e.estimate,
        "ci_low": low,
        "ci_high": high,
        "sel_low": sel_low,
        "sel_high": sel_high,
        "interval_over": over,
        "n_seeds": n_seeds,
        "se": e.se,
        "df": e.df,
    }


def _cell_interval(e: cmp.Estimate, y: np.ndarray, level: float) -> tuple:
    """((low, high), interval_over) of a cell's level at `level` (cell_rows)."""
    low, high = cmp.wilson_interval(e, level, y.size)
    over = CROSSED if e.seed_df else ITEMS_ONLY
    exact = exact_interval(y[0], level) if not e.seed_df and y.shape[0] == 1 else None
    if exact is not None:  # one seed, 0/1 items: k right of n, Wilson ends short at 49/50
        (low, high), over = exact, f"{EXACT_OVER}; {ONE_SEED}"
    edge = edge_interval(y, level) if exact is None else None  # the same at k = n
    if edge is not None:  # no spread: the error pooled from other cells says nothing
        (low, high), over = edge, EDGE_OVER
    return (low, high), over


def contrast_row(
    design: dict,
    weights: dict,
    level: float,
    fixed: frozenset = frozenset(),
    moments: tuple | None = None,
    draws: dict | None = None,
    points: dict | None = None,
    rng: np.random.Generator | None = None,
    n_items: int | None = None,
) -> dict:
    """The row of one contrast (weights: {cell: w}) over the design."""
    lo, hi = cmp.contrast_range(weights)
    if draws is None:
        e = cmp.contrast(design, weights, fixed, moments)
        return _base(
            e,
            level,
            lo,
            hi,
            CROSSED if e.seed_df else ITEMS_ONLY,
            CROSSED if e.seed_df else ITEMS_ONLY,
        )
    e = cmp.draws_estimate(draws, points, weights, n_items or 0, fixed)
    over = TWO_WAY if e.seed_df else ITEMS_ONLY
    return _base(e, level, lo, hi, over, over)


def quantized_row(
    reference: np.ndarray,
    variant: np.ndarray,
    level: float,
    max_quality_loss: float,
    consistency: bool = False,
) -> dict:
    """A compressed variant against its reference run on the same items (`(n_items,)` 1.0 where
    right): Tango's score interval, the one-sided non-inferiority p at max_quality_loss, and the
    smallest loss these items can show at all. Per-item scores in [0, 1] that are not all 0 or
    1 (a generation metric: token F1, a judge's score) take the paired t path
    (continuous_quantized_row)."""
    if not (_binary(reference) and _binary(variant)):
        return continuous_quantized_row(reference, variant, level, max_quality_loss, consistency)
    ref = np.asarray(reference, dtype=bool)
    var = np.asarray(variant, dtype=bool)
    n = ref.size
    losses, gains = int(np.sum(ref & ~var)), int(np.sum(~ref & var))
    low, high = cmp.paired_score_interval(losses, gains, n, level)
    if consistency and losses + gains == 0:
        low = high = 0.0
    alpha_one = (1 - level) / 2
    from campaign.evaluate.stats import mcnemar_p

    guard = {} if consistency else cmp.collapse_guard(reference, variant, level)
    return guard | {
        "n_seeds": 1,
        "estimate": (gains - losses) / n,
        "ci_low": low,
        "ci_high": high,
        "p_value": math.nan
        if consistency
        else cmp.noninferiority_p(losses, gains, n, max_quality_loss),
        "test": CONSISTENCY if consistency else "Tango score, one-sided non-inferiority",
        "wilcoxon_p": math.nan,
        "seed_sd": math.nan,
        "mcnemar_p": mcnemar_p(ref, var),
        "n_items": n,
        "items_changed": losses + gains,
        "smallest_provable_loss": cmp.smallest_provable_loss(n, alpha_one),
        "items_to_prove": cmp.items_to_prove(max_quality_loss, alpha_one)
        if max_quality_loss > 0
        else None,
        "interval_over": "items (the same trained weights: items are the only noise)",
        "_paired": (losses, gains),
        # the exact p of "loses at most max_quality_loss": the reject side (decide.noninferior)
        "_reject_p": math.nan
        if consistency
        else cmp.loss_exceeds_p(losses, gains, n, max_quality_loss),
        # the p these items give at best (no item changed): what the family check reads
        "_best_p": math.nan if consistency else cmp.noninferiority_p(0, 0, n, max_quality_loss),
    }


def _binary(scores) -> bool:
    a = np.asarray(scores, dtype=np.float64)
    return bool(np.all((a == 0.0) | (a == 1.0)))


PAIRED_T = "paired t on per-item scores, one-sided non-inferiority"
# Fewer moved items than this: the paired t also needs the count bound (continuous_quantized_row).
SPARSE_MOVED = 10


def continuous_quantized_row(
    reference: np.ndarray,
    variant: np.ndarray,
    level: float,
    max_quality_loss: float,
    consistency: bool = False,
) -> dict:
    """A compressed variant against its reference on per-item scores in [0, 1]: the paired
    differences' mean with its interval, the one-sided test of non-inferiority at
    max_quality_loss and, for the reject side, of "loses at most max_quality_loss", each the
    t on n - 1 df made no more liberal than Hall's skewness-corrected t (comparison.SkewedMean:
    the plain t adopted 2.6-2.8 % at the margin on 300 items against 2.5 %). The exact score
    test of quantized_row holds for 0/1 scores only."""
    from scipy import stats as st

    ref = np.asarray(reference, dtype=np.float64)
    d = np.asarray(variant, dtype=np.float64) - ref
    n = d.size
    skewed = cmp.SkewedMean.of(d)
    se = skewed.sd / math.sqrt(n) if n > 1 else math.inf
    low, high = skewed.interval(level)

    # Few moved items: the t statistic is degenerate (none moved: p 0 at any n) or far from its
    # distribution (one item 0.25 lower among 80 gave p 0.015). A mean loss of at least the
    # margin on scores in [0, 1] needs at least that share of items to move, so k moved items
    # among n have p at most binom.cdf(k, n, margin) whatever their sizes: 0.45 for none of 80
    # and a one-point margin, 0.81 for one. Below SPARSE_MOVED moved items that bound is also
    # required; the best case (no item moved) is the bound at k = 0. With no spread at all
    # (every item moved by the same amount: ten items each 0.5 points lower gave p 0) the t
    # measures nothing whatever the count, so the bound decides there too, and SkewedMean's
    # interval is that bound inverted (its ends agree with this p).
    moved = int(np.count_nonzero(d))
    if consistency and moved == 0:
        low = high = 0.0
    bound = float(st.binom.cdf(moved, n, max_quality_loss)) if max_quality_loss > 0 else 1.0
    p_ni = skewed.p_above(-max_quality_loss)
    p_from = "paired t"
    if (moved < SPARSE_MOVED or skewed.sd == 0) and bound > p_ni:
        p_ni, p_from = bound, "count bound"
    p_still = (1.0 - max_quality_loss) ** n if max_quality_loss > 0 else 1.0
    guard = {} if consistency else cmp.collapse_guard(ref, ref + d, level)
    return guard | {
        "n_seeds": 1,
        "estimate": skewed.mean,
        "ci_low": low,
        "ci_high": high,
        "p_value": math.nan if consistency else p_ni,
        "test": CONSISTENCY if consistency else PAIRED_T,
        "wilcoxon_p": math.nan,
        "seed_sd": math.nan,
        "mcnemar_p": math.nan,
        "n_items": n,
        "items_changed": moved,
        "smallest_provable_loss": 0.0,
        "items_to_prove": None,
        "interval_over": "items (the same trained weights: items are the only noise)",
        "p_from": p_from,  # which test gave p_value: "paired t" or "count bound"
        "se": se,
        "df": skewed.df,
        "_range": (-1.0, 1.0),
        # the family-adjusted interval is this one at the family's level (_adjusted)
        "_skewed": skewed,
        # what a mean over these items cannot see (words.py says it beside an adoption)
        "unseen_share": math.nan if consistency else cmp.unseen_share(n, (1 - level) / 2),
        "_reject_p": math.nan if consistency else skewed.p_below(-max_quality_loss),
        "_best_p": math.nan if consistency else p_still,  # the best case: no item moved
    }


FAMILIES = (("main", "interaction"), ("cell",), ("quantized",), ("floor",))


def settle_canaries(rows: list[dict]) -> None:
    """A canary's decision in words, after its test (in place): rejected, as it must be, or not
    rejected (the scores cannot tell a broken model from its run: a finding). Neither is an
    adoption or an open question, so the verdict and the budget never weigh it."""
    for r in rows:
        if r.get("_canary"):
            caught = r["decision"] == decide.REJECT
            r["decision"] = decide.CANARY_CAUGHT if caught else decide.CANARY_MISSED


def _what_would_decide(r: dict, level: float, power: float, bar: float) -> dict:
    """decide.what_would_decide for row `r` (its estimate, variance parts, seeds and items) at the
    family-adjusted `level`: the seeds or items that would take its interval past `bar`."""
    return decide.what_would_decide(
        r["estimate"],
        r["var_seeds"],
        r["var_items"],
        r["n_seeds"],
        r["n_items"] if math.isfinite(r["n_items"]) else 0,
        level,
        power,
        bar,
        r.get("seed_df", 0),
        r.get("var_residual", 0.0),
    )


def decide_family(rows: list[dict], level: float, power: float, s: dict) -> None:
    """Holm within each family of `rows` (one split), the family-adjusted interval, the decision,
    the minimum detectable effect and what would decide an open question; in place."""
    alpha = 1 - level
    useful, margin = s["min_useful_effect"], s["max_quality_loss"]
    # A canary (a variant built to be rejected) is its own family: it costs the real
    # variants no multiplicity, and settle_canaries words its decision afterwards.
    canaries = [r for r in rows if r.get("_canary")]
    families = [
        [r for r in rows if r["kind"] in kinds and not r.get("_canary")] for kinds in FAMILIES
    ]
    for family in families + [[r] for r in canaries]:
        adjusted = holm(np.array([r["p_value"] for r in family], dtype=np.float64))
        m = int(np.isfinite(adjusted).sum())
        adj_level = decide.adjusted_level(level, m)
        for r, p in zip(family, adjusted, strict=True):
            r["p_holm"] = float(p)
            r["adj_low"], r["adj_high"] = _adjusted(r, adj_level)
            kind = r["kind"]
            if kind == "quantized":
                if not math.isfinite(r["p_value"]):
                    r["decision"] = decide.CONSISTENCY
                    continue
                provable = _provable(family, r, alpha / 2, margin)
                # the per-item test is on the decision metric itself unless the metric is not
                # a mean over items (macro-F1: its own bootstrap interval `_draws` must agree)
                accuracy = "_draws" not in r
                # the reject side's exact p at the family's Bonferroni level (accuracy only)
                r["p_reject"] = min(1.0, r["_reject_p"] * m) if accuracy else math.nan
                r["decision"] = decide.noninferior(
                    r["p_holm"],
                    r["adj_high"],
                    margin,
                    alpha / 2,
                    provable,
                    # the accuracy test decides; another metric's own interval must agree
                    metric_low=None if accuracy else r["adj_low"],
                    # the reject side: the exact test at the family's Bonferroni level
                    reject_p=r["p_reject"],
                )
                continue
            if kind == "floor":
                r["decision"] = decide.against_floor(r["estimate"], r["p_holm"], alpha)
                # The bar is the floor itself (zero points): the seeds per cell or the items
                # that would show a cell above or below it, were the estimate the truth.
                r.update(_what_would_decide(r, adj_level, power, 0.0))
                r.update(decide.FLOOR_UNSIZED)
                continue
            if kind == "interaction":
                r["decision"] = decide.interaction(r["p_holm"], alpha, r["n_seeds"])
            else:
                r["decision"] = decide.effect(r["adj_low"], r["adj_high"], r["n_seeds"], useful)
            r["mde"] = decide.minimum_detectable_effect(r["se"], r["df"], adj_level, power, useful)
            r.update(_what_would_decide(r, adj_level, power, useful))
    for r in rows:
        r.setdefault("p_holm", math.nan)


def _holm_with(family: list[dict], r: dict, p: float) -> float:
    """Row r's Holm-adjusted p in its family were its own p `p` (the others as they are)."""
    values = np.array([p if x is r else x["p_value"] for x in family], dtype=np.float64)
    return float(holm(values)[[x is r for x in family].index(True)])


def _provable(family: list[dict], r: dict, alpha_one: float, margin: float) -> bool:
    """Whether any outcome on r's items could adopt it at the family-adjusted level: its best
    case (no item changed) passes Holm given the family's other p-values. Sets r's
    smallest_provable_loss and items_to_prove at the raw p threshold that Holm leaves this row
    (between alpha_one / m and alpha_one)."""
    if r["test"] == PAIRED_T:
        # Per-item scores: with SPARSE_MOVED items or more moved, the paired t's p can be as
        # small as any level (its best p is 0), so some outcome on these items adopts;
        # `_best_p` (no item moved: the count bound) is only the best of the sparse outcomes.
        return r["n_items"] >= SPARSE_MOVED or _holm_with(family, r, r["_best_p"]) < alpha_one
    lo, hi = 0.0, alpha_one  # the largest raw p whose Holm p stays under alpha_one
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _holm_with(family, r, mid) < alpha_one else (lo, mid)
    r["smallest_provable_loss"] = cmp.smallest_provable_loss(r["n_items"], lo)
    r["items_to_prove"] = cmp.items_to_prove(margin, lo) if margin > 0 else None
    return _holm_with(family, r, r["_best_p"]) < alpha_one


def _adjusted(r: dict, adj_level: float) -> tuple[float, float]:
    lo, hi = r.get("_range", (-math.inf, math.inf))
    if r.get("items_changed") == 0 and r["test"] == CONSISTENCY:
        return 0.0, 0.0  # the same weights, identical outputs: nothing to bound
    if "_draws" in r:
        iv = percentile_interval(r["estimate"], r["_draws"], adj_level)
        return max(lo, iv.low), min(hi, iv.high)
    if "_paired" in r:  # a compressed variant on accuracy: Tango's interval at the level
        return cmp.paired_score_interval(*r["_paired"], r["n_items"], adj_level)
    if "_skewed" in r:  # per-item scores: the skewness-guarded t interval at the level
        return r["_skewed"].interval(adj_level, lo, hi)
    if "se" not in r:
        return r["ci_low"], r["ci_high"]
    e = cmp.Estimate(r["estimate"], r["se"], r["df"], 0, 0, 0, 0, 0, 0)
    return e.interval(adj_level, lo, hi)


def public(row: dict) -> dict:
    """The row without its private working keys (draws, ranges)."""
    return {k: v for k, v in row.items() if not k.startswith("_")}
