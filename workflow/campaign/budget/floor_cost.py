"""What the reference floor costs to train and to serve: its fit on the train split and its
predictions, timed on one BLAS thread with the floor's own functions (as the floor stage runs
them), so the budget can price the floor like any variant at the quality bar.

Writes results/budget/floor_timings.json, a volatile output (timings differ between identical
computations: recorded, not compared by `campaign reproduce`):
  floors: {"floor/<name>": {fit_seconds, predict_seconds, predict_items, throughput}}
  repeats, items, threads, device
fit_seconds is the fastest of `repeats` fits (the floor's function with no item to predict);
predict_seconds the fastest fit-and-predict of `items` held-out texts (validation and test,
cycled) less fit_seconds; throughput = predict_items / predict_seconds (predictions per second).
"""

from __future__ import annotations

import json
import math
import platform
import time
from collections.abc import Callable

from campaign.core.fsutil import atomic_write_text


def fastest(call: Callable[[], object], repeats: int) -> float:
    """The fewest seconds `call` took over `repeats` calls (the least disturbed by other
    work on the machine)."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def serving_texts(texts: list[str], items: int) -> list[str]:
    """`items` texts (at least every one given once), cycling through `texts`."""
    if not texts:
        return []
    return [texts[i % len(texts)] for i in range(max(items, len(texts)))]


def time_floor(
    name: str, train_texts: list[str], train_labels: list[str], serve: list[str], repeats: int
) -> dict:
    """One floor's fit and predict seconds (see the module's docstring)."""
    from campaign.evaluate import majority_probs, tfidf_probs

    def fit_and_predict(texts: list[str]):
        if name == "majority":
            return majority_probs(train_labels, len(texts))
        return tfidf_probs(train_texts, train_labels, texts)

    fit_s = fastest(lambda: fit_and_predict([]), repeats)
    total_s = fastest(lambda: fit_and_predict(serve), repeats)
    predict_s = max(total_s - fit_s, 0.0)
    return {
        "fit_seconds": fit_s,
        "predict_seconds": predict_s,
        "predict_items": len(serve),
        "throughput": len(serve) / predict_s if predict_s > 0 else math.nan,
    }


def stage_floor_cost(ctx) -> None:
    import pandas as pd
    from threadpoolctl import threadpool_limits

    timing = ctx.spec["timing"]
    train = pd.read_parquet(ctx.inputs["train"][0], columns=["text", "label"])
    texts = train["text"].astype(str).tolist()
    labels = train["label"].astype(str).tolist()
    held_out = [
        t
        for split in ("validation", "test")
        for t in pd.read_parquet(ctx.inputs[split][0], columns=["text"])["text"].astype(str)
    ]
    serve = serving_texts(held_out, timing["items"])
    with threadpool_limits(limits=1):  # as the floor stage fits
        floors = {
            f"floor/{name}": time_floor(name, texts, labels, serve, timing["repeats"])
            for name in ctx.spec["floors"]
        }
    out = {
        "floors": floors,
        "repeats": timing["repeats"],
        "items": len(serve),
        "threads": 1,
        "device": {"type": "cpu", "name": platform.processor() or platform.machine()},
    }
    atomic_write_text(ctx.outputs["timings"], json.dumps(out, indent=2, sort_keys=True) + "\n")
