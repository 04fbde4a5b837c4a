"""The floor's cost: its fit and predictions timed with the floor's own functions, written as
a volatile timings file the budget prices like any variant."""

from __future__ import annotations

import json

import pandas as pd

from campaign.budget import PHASE
from campaign.budget.floor_cost import fastest, serving_texts, stage_floor_cost
from campaign.core.runner import StageContext


def test_serving_texts_cycle_to_the_asked_number():
    assert serving_texts(["a", "b", "c"], 7) == ["a", "b", "c", "a", "b", "c", "a"]
    assert serving_texts(["a", "b", "c"], 2) == ["a", "b", "c"]  # every held-out text once
    assert serving_texts([], 5) == []


def test_fastest_is_the_least_of_the_calls():
    import time

    waits = iter([0.03, 0.0, 0.02])
    assert fastest(lambda: time.sleep(next(waits)), 3) < 0.015


def test_the_stage_times_each_floor_and_is_volatile(tmp_path):
    words = ["apple pie sweet", "tart apple crumble", "sky high cloud", "rain cloud grey"]
    labels = ["food", "food", "sky", "sky"]
    inputs = {}
    for split, n in (("train", 40), ("validation", 5), ("test", 5)):
        path = tmp_path / f"{split}.parquet"
        pd.DataFrame(
            {"text": [words[i % 4] for i in range(n)], "label": [labels[i % 4] for i in range(n)]}
        ).to_parquet(path)
        inputs[split] = [path]
    stage = next(s for s in PHASE.stages if s.name == "floor_cost")
    assert stage.volatile == ("timings",)
    spec = {"floors": ["majority", "tfidf_logreg"], "timing": {"repeats": 2, "items": 2000}}
    out = tmp_path / "floor_timings.json"
    ctx = StageContext("floor_cost", spec, inputs, {"timings": out}, tmp_path / "w", tmp_path)
    stage_floor_cost(ctx)
    timed = json.loads(out.read_text())
    assert sorted(timed["floors"]) == ["floor/majority", "floor/tfidf_logreg"]
    assert (timed["items"], timed["threads"]) == (2000, 1)
    bow = timed["floors"]["floor/tfidf_logreg"]
    assert bow["predict_items"] == 2000 and bow["fit_seconds"] > 0
    assert bow["throughput"] == 2000 / bow["predict_seconds"]  # 2,000 items outlast fit noise
