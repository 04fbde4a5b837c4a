"""The reference floor: what a campaign's fine-tunes must beat to be worth their cost, trained on
the same train split and scored on the same items. Two floors: the majority class (probabilities
= the train split's label shares) and a bag of words (TF-IDF + logistic regression, scikit-learn).

Their predictions have the training runs' columns (id, label, prediction, score_<label> in the
train split's sorted label order), so the evaluation treats them like any variant.
"""

from __future__ import annotations

import numpy as np

FLOORS = ("majority", "tfidf_logreg")
# The bag-of-words model as a practitioner would first try it: word and bigram TF-IDF with
# sublinear term frequency, L2-regularized logistic regression (lbfgs: deterministic).
TFIDF = {"ngram_range": (1, 2), "min_df": 2, "sublinear_tf": True, "max_features": 200_000}
LOGREG = {"C": 10.0, "max_iter": 2000}


def labels_of(train_labels: list[str]) -> list[str]:
    """The classes in the training runs' order: sorted distinct train labels."""
    return sorted(set(train_labels))


def majority_probs(train_labels: list[str], n_items: int) -> np.ndarray:
    """(n_items, n_classes): every item gets the train split's label shares."""
    labels = labels_of(train_labels)
    counts = np.array([train_labels.count(label) for label in labels], dtype=np.float64)
    return np.tile(counts / counts.sum(), (n_items, 1))


def tfidf_probs(train_texts: list[str], train_labels: list[str], texts: list[str]) -> np.ndarray:
    """(len(texts), n_classes) class probabilities of a TF-IDF + logistic regression model fitted
    on the train split."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    labels = labels_of(train_labels)
    if len(labels) == 1:
        return np.ones((len(texts), 1))
    min_df = TFIDF["min_df"] if len(train_texts) >= 50 else 1  # a tiny train split: keep words
    vectorizer = TfidfVectorizer(**{**TFIDF, "min_df": min_df})
    x = vectorizer.fit_transform(train_texts)
    y = np.array([labels.index(label) for label in train_labels])
    model = LogisticRegression(**LOGREG).fit(x, y)
    probs = np.zeros((len(texts), len(labels)))
    if texts:
        probs[:, model.classes_] = model.predict_proba(vectorizer.transform(texts))
    return probs


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
