"""Classification metrics of one variant on one split, each with a bootstrap interval, computed
for every resample at once (the resamples are shared by all variants of the split, so intervals
of differences are paired); accuracy, a share of 0/1 items, has Clopper-Pearson's exact interval
instead (stats.score_interval: the percentile bootstrap is too short near 100 %).

Inputs: `truth: (n_items,)` class indices (-1 for a label the model never saw in training: it
counts as wrong), `probs: (n_items, n_classes)` rows summing to 1. Metrics: accuracy, macro_f1
(over the classes that occur as truth or prediction), log_loss (natural log), ece (expected
calibration error, equal-width confidence bins, with a bias-corrected basic bootstrap interval),
ece_debiased (Kumar et al. 2019's debiased squared-error estimate, as its root), and per class
precision, recall and f1; for a causal LM also perplexity over the true responses' tokens
(`nll: (n_items,)` summed per item, `tokens: (n_items,)`), a ratio of sums resampled by item.
"""

from __future__ import annotations

import math

import numpy as np

from campaign.evaluate.stats import Interval, mean_interval, percentile_interval, score_interval

ECE_BINS = 15
_EPS = 1e-15


def _confusion(truth: np.ndarray, pred: np.ndarray, n_classes: int, rows: np.ndarray) -> np.ndarray:
    """(n_rows, n_classes, n_classes) counts of (true, predicted) for each row of item indices
    `rows: (n_rows, n_items)`; items whose truth is -1 are left out of the table."""
    known = truth >= 0
    code = np.where(known, truth * n_classes + pred, n_classes * n_classes)  # a spare cell
    cells = n_classes * n_classes + 1
    flat = (np.arange(rows.shape[0])[:, None] * cells + code[rows]).ravel()
    counts = np.bincount(flat, minlength=rows.shape[0] * cells).reshape(rows.shape[0], cells)
    return counts[:, :-1].reshape(rows.shape[0], n_classes, n_classes)


