"""The reference floor: majority-class shares and a TF-IDF + logistic regression trained on the
train split only, scored like a run (same columns, same label order)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from trainkit import DEMO, split_of

from campaign.evaluate import floor


def test_majority_gets_the_train_shares_for_every_item():
    probs = floor.majority_probs(["b", "a", "b", "b"], 3)
    np.testing.assert_allclose(probs, [[0.25, 0.75]] * 3)  # labels sorted: a, b


def test_tfidf_learns_words_and_is_deterministic():
    train_texts = ["red apple", "green apple", "red cherry", "blue sky", "grey sky", "blue sea"]
    train_labels = ["fruit", "fruit", "fruit", "weather", "weather", "weather"]
    probs = floor.tfidf_probs(train_texts, train_labels, ["apple pie", "sky high"])
    assert list(probs.argmax(axis=1)) == [0, 1]  # fruit, weather (sorted labels)
    again = floor.tfidf_probs(train_texts, train_labels, ["apple pie", "sky high"])
    assert np.array_equal(probs, again)


@pytest.fixture(scope="module")
def demo_splits():
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()]
    parts = {name: [r for r in rows if split_of(r["author"]) == name] for name in ("train", "test")}
    return parts["train"], parts["test"]


def test_on_the_demo_the_bag_of_words_beats_the_majority_and_chance(demo_splits):
    train, test = demo_splits
    labels = floor.labels_of([r["label"] for r in train])
    truth = np.array([labels.index(r["label"]) for r in test])
    bow = floor.tfidf_probs(
        [r["text"] for r in train], [r["label"] for r in train], [r["text"] for r in test]
    )
    major = floor.majority_probs([r["label"] for r in train], len(test))
    accuracy = lambda p: float(np.mean(p.argmax(axis=1) == truth))  # noqa: E731
    assert accuracy(bow) > accuracy(major) + 0.3 > 1 / len(labels)
    frame = floor.predictions_frame(
        [r["id"] for r in test], [r["label"] for r in test], labels, bow
    )
    assert list(frame.columns) == ["id", "label", "prediction", *[f"score_{n}" for n in labels]]
    np.testing.assert_allclose(frame[[f"score_{n}" for n in labels]].sum(axis=1), 1.0)


def test_the_floor_is_the_same_bytes_whatever_the_blas_thread_count(tmp_path):
    """A multi-threaded BLAS sums in another order: the floor stage pins one thread, so the
    job and `campaign reproduce` (another process, other threads) agree bit for bit. Without
    the pin, 1 and 2 OpenBLAS threads gave different probabilities on this corpus."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import pandas as pd

    repo = Path(__file__).resolve().parents[2]
    rows = [json.loads(line) for line in (repo / "data/raw/demo.jsonl").read_text().splitlines()]
    for i, split in enumerate(("train", "validation", "test")):
        part = rows[:3000][i::3]
        pd.DataFrame({k: [r[k] for r in part] for k in ("id", "text", "label")}).to_parquet(
            tmp_path / f"{split}.parquet", index=False
        )
    script = (
        "import sys; from pathlib import Path; from types import SimpleNamespace;"
        "from campaign.evaluate.stage import stage_floor;"
        "from campaign.core.hashing import hash_tree;"
        "t = Path(sys.argv[1]); out = t / sys.argv[2];"
        "stage_floor(SimpleNamespace(spec={'floors': ['tfidf_logreg'],"
        " 'task': 'sequence_classification'}, root=t,"
        " inputs={s: [t / f'{s}.parquet'] for s in ('train', 'validation', 'test')},"
        " outputs={'floor': out})); print(hash_tree(out))"
    )
    hashes = []
    for threads in ("1", "2"):
        env = {**os.environ, "OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads}
        env["PYTHONPATH"] = str(repo / "workflow")
        proc = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path), f"floor-{threads}"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        hashes.append(proc.stdout.strip())
    assert hashes[0] == hashes[1]
