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
