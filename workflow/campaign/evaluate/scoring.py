"""How the evaluation scores one variant on one split: the Scorer interface the stage's scoring
loop calls (items, point, score, decided_errors, error_files, item_metric), each task's from
its module (TaskModule.scorer), found by `scorer`. The stage does not branch on the task.

- LabelScoring (sequence_classification, the label-scoring causal_lm): predictions hold a
  probability per label; an item scores 1 when the most probable label is the true one.
- generated text: the generation task's own Scorer (tasks/generation/scoring.py) scores each
  item in [0, 1] by model.generation.metric; the decision metric is their mean.

Shapes: `indices: (n_resamples, n_items)` shared by every variant of a split (paired draws),
`correct: (n_items,)` per-item scores in [0, 1], `draws: (n_resamples,)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from campaign.evaluate import errors
from campaign.evaluate.items import (
    Items,
    campaign_labels,
    read_items,
    read_probs,
    read_response_nll,
)
from campaign.evaluate.metrics import classification_metrics, metric_draws, perplexity
from campaign.evaluate.stats import Interval

# The error files of label scoring (results/evaluation/errors/<name>.parquet); every
# file is written, empty when no row fits it, so a reader finds the same names every time.
LABEL_ERRORS = ("confusion", "confused_pairs", "slices", "changes")


@dataclass
class Scored:
    """One variant on one split: the decision metric's point and draws on the shared resamples,
    the per-item scores, every metric with its interval, error rows by file name, and what
    the variant answered on each item (`predictions`: the predicted label or the generated
    text, in item order)."""

    point: float
    draws: np.ndarray
    correct: np.ndarray
    metrics: dict[str, Interval]
    errors: dict[str, list[dict]] = field(default_factory=dict)
    predictions: list[str] | None = None


class LabelScoring:
    """A closed set of labels, a probability for each (campaign.evaluate.metrics). `responses`:
    each label is a response the model scored (causal_lm), so its exact match and, where the
    predictions hold the responses' losses, its perplexity are reported too."""

    error_files = LABEL_ERRORS
    # What one item's score is (the items table's and the slices' metric): right or wrong,
    # whose mean is the accuracy, whatever metric decides (macro-F1 is not a mean over items).
    item_metric = "accuracy"

    def __init__(
        self, evaluation: dict, train: Path, evals: list[Path], responses: bool = False
    ) -> None:
        self.responses = responses
        self.s = evaluation
        self.metric = evaluation["metric"]
        self.labels = campaign_labels(train, evals)

    def items(self, path: Path, split: str) -> Items:
        return read_items(path, split, self.labels, self.s["slices"])

    def point(self, path: Path, its: Items) -> float:
        """The decision metric of one predictions file on all items (quantize_select's pick)."""
        everything = np.arange(len(its))[None, :]
        return metric_draws(its.truth, read_probs(path, its), everything, self.metric)[0]

    def score(self, name: str, path: Path, its: Items, indices, stream) -> Scored:
        s, conf = self.s, self.s["confidence"]
        probs = read_probs(path, its)
        pred = probs.argmax(axis=1)
        point, draws = metric_draws(its.truth, probs, indices, self.metric)
        correct = (pred == its.truth).astype(np.float64)
        metrics = classification_metrics(its.truth, probs, self.labels, indices, conf)
        if self.responses:
            # The answer is the label's response: the model's best-scored response is the
            # true one exactly when the prediction is right.
            metrics["exact_match"] = metrics["accuracy"]
            response = read_response_nll(path, its)
            if response is not None and response[1].sum() > 0:
                metrics["perplexity"] = perplexity(*response, indices, conf)
        rows = {
            "confusion": errors.confusion_rows(name, its, pred),
            "confused_pairs": errors.confused_pairs(
                name, its, pred, s["confused_pairs"], s["examples"]
            ),
            "slices": errors.slice_rows(
                name, its, correct, stream, s["resamples"], conf, self.item_metric
            ),
        }
        predicted = [self.labels[p] for p in pred]
        return Scored(point, draws, correct, metrics, rows, predicted)

    def decided_errors(self, scored, groups, keep, control) -> dict[str, list[dict]]:
        """Error rows that need the decisions: none for labels (their fixed and broken items
        are the `changes` of each variant against its reference)."""
        return {}


def scorer(task: str, evaluation: dict, model_spec: dict, train: Path, evals: list[Path]):
    """The Scorer of `task`: its module's (TaskModule.scorer), from the evaluation settings,
    the model's spec (a generation task's per-item metric: model.generation), the train split
    file and the evaluation split files `evals` (a label task's labels)."""
    from campaign.core.tasks import module_of

    return module_of(task).scorer(evaluation, model_spec, train, evals)
