"""What the two label tasks share (sequence_classification, the label-scoring causal_lm): a closed
set of labels, each item scored by the probability of each label, the label floors (majority,
TF-IDF + logistic regression), and a split that balances label shares."""

from __future__ import annotations

from campaign.core.tasks import TaskModule


class LabelTask(TaskModule):
    """The label tasks' common part; sequence_classification and causal_lm override what
    differs (the head, the example, the scores)."""

    # ------------------------------------------------------------------ data
    # ------------------------------------------------------------------ end data

    # ------------------------------------------------------------------ train
    # ------------------------------------------------------------------ end train

    # ------------------------------------------------------------------ preflight and memory
    # ------------------------------------------------------------------ end preflight and memory

    # ------------------------------------------------------------------ evaluate
    # ------------------------------------------------------------------ end evaluate

    # ------------------------------------------------------------------ quantize
    def quantized(self, job):
        """A label task's variant scores the labels as its run did (campaign.quantize's Job:
        agreement with the run's predictions, accuracy, the timed forward passes)."""
        return job.label_scores()

    # ------------------------------------------------------------------ end quantize

    # ------------------------------------------------------------------ init
    # ------------------------------------------------------------------ end init

    # ------------------------------------------------------------------ report
    # ------------------------------------------------------------------ end report
