"""What the two label tasks share (sequence_classification, the label-scoring causal_lm): a closed
set of labels, each item scored by the probability of each label, the label floors (majority,
TF-IDF + logistic regression), and a split that balances label shares."""

from __future__ import annotations

from dataclasses import dataclass

from campaign.core.errors import CampaignError
from campaign.core.tasks import TaskModule


class LabelTask(TaskModule):
    """The label tasks' common part; sequence_classification and causal_lm override what
    differs (the head, the example, the scores)."""

    # ------------------------------------------------------------------ data
    # ------------------------------------------------------------------ end data

    # ------------------------------------------------------------------ train
    score_name = "accuracy"
    labeled = True

    @dataclass
    class Run:
        """What a label task's run formats and scores with (its setup): the label names in
        label-id order, name -> id, and the task's format (None for a classifier)."""

        labels: list
        label_ids: dict
        fmt: object = None

    def label_format(self, tokenizer, labels, max_length):
        """How a record becomes an example beyond its text and label (the causal_lm task's
        CausalFormat); None for a task that needs none."""
        return None

    def setup(self, model_spec: dict, tokenizer, root, *, labels=(), max_length=None):
        """The run's labels, their ids (position in `labels`) and the task's format;
        model_spec and root are not read (train.SavedModel passes None)."""
        labels = list(labels)
        return self.Run(
            labels=labels,
            label_ids={name: i for i, name in enumerate(labels)},
            fmt=self.label_format(tokenizer, labels, max_length),
        )

    def evaluate(self, model, tokenizer, run, split, examples, **kwargs):
        """(mean loss per target, accuracy, probabilities (n, n_labels)); final is not read:
        every evaluation scores every item."""
        import numpy as np
        import torch

        kwargs.pop("final", None)
        model.eval()
        with torch.no_grad():
            probs, loss, count = self.scores(model, tokenizer, run, split, examples, **kwargs)
        truth = np.array([run.label_ids.get(v, -1) for v in split.labels])
        accuracy = float((probs.argmax(axis=1) == truth).mean())
        # Plain floats: rows go into checkpoints, which load with weights_only (no numpy types).
        return (float(loss) / count if count else float("nan")), accuracy, probs

    def predictions(self, run, split, scored):
        """id, label, prediction, then score_<label> (probability) per class
        (train.prediction_frame)."""
        from campaign.train import prediction_frame

        return prediction_frame(split, run.labels, scored)

    # ------------------------------------------------------------------ end train

    # ------------------------------------------------------------------ preflight and memory
    def tokenization_check(
        self, trainer, split, inspect: int, full=None, max_unknown_share: float = 1.0
    ):
        """The examples the loop formats (tasks/label_preflight.py): a classifier's label at
        one position, a causal LM's response tokens after the masked prompt."""
        from campaign.tasks.label_preflight import tokenization_check

        response = self.memory_head() == "lm"
        return tokenization_check(
            self.info.name, trainer, split, inspect, max_unknown_share, response
        )

    def not_reproduced(self, trainer, split, n: int, details: dict):
        """A label's loss below the threshold is its answer: nothing more to give back."""
        return None

    def memory_head(self) -> str | None:
        return "classifier"

    # ------------------------------------------------------------------ end preflight and memory

    # ------------------------------------------------------------------ evaluate
    # Whether each label is a response the model scores (causal_lm): then the items' exact
    # match and the responses' perplexity are reported beside the label metrics.
    scores_responses = False

    def floor_stage(self, spec: dict, inputs: dict, folder, root, timings) -> None:
        from campaign.evaluate import label_floors

        label_floors(spec["floors"], inputs, folder, timings)

    def scorer(self, evaluation: dict, model_spec: dict, train, evals):
        from campaign.evaluate import LabelScoring

        return LabelScoring(evaluation, train, evals, responses=self.scores_responses)

    def check_evaluation(self, params: dict) -> None:
        """evaluation.metric decides (one of LABEL_METRICS); model.generation is refused."""
        from campaign.core.errors import CampaignError
        from campaign.evaluate import LABEL_METRICS

        task = params["model"]["task"]
        if "generation" in params["model"]:
            raise CampaignError(
                f"model.generation: only read by a generation task, not {task}; remove it "
                f"(evaluation.metric decides)"
            )
        if params["evaluation"].get("metric") is None:
            raise CampaignError(
                f"evaluation.metric: required for model.task {task} ({' or '.join(LABEL_METRICS)})"
            )
        if "few_shot" in params["evaluation"]:
            raise CampaignError(
                f"evaluation.few_shot: only read by a generation task's few_shot floor, not "
                f"{task}; remove it"
            )

    # ------------------------------------------------------------------ end evaluate

    # ------------------------------------------------------------------ quantize
    def quantize_settings(self, section: dict) -> dict:
        """No sample generation (a classifier's job shows none; causal_lm's reads
        quantization.generation)."""
        return {"generation": None}

    def selection_metric(self, metric: str | None, model: dict) -> str | None:
        """evaluation.metric decides a label task."""
        return metric

    def quantized(self, job):
        """A label task's variant scores the labels as its run did (campaign.quantize's Job:
        agreement with the run's predictions, accuracy, the timed forward passes)."""
        return job.label_scores()

    # ------------------------------------------------------------------ end quantize

    # ------------------------------------------------------------------ init
    def init_lowercase(self) -> bool:
        """A label's text may be lowercased (model.tokenizer.lowercase decides)."""
        return True

    def init_fields(self, args, fields: dict) -> dict:
        """The text and the label columns are required."""
        for key in ("text", "label"):
            if not fields[key]:
                raise CampaignError(f"--{key}-column: required for --task {args.task}")
        return fields

    def init_check_labels(self, labels, args, data) -> None:
        """A classifier needs at least 2 distinct labels."""
        if len(labels) < 2:
            raise CampaignError(
                f"--label-column {args.label_column!r}: {data} has {len(labels)} distinct "
                f"label(s) ({', '.join(map(str, labels.index))}); a classifier needs at least 2"
            )

    # ------------------------------------------------------------------ end init

    # ------------------------------------------------------------------ report
    # ------------------------------------------------------------------ end report
