"""How the generation task's evaluation scores one variant on one split (its TaskModule.scorer):
each item's generated text scored here in [0, 1] by model.generation.metric against the split's
reference, the decision metric their mean; error analysis shows the lowest-scored items, the
first items of every variant, JSON fields and, once decided, each cell's worst items and what
the kept option changed (errors.py).

Shapes: `indices: (n_resamples, n_items)` shared by every variant of a split (paired draws),
`correct: (n_items,)` per-item scores in [0, 1].
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from campaign.core.errors import CampaignError

if TYPE_CHECKING:
    from campaign.evaluate import Items, Scored

# The error files of generated text (results/evaluation/errors/<name>.parquet); every file is
# written, empty when no row fits it, so a reader finds the same names every time.
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


class GeneratedScoring:
    """Generated text scored per item in [0, 1] by model.generation.metric: here, from the
    texts the train stage, the floors and the quantize stage wrote (read_generated)."""

    error_files = GENERATED_ERRORS

    def __init__(self, metric: str, evaluation: dict, judged: int | None = None) -> None:
        self.metric = metric
        self.item_metric = metric  # each item's score is the metric's
        self.s = evaluation
        # model.generation.eval_items: the validation items the runs generated on while they
        # trained (and train.select chose their step by) are left out of the validation split
        # here, for every variant: a decision never reads the items a run was chosen on.
        self.judged = judged
        self._left_out: dict[str, set[str]] = {}
        # What error analysis shows beside the scores: per split the prompts and references
        # (from the split file), per (split, variant) the generated texts, in item order.
        self._asked: dict[str, tuple[list[str], list[str], list[str]]] = {}
        self._texts: dict[tuple[str, str], list[str]] = {}

    def items(self, path: Path, split: str) -> Items:
        # The evaluate phase's readers and statistics (and numpy) are imported where they are
        # used: the task's light answers (its metric, its keys) are read while Snakemake builds
        # the DAG.
        from campaign.evaluate import read_items

        its = read_items(path, split, None, self.s["slices"])
        if split == "validation" and self.judged:
            its = self._leave_out_judged(path, its)
        self._asked[split] = ([str(i) for i in its.ids], *split_prompts(path, its))
        return its

    def _leave_out_judged(self, path: Path, its: Items) -> Items:
        """The validation items less the runs' judged items (train/judged.py's rule)."""
        from dataclasses import replace

        import numpy as np

        from campaign.train import judged_positions

        out = np.zeros(len(its), dtype=bool)
        out[judged_positions(its.ids, self.judged)] = True
        if out.all():
            raise CampaignError(
                f"{path}: model.generation.eval_items ({self.judged}) takes all {len(its)} "
                "validation items the runs are judged on while training, leaving none for the "
                "evaluation's decisions; lower it"
            )
        self._left_out[its.split] = {str(i) for i in its.ids[out]}
        keep = ~out
        slices = {name: values[keep] for name, values in its.slices.items()}
        return replace(its, ids=its.ids[keep], slices=slices)

    def point(self, path: Path, its: Items) -> float:
        """The mean per-item score of one predictions file (quantize_select's pick)."""
        return float(self._read(path, its)["score"].mean())

    def score(self, name: str, path: Path, its: Items, indices, stream) -> Scored:
        import numpy as np

        from campaign.evaluate import Scored, perplexity, score_interval, slice_rows

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
            "slices": slice_rows(
                name, its, correct, stream, self.s["resamples"], conf, self.metric
            ),
        }
        texts = self._texts[(its.split, name)]
        return Scored(iv.value, correct[indices].mean(axis=1), correct, metrics, rows, texts)

    def _read(self, path: Path, its: Items):
        """The predictions file scored by the metric (read_generated)."""
        refs = self._asked[its.split][2]
        return read_generated(path, its, self.metric, refs, self._left_out.get(its.split))

    def decided_errors(self, scored, groups, keep, control) -> dict[str, list[dict]]:
        """worst_cells (each cell's lowest items pooled over its seeds) and kept_changes (the
        items fixed and broken from the control to the kept option `keep`), on every split.

        scored: {split: {variant: {"correct": (n_items,)}}}; groups: {option: [variant names]}
        (a cell: its runs in seed order; a floor: itself); keep, control: option names or None."""
        import numpy as np

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


def scorer(evaluation: dict, model_spec: dict, train: Path, evals: list[Path]) -> GeneratedScoring:
    """The generation task's Scorer: its per-item metric from `model_spec` (model.generation)."""
    from campaign.core.defaults import generation_settings

    judged = generation_settings(model_spec)["eval_items"]
    return GeneratedScoring(metric_of(model_spec), evaluation, judged)


def metric_of(model_spec: dict) -> str:
    """The per-item metric generated text is scored by (model.generation.metric, defaulted)."""
    from campaign.core.defaults import generation_settings

    return generation_settings(model_spec)["metric"]


def check_evaluation(params: dict) -> None:
    """model.generation.metric decides: evaluation.metric is refused, and so is a label metric
    named as the generation metric; evaluation.few_shot goes with the few_shot floor, both or
    neither."""
    from campaign.evaluate import LABEL_METRICS

    evaluation = params["evaluation"]
    if ("few_shot" in evaluation["floor"]) != ("few_shot" in evaluation):
        raise CampaignError(
            "evaluation.few_shot: required when evaluation.floor names few_shot "
            "(e.g. {k: 3, choose: nearest})"
            if "few_shot" in evaluation["floor"]
            else "evaluation.few_shot: set, but evaluation.floor does not name few_shot; add "
            "few_shot to evaluation.floor or remove evaluation.few_shot"
        )
    task, metric = params["model"]["task"], params["evaluation"].get("metric")
    chosen = metric_of(params["model"])
    if metric is not None:
        raise CampaignError(
            f"evaluation.metric: {metric} scores labels; a {task} campaign is decided on "
            f"model.generation.metric ({chosen}): remove evaluation.metric"
        )
    if chosen in LABEL_METRICS:
        raise CampaignError(
            f"model.generation.metric: {chosen} scores labels, not generated text; use "
            "exact_match, token_f1, similarity, json_fields or a dotted Python name"
        )


def evaluation_model(model: dict) -> dict:
    """What the evaluate spec holds of `model`: model.generation, where set."""
    return {"generation": model["generation"]} if "generation" in model else {}


def metric_libraries(model_spec: dict) -> dict[str, str]:
    """The versions of the libraries that compute the metric's scores (text_scores)."""
    from campaign.tasks.generation.text_scores import metric_libraries as libraries

    return libraries(metric_of(model_spec))


def metric_code(model_spec: dict, root) -> list:
    """The file of a user metric's module (model.generation.metric as a dotted name), or []."""
    from campaign.tasks.generation.text_scores import metric_source

    source = metric_source(metric_of(model_spec), root)
    return [] if source is None else [source]


def check_metric(model: dict, root) -> None:
    """model.generation.metric resolves as the evaluate stage resolves it (text_scores.resolve):
    a dotted name must import as a function (prediction, reference) -> float of the project or
    an installed package, not of the standard library."""
    from campaign.tasks.generation.text_scores import resolve

    resolve(metric_of(model), root)


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


def read_generated(
    path: Path, items: Items, metric: str, references: list[str], left_out: set[str] | None = None
):
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
    if left_out:  # the runs' judged validation items (GeneratedScoring.judged): not scored
        frame = frame[~ids.isin(left_out)]
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
    import numpy as np

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
