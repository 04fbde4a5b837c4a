"""What the two label tasks share (sequence_classification, the label-scoring causal_lm): a closed
set of labels, each item scored by the probability of each label, the label floors (majority,
TF-IDF + logistic regression), and a split that balances label shares."""

from __future__ import annotations

from dataclasses import dataclass

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
    # ------------------------------------------------------------------ end preflight and memory

    # ------------------------------------------------------------------ evaluate
    # ------------------------------------------------------------------ end evaluate

    # ------------------------------------------------------------------ quantize
    # ------------------------------------------------------------------ end quantize

    # ------------------------------------------------------------------ init
    # ------------------------------------------------------------------ end init

    # ------------------------------------------------------------------ report
    # ------------------------------------------------------------------ end report
