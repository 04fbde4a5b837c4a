"""The floor stage fits each floor once, predicts every split with it and times both: the
floor's cost to train and to serve, which the budget prices (a volatile output)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd

from campaign.evaluate import PHASE
from campaign.evaluate import floor as floors
from campaign.evaluate.stage import stage_floor

WORDS = ["apple pie sweet", "tart apple crumble", "sky high cloud", "rain cloud grey"]
LABELS = ["food", "food", "sky", "sky"]


def test_one_fit_predicts_every_split_with_the_same_bytes_and_is_timed(tmp_path):
    inputs = {}
    for split, n in (("train", 60), ("validation", 7), ("test", 5)):
        frame = pd.DataFrame(
            {
                "id": [f"{split}-{i}" for i in range(n)],
                "text": [f"{WORDS[i % 4]} {i % 3}" for i in range(n)],
                "label": [LABELS[i % 4] for i in range(n)],
            }
        )
        frame.to_parquet(tmp_path / f"{split}.parquet", index=False)
        inputs[split] = [tmp_path / f"{split}.parquet"]
    out, timings = tmp_path / "floor", tmp_path / "floor_timings.json"
    spec = {"floors": ["majority", "tfidf_logreg"], "task": "sequence_classification"}
    outputs = {"floor": out, "timings": timings}
    stage_floor(SimpleNamespace(spec=spec, inputs=inputs, outputs=outputs, root=tmp_path))
    stage = next(s for s in PHASE.stages if s.name == "floor")
    assert stage.volatile == ("timings",)
    # Fitting once gives the probabilities a fit per split gave.
    train = pd.read_parquet(inputs["train"][0])
    for split in ("validation", "test"):
        texts = pd.read_parquet(inputs[split][0])["text"].tolist()
        probs = floors.tfidf_probs(train["text"].tolist(), train["label"].tolist(), texts)
        got = pd.read_parquet(out / "tfidf_logreg" / f"predictions_{split}.parquet")
        assert np.array_equal(got[["score_food", "score_sky"]].to_numpy(), probs)
    timed = json.loads(timings.read_text())
    assert sorted(timed["floors"]) == ["floor/majority", "floor/tfidf_logreg"]
    bow = timed["floors"]["floor/tfidf_logreg"]
    assert {s: p["items"] for s, p in bow["predict"].items()} == {"validation": 7, "test": 5}
    assert bow["predict_items"] == 12 and bow["fit_seconds"] > 0
    assert bow["throughput"] == 12 / bow["predict_seconds"]
