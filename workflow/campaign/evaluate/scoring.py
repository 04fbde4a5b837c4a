"""How the evaluation scores one variant on one split, by the task's kind of scoring
(core/tasks.Task.scoring): the items, the per-item scores the statistics see, the metric rows
and the error analysis. The stage's scoring loop calls a Scorer; it does not branch on the task.

- label_probability (sequence_classification, the label-scoring causal_lm): predictions hold a
  probability per label; an item scores 1 when the most probable label is the true one.
- generated_text (generation): predictions hold what the model generated; each item is scored
  here in [0, 1] by model.generation.metric; the decision metric is their mean.

Shapes: `indices: (n_resamples, n_items)` shared by every variant of a split (paired draws),
`correct: (n_items,)` per-item scores in [0, 1], `draws: (n_resamples,)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from campaign.core.errors import CampaignError
from campaign.evaluate import errors
from campaign.evaluate.items import (
    Items,
    campaign_labels,
    read_items,
    read_probs,
    read_response_nll,
)
from campaign.evaluate.metrics import classification_metrics, metric_draws, perplexity
from campaign.evaluate.stats import Interval, score_interval

# The error files of each kind of scoring (results/evaluation/errors/<name>.parquet); every
# file is written, empty when no row fits it, so a reader finds the same names every time.
LABEL_ERRORS = ("confusion", "confused_pairs", "slices", "changes")
GENERATED_ERRORS = (
    "worst",
    "samples",
    "fields",
    "slices",
    "changes",
    "worst_cells",
    "kept_changes",
)
# Generated items shown per variant and split in errors/samples.parquet (the report's samples).
SAMPLES = 5


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
    """A closed set of labels, a probability for each (campaign.evaluate.metrics)."""

    error_files = LABEL_ERRORS
    # What one item's score is (the items table's and the slices' metric): right or wrong,
    # whose mean is the accuracy, whatever metric decides (macro-F1 is not a mean over items).
    item_metric = "accuracy"

    def __init__(self, task: str, evaluation: dict, train: Path, evals: list[Path]) -> None:
        self.task = task
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
        if self.task == "causal_lm":
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


class GeneratedScoring:
    """Generated text scored per item in [0, 1] by model.generation.metric: here, from the
    texts the train stage, the floors and the quantize stage wrote (read_generated)."""

    error_files = GENERATED_ERRORS

    def __init__(self, metric: str, evaluation: dict) -> None:
        self.metric = metric
        self.item_metric = metric  # each item's score is the metric's
        self.s = evaluation
        # What error analysis shows beside the scores: per split the prompts and references
        # (from the split file), per (split, variant) the generated texts, in item order.
        self._asked: dict[str, tuple[list[str], list[str], list[str]]] = {}
        self._texts: dict[tuple[str, str], list[str]] = {}

    def items(self, path: Path, split: str) -> Items:
        its = read_items(path, split, None, self.s["slices"])
        self._asked[split] = ([str(i) for i in its.ids], *split_prompts(path, its))
        return its

    def point(self, path: Path, its: Items) -> float:
        """The mean per-item score of one predictions file (quantize_select's pick)."""
        return float(self._read(path, its)["score"].mean())

    def score(self, name: str, path: Path, its: Items, indices, stream) -> Scored:
        conf = self.s["confidence"]
        frame = self._read(path, its)
        self._texts[(its.split, name)] = frame["prediction"].astype(str).tolist()
        correct = frame["score"].to_numpy(dtype=np.float64)
        iv = score_interval(correct, indices, conf)
        metrics = {self.metric: iv}
        if {"nll", "tokens"} <= set(frame.columns):
            tokens = frame["tokens"].to_numpy(dtype=np.int64)
            if tokens.sum() > 0:  # the mean loss per answer token, exp: where the run has it
                nll = frame["nll"].to_numpy(dtype=np.float64)
                metrics["perplexity"] = perplexity(nll, tokens, indices, conf)
        rows = {
            "worst": generated_rows(name, its.split, frame, self.s["examples"], worst=True),
            "samples": generated_rows(name, its.split, frame, SAMPLES, worst=False),
            "fields": field_rows(name, its.split, frame) if self.metric == "json_fields" else [],
            "slices": errors.slice_rows(
                name, its, correct, stream, self.s["resamples"], conf, self.metric
            ),
        }
        texts = self._texts[(its.split, name)]
        return Scored(iv.value, correct[indices].mean(axis=1), correct, metrics, rows, texts)

    def _read(self, path: Path, its: Items):
        """The predictions file scored by the metric (read_generated)."""
        return read_generated(path, its, self.metric, self._asked[its.split][2])

    def decided_errors(self, scored, groups, keep, control) -> dict[str, list[dict]]:
        """worst_cells (each cell's lowest items pooled over its seeds) and kept_changes (the
        items fixed and broken from the control to the kept option `keep`), on every split.

        scored: {split: {variant: {"correct": (n_items,)}}}; groups: {option: [variant names]}
        (a cell: its runs in seed order; a floor: itself); keep, control: option names or None."""
        from campaign.tasks.generation.errors import Option, kept_change_rows, worst_cell_rows

        rows: dict[str, list[dict]] = {"worst_cells": [], "kept_changes": []}
        for split, by_variant in scored.items():
            ids, prompts, references = self._asked[split]
            options = {
                name: Option(
                    name,
                    np.stack([by_variant[m]["correct"] for m in members]),
                    [self._texts[(split, m)] for m in members],
                )
                for name, members in groups.items()
            }
            for name, opt in options.items():
                if not name.startswith("floor/"):
                    rows["worst_cells"] += worst_cell_rows(
                        opt, split, ids, prompts, references, self.s["examples"]
                    )
            if keep in options and control in options and keep != control:
                rows["kept_changes"] += kept_change_rows(
                    options[keep], options[control], split, ids, prompts, references
                )
        return rows


def scorer(task: str, evaluation: dict, model_spec: dict, train: Path, evals: list[Path]):
    """The Scorer of `task` (core/tasks.scoring_of): for generated text, the task module names
    the per-item metric from `model_spec` (model.generation); labels come from the train split
    file and the evaluation split files `evals`."""
    from campaign.core.tasks import scoring_of, trainer_module

    if scoring_of(task) == "generated_text":
        return GeneratedScoring(trainer_module(task).metric_of(model_spec), evaluation)
    return LabelScoring(task, evaluation, train, evals)


def split_prompts(path: Path, items: Items) -> tuple[list[str], list[str]]:
    """(prompts, references) of a split file's conversations in `items` order: the question
    asked (tasks/generation/errors.py prompt_text) and the reference answer."""
    import pandas as pd

    from campaign.data import parse_messages, reference
    from campaign.tasks.generation.errors import prompt_text

    frame = pd.read_parquet(path)
    if "messages" not in frame.columns:
        raise CampaignError(f"{path}: no messages column (the generation task's split files)")
    talks = {
        str(i): parse_messages(cell, f"{path}: record {i}")
        for i, cell in zip(frame["id"], frame["messages"], strict=True)
    }
    ordered = [talks[str(i)] for i in items.ids]
    return [prompt_text(m) for m in ordered], [reference(m) for m in ordered]


def read_generated(path: Path, items: Items, metric: str, references: list[str]):
    """A generation predictions file in `items` order, each item scored here by `metric`
    against its reference (`references`, from the split file, in `items` order) into a `score`
    column: the evaluation is the one place generated text is scored, so a changed metric
    rescores the same texts. Its ids must be the split's, each once; else one line naming the
    file."""
    import pandas as pd

    from campaign.tasks.generation.text_scores import score_items

    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as e:
        raise CampaignError(f"{path}: not a readable Parquet file ({e})") from None
    missing = {"id", "prediction"} - set(frame.columns)
    if missing:
        raise CampaignError(
            f"{path}: missing column(s) {', '.join(sorted(missing))} (a generation predictions "
            "file: id, reference, prediction)"
        )
    ids = frame["id"].astype(str)
    if not ids.is_unique or set(ids) != set(items.ids) or len(ids) != len(items):
        extra = sorted(set(ids) - set(items.ids))
        lacking = sorted(set(items.ids) - set(ids))
        which = f"e.g. {extra[0]!r} is not one" if extra else f"e.g. {lacking[0]!r} is missing"
        if not extra and not lacking:
            which = "some id is repeated"
        raise CampaignError(
            f"{path}: its {len(ids)} ids are not the {len(items)} items of the {items.split} "
            f"split ({which}; predictions of another split?)"
        )
    frame = frame.set_index(ids).loc[list(items.ids)].reset_index(drop=True)
    frame["id"] = list(items.ids)
    frame["reference"] = references
    predictions = frame["prediction"].fillna("").astype(str).tolist()
    try:
        frame["score"] = score_items(metric, predictions, list(references), items.ids)
    except CampaignError as e:
        raise CampaignError(f"{path}: {e}") from None
    return frame


def generated_rows(name: str, split: str, frame, n: int, worst: bool) -> list[dict]:
    """`n` items of a variant with what it generated: the lowest-scored ones (worst; ties by
    split order), or the first of the split (samples: the same items for every variant)."""
    order = np.argsort(frame["score"].to_numpy(), kind="stable") if worst else np.arange(len(frame))
    return [
        {
            "variant": name,
            "split": split,
            "id": str(frame["id"].iloc[i]),
            "score": float(frame["score"].iloc[i]),
            "reference": str(frame["reference"].iloc[i]),
            "prediction": str(frame["prediction"].iloc[i]),
        }
        for i in order[:n]
    ]


def field_rows(name: str, split: str, frame) -> list[dict]:
    """JSON extraction's per-field outcomes of a variant: one row per field with its correct,
    wrong, missing and spurious counts, and the invalid (not a JSON object) predictions."""
    from campaign.tasks.generation.text_scores import json_field_table

    table = json_field_table(
        frame["prediction"].astype(str).tolist(), frame["reference"].astype(str).tolist()
    )
    names = sorted(set(table.correct) | set(table.wrong) | set(table.missing) | set(table.spurious))
    return [
        {
            "variant": name,
            "split": split,
            "field": f,
            "correct": table.correct[f],
            "wrong": table.wrong[f],
            "missing": table.missing[f],
            "spurious": table.spurious[f],
            "invalid": table.invalid,
            "items": table.items,
        }
        for f in names
    ]