def _f1_parts(confusion: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per class precision, recall, f1: (n_rows, n_classes) each; 0 where undefined."""
    tp = np.diagonal(confusion, axis1=1, axis2=2).astype(np.float64)
    predicted = confusion.sum(axis=1)
    actual = confusion.sum(axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(predicted > 0, tp / predicted, 0.0)
        recall = np.where(actual > 0, tp / actual, 0.0)
        denom = predicted + actual
        f1 = np.where(denom > 0, 2 * tp / denom, 0.0)
    return precision, recall, f1


def _macro(f1: np.ndarray, confusion: np.ndarray) -> np.ndarray:
    """Macro-F1 per row: the mean F1 over the classes that occur in that row's items, as truth
    or as prediction (scikit-learn's rule); a resample that misses a rare class does not score
    it 0."""
    occurs = (confusion.sum(axis=1) + confusion.sum(axis=2)) > 0
    counts = occurs.sum(axis=1)
    return np.where(counts > 0, (f1 * occurs).sum(axis=1) / np.maximum(counts, 1), 0.0)


def _ece_draws(correct: np.ndarray, confidence: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """ECE for each row of item indices: sum over bins of |sum(correct - confidence)| / n."""
    gap, _count, _right = _bin_sums(correct, confidence, rows)
    return np.abs(gap).sum(axis=1) / rows.shape[1]


def _bin_sums(correct, confidence, rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n_rows, ECE_BINS) sums of correct - confidence, item counts and sums of correct."""
    bins = np.minimum((confidence * ECE_BINS).astype(np.int64), ECE_BINS - 1)
    flat = (np.arange(rows.shape[0])[:, None] * ECE_BINS + bins[rows]).ravel()
    size = rows.shape[0] * ECE_BINS

    def total(weights):
        out = np.bincount(flat, weights=weights, minlength=size)
        return out.reshape(rows.shape[0], ECE_BINS)

    gap = total((correct - confidence)[rows].ravel())
    return gap, total(None), total(correct[rows].ravel())


def _debiased_ece_draws(correct, confidence, rows) -> np.ndarray:
    """The debiased squared-error calibration estimate of Kumar, Liang and Ma (2019), as its
    square root: sum over bins of n_b / n * ((mean correct - mean confidence)^2 - the binomial
    variance of the bin's mean correct, p (1 - p) / (n_b - 1)), floored at 0. The plain binned
    ECE is biased upward by that noise (a perfectly calibrated model scores above 0)."""
    gap, count, right = _bin_sums(correct, confidence, rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_gap = np.where(count > 0, gap / count, 0.0)
        p = np.where(count > 0, right / count, 0.0)
        noise = np.where(count > 1, p * (1 - p) / (count - 1), 0.0)
    square = (count / rows.shape[1] * np.where(count > 1, mean_gap**2 - noise, 0.0)).sum(axis=1)
    return np.sqrt(np.maximum(square, 0.0))


def _basic_interval(point: float, draws: np.ndarray, confidence: float) -> Interval:
    """The basic (reverse percentile) bootstrap interval, floored at 0: the resamples' bias
    (the binned ECE's sit above its point) is reflected out instead of carried into the
    interval. Where the reflection moves an end past the point, the end is the point (an
    interval always holds its estimate)."""
    tail = (1 - confidence) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    low, high = max(0.0, 2 * point - high), max(0.0, 2 * point - low)
    return Interval(point, min(low, point), max(high, point), confidence)


def classification_metrics(
    truth: np.ndarray,
    probs: np.ndarray,
    labels: list[str],
    indices: np.ndarray,
    confidence: float,
) -> dict[str, Interval]:
    """{metric name: Interval} for one variant on one split. `indices: (n_resamples, n_items)`
    from stats.resample_indices, the same for every variant of the split."""
    truth = np.asarray(truth, dtype=np.int64)
    probs = np.asarray(probs, dtype=np.float64)
    n_classes = probs.shape[1]
    pred = probs.argmax(axis=1)
    correct = (pred == truth).astype(np.float64)
    top = probs.max(axis=1)
    p_true = np.where(truth >= 0, probs[np.arange(len(truth)), np.clip(truth, 0, None)], 0.0)
    nll = -np.log(np.clip(p_true, _EPS, 1.0))

    out = {
        "accuracy": score_interval(correct, indices, confidence),
        "log_loss": mean_interval(nll, indices, confidence),
    }
    everything = np.arange(len(truth))[None, :]
    ece_point = float(_ece_draws(correct, top, everything)[0])
    out["ece"] = _basic_interval(ece_point, _ece_draws(correct, top, indices), confidence)
    debiased = float(_debiased_ece_draws(correct, top, everything)[0])
    out["ece_debiased"] = _basic_interval(
        debiased, _debiased_ece_draws(correct, top, indices), confidence
    )

    present = np.bincount(truth[truth >= 0], minlength=n_classes) > 0
    point_table = _confusion(truth, pred, n_classes, everything)
    draw_table = _confusion(truth, pred, n_classes, indices)
    point_parts, draw_parts = _f1_parts(point_table), _f1_parts(draw_table)
    out["macro_f1"] = percentile_interval(
        float(_macro(point_parts[2], point_table)[0]),
        _macro(draw_parts[2], draw_table),
        confidence,
    )
    for c, label in enumerate(labels):
        if not present[c]:
            continue
        for name, point, draws in zip(
            ("precision", "recall", "f1"), point_parts, draw_parts, strict=True
        ):
            out[f"{name}[{label}]"] = percentile_interval(
                float(point[0, c]), draws[:, c], confidence
            )
    return out


def perplexity(
    nll: np.ndarray, tokens: np.ndarray, indices: np.ndarray, confidence: float
) -> Interval:
    """exp(sum nll / sum tokens) over the items, with its bootstrap interval: the ratio of the
    two sums is recomputed on each resample of items (`indices: (n_resamples, n_items)`), so an
    item's tokens stay with its loss. Items with no tokens (a label the model never saw: nll NaN)
    weigh nothing; a resample holding no tokens at all is left out."""
    tokens = np.asarray(tokens, dtype=np.float64)
    nll = np.where(tokens > 0, np.asarray(nll, dtype=np.float64), 0.0)
    if tokens.sum() <= 0:
        raise ValueError("perplexity: no response tokens on these items")
    point = math.exp(nll.sum() / tokens.sum())
    draw_tokens = tokens[indices].sum(axis=1)
    kept = draw_tokens > 0
    draws = np.exp(nll[indices].sum(axis=1)[kept] / draw_tokens[kept])
    return percentile_interval(point, draws, confidence)


def per_item_correct(truth: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """(n_items,) 1.0 where the predicted class is the true one."""
    return (np.asarray(probs).argmax(axis=1) == np.asarray(truth)).astype(np.float64)


DECISION_METRICS = ("accuracy", "macro_f1")
# Decision metrics that are not a mean of per-item scores (the two-way bootstrap decides them);
# accuracy and every generated-text metric (a mean of per-item scores in [0, 1]) are.
NOT_ITEM_MEANS = ("macro_f1",)


def metric_draws(
    truth: np.ndarray, probs: np.ndarray, indices: np.ndarray, metric: str
) -> tuple[float, np.ndarray]:
    """(point, draws: (n_resamples,)) of a decision metric over the shared resamples: the draws
    of two variants on the same resamples give the paired bootstrap of their difference."""
    truth = np.asarray(truth, dtype=np.int64)
    pred = np.asarray(probs).argmax(axis=1)
    if metric == "accuracy":
        correct = (pred == truth).astype(np.float64)
        return float(correct.mean()), correct[indices].mean(axis=1)
    if metric != "macro_f1":
        raise ValueError(f"unknown decision metric {metric!r}")
    n_classes = np.asarray(probs).shape[1]
    everything = np.arange(len(truth))[None, :]
    point_table = _confusion(truth, pred, n_classes, everything)
    draw_table = _confusion(truth, pred, n_classes, indices)
    point = _macro(_f1_parts(point_table)[2], point_table)[0]
    return float(point), _macro(_f1_parts(draw_table)[2], draw_table)
