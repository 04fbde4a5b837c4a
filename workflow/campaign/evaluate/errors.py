"""Error analysis of the scored variants: confusion counts, the most-confused label pairs with
example ids, the mean item score per slice (source, group size, text length, duplicate-cluster
membership), and for a variant against its reference the items it fixed and the items it
broke, with ids."""

from __future__ import annotations

import zlib

import numpy as np

from campaign.evaluate.items import Items
from campaign.evaluate.stats import score_interval

# The cells' error analysis of generated text (tasks/generation/errors.py writes it, section.py
# shows it): what counts as a change, and the columns of worst_cells and kept_changes.
# An item counts as fixed (broken) when every run of the kept option scores at least this much
# above (below) every run of the control. Half the scale: for 0/1 scores it is the crossing
# from wrong to right, and for continuous scores it is a change a reader sees in the text, not
# token-F1 noise of a word more or less.
CHANGE_THRESHOLD = 0.5
# How the report states the rule (section.cell_errors).
CHANGE_RULE = (
    f"every seed of one at least {CHANGE_THRESHOLD:g} above every seed of the other, so one "
    "seed's flip is not counted"
)

WORST_CELL_COLUMNS = ("cell", "split", "id", "score", "seeds", "prompt", "reference", "prediction")
KEPT_CHANGE_COLUMNS = (
    "split",
    "kept",
    "control",
    "id",
    "change",
    "kept_score",
    "control_score",
    "delta",
    "prompt",
    "reference",
    "kept_prediction",
    "control_prediction",
)


def confusion_rows(variant: str, items: Items, pred: np.ndarray) -> list[dict]:
    """One row per (true, predicted) pair that occurs: the variant's confusion matrix, long."""
    known = items.truth >= 0
    truth_names = np.where(known, np.asarray(items.labels, dtype=object)[items.truth.clip(0)], "?")
    pairs: dict[tuple[str, str], int] = {}
    for t, p in zip(truth_names, pred, strict=True):
        key = (str(t), items.labels[p])
        pairs[key] = pairs.get(key, 0) + 1
    return [
        {"variant": variant, "split": items.split, "label": t, "predicted": p, "count": n}
        for (t, p), n in sorted(pairs.items())
    ]


def confused_pairs(
    variant: str, items: Items, pred: np.ndarray, top: int, examples: int
) -> list[dict]:
    """The `top` most frequent (true, predicted) mistakes, with up to `examples` item ids each."""
    wrong = np.flatnonzero(pred != items.truth)
    groups: dict[tuple[str, str], list[str]] = {}
    for i in wrong:
        t = items.labels[items.truth[i]] if items.truth[i] >= 0 else "?"
        groups.setdefault((t, items.labels[pred[i]]), []).append(str(items.ids[i]))
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:top]
    return [
        {
            "variant": variant,
            "split": items.split,
            "label": t,
            "predicted": p,
            "count": len(ids),
            "example_ids": sorted(ids)[:examples],
        }
        for (t, p), ids in ranked
    ]


def slice_rows(
    variant: str,
    items: Items,
    correct: np.ndarray,
    seed: tuple[int, ...],
    resamples: int,
    confidence: float,
    metric: str,
) -> list[dict]:
    """The mean per-item score (`metric`: what each item's score is, accuracy for right or
    wrong, token_f1 ...) per bucket of each slice, with its interval over the bucket's items
    (stats.score_interval: exact for 0/1 scores, where a small bucket near 100 % needs it; the
    bootstrap for scores in [0, 1]). The resamples depend on the split, slice and bucket only
    (not on the variant), so every variant's interval on a bucket is drawn from the same items."""
    rows = []
    for name, buckets in items.slices.items():
        for bucket in sorted(set(buckets)):
            members = np.flatnonzero(buckets == bucket)
            stream = zlib.crc32(f"{name}\0{bucket}".encode())
            rng = np.random.default_rng([*seed, stream])
            draws = rng.integers(0, members.size, size=(resamples, members.size))
            iv = score_interval(correct[members], draws, confidence)
            rows.append(
                {
                    "variant": variant,
                    "split": items.split,
                    "slice": name,
                    "bucket": str(bucket),
                    "items": int(members.size),
                    "metric": metric,
                    "value": iv.value,
                    "ci_low": iv.low,
                    "ci_high": iv.high,
                }
            )
    return rows


def change_rows(
    variant: str, reference: str, items: Items, ref_correct: np.ndarray, correct: np.ndarray
) -> list[dict]:
    """The items the variant fixed (reference wrong, variant right) and broke (the reverse).
    A per-item score in [0, 1] (generated text) counts as right from 0.5: an item is fixed when
    its score crosses that line upwards, broken when downwards (for 0/1 scores: 0 -> 1, 1 -> 0)."""
    rows = []
    ref_right, right = np.asarray(ref_correct) >= 0.5, np.asarray(correct) >= 0.5
    for change, mask in (
        ("fixed", ~ref_right & right),
        ("broken", ref_right & ~right),
    ):
        for i in np.flatnonzero(mask):
            rows.append(
                {
                    "variant": variant,
                    "reference": reference,
                    "split": items.split,
                    "id": str(items.ids[i]),
                    "change": change,
                }
            )
    return rows
