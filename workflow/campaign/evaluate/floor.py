"""The reference floor: what a campaign's fine-tunes must beat to be worth their cost, trained on
the same train split and scored on the same items. Two floors: the majority class (probabilities
= the train split's label shares) and a bag of words (TF-IDF + logistic regression, scikit-learn).

Their predictions have the training runs' columns (id, label, prediction, score_<label> in the
train split's sorted label order), so the evaluation treats them like any variant. Each floor is
fitted once and predicts every split; the fit and the predictions are timed (Timings: the
floor's cost to train and to serve, which the budget prices).
"""

from __future__ import annotations

import contextlib
import json
import time

import numpy as np

FLOORS = ("majority", "tfidf_logreg")
# The bag-of-words model as a practitioner would first try it: word and bigram TF-IDF with
# sublinear term frequency, L2-regularized logistic regression (lbfgs: deterministic).
TFIDF = {"ngram_range": (1, 2), "min_df": 2, "sublinear_tf": True, "max_features": 200_000}
LOGREG = {"C": 10.0, "max_iter": 2000}


def labels_of(train_labels: list[str]) -> list[str]:
    """The classes in the training runs' order: sorted distinct train labels."""
    return sorted(set(train_labels))


def majority_model(train_labels: list[str]):
    """The majority floor fitted on the train split: texts -> (len(texts), n_classes), the
    train split's label shares for every item."""
    labels = labels_of(train_labels)
    counts = np.array([train_labels.count(label) for label in labels], dtype=np.float64)
    shares = counts / counts.sum()
    return lambda texts: np.tile(shares, (len(texts), 1))


def majority_probs(train_labels: list[str], n_items: int) -> np.ndarray:
    """(n_items, n_classes): every item gets the train split's label shares."""
    return majority_model(train_labels)([None] * n_items)


def tfidf_model(train_texts: list[str], train_labels: list[str]):
    """A TF-IDF + logistic regression model fitted on the train split: texts ->
    (len(texts), n_classes) class probabilities. Fitted once, it predicts every split."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    labels = labels_of(train_labels)
    if len(labels) == 1:
        return lambda texts: np.ones((len(texts), 1))
    min_df = TFIDF["min_df"] if len(train_texts) >= 50 else 1  # a tiny train split: keep words
    vectorizer = TfidfVectorizer(**{**TFIDF, "min_df": min_df})
    x = vectorizer.fit_transform(train_texts)
    y = np.array([labels.index(label) for label in train_labels])
    model = LogisticRegression(**LOGREG).fit(x, y)

    def predict(texts: list[str]) -> np.ndarray:
        probs = np.zeros((len(texts), len(labels)))
        if texts:
            probs[:, model.classes_] = model.predict_proba(vectorizer.transform(texts))
        return probs

    return predict


def tfidf_probs(train_texts: list[str], train_labels: list[str], texts: list[str]) -> np.ndarray:
    """(len(texts), n_classes) class probabilities of a TF-IDF + logistic regression model fitted
    on the train split."""
    return tfidf_model(train_texts, train_labels)(texts)


def predictions_frame(ids: list[str], truth: list[str], labels: list[str], probs: np.ndarray):
    """The training runs' predictions columns: id, label, prediction, score_<label>."""
    import pandas as pd

    frame = pd.DataFrame(
        {
            "id": pd.Series(ids, dtype="string"),
            "label": pd.Series(truth, dtype="string"),
            "prediction": pd.Series([labels[i] for i in probs.argmax(axis=1)], dtype="string"),
        }
    )
    for i, name in enumerate(labels):
        frame[f"score_{name}"] = probs[:, i].astype(np.float64)
    return frame


class Timings:
    """The floor stage's timings (a volatile output, results/evaluation/floor_timings.json):
    {"floors": {"floor/<name>": {fit_seconds, predict: {split: {items, seconds}},
    predict_items, predict_seconds, throughput (predictions per second)}}, "threads": 1}."""

    def __init__(self) -> None:
        self.floors: dict[str, dict] = {}

    @contextlib.contextmanager
    def fit(self, name: str):
        start = time.perf_counter()
        yield
        self.floors[f"floor/{name}"] = {"fit_seconds": time.perf_counter() - start, "predict": {}}

    @contextlib.contextmanager
    def predict(self, name: str, split: str, items: int):
        start = time.perf_counter()
        yield
        seconds = time.perf_counter() - start
        self.floors[f"floor/{name}"]["predict"][split] = {"items": items, "seconds": seconds}

    def as_dict(self) -> dict:
        floors = {}
        for name, t in self.floors.items():
            items = sum(p["items"] for p in t["predict"].values())
            seconds = sum(p["seconds"] for p in t["predict"].values())
            floors[name] = t | {
                "predict_items": items,
                "predict_seconds": seconds,
                "throughput": items / seconds if seconds > 0 else None,
            }
        return {"floors": floors, "threads": 1}

    def write(self, path) -> None:
        from campaign.core.fsutil import atomic_write_text

        atomic_write_text(path, json.dumps(self.as_dict(), indent=2, sort_keys=True) + "\n")


def label_floors(floors, inputs: dict, out, timings: Timings) -> None:
    """The label tasks' floors (their TaskModule.floor_stage): each of `floors` fitted on the
    train split file and predicting every evaluation split into
    out/<name>/predictions_<split>.parquet, the fit and the predictions timed in `timings`.
    `inputs`: the floor stage's {"train": [path], "validation": [path], "test": [path]}."""
    import pandas as pd

    from campaign.evaluate.items import SPLITS

    train = pd.read_parquet(inputs["train"][0], columns=["text", "label"])
    texts = train["text"].astype(str).tolist()
    labels = train["label"].astype(str).tolist()
    names = labels_of(labels)
    for name in floors:
        (out / name).mkdir(parents=True)
        with timings.fit(name):
            model = majority_model(labels) if name == "majority" else tfidf_model(texts, labels)
        for split in SPLITS:
            items = pd.read_parquet(inputs[split][0], columns=["id", "text", "label"])
            with timings.predict(name, split, len(items)):
                probs = model(items["text"].astype(str).tolist())
            frame = predictions_frame(
                items["id"].astype(str).tolist(), items["label"].astype(str).tolist(), names, probs
            )
            frame.to_parquet(out / name / f"predictions_{split}.parquet", index=False)
