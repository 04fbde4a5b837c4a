"""The sequence_classification task: an encoder (or any model with a classification head) reads
the text and its head gives the probability of each label."""

from __future__ import annotations

from campaign.core.tasks import TASKS
from campaign.tasks.labels import LabelTask


class SequenceClassification(LabelTask):
    info = TASKS["sequence_classification"]

    # ------------------------------------------------------------------ data
    # ------------------------------------------------------------------ end data

    # ------------------------------------------------------------------ train
    # ------------------------------------------------------------------ end train

    # ------------------------------------------------------------------ preflight and memory
    # ------------------------------------------------------------------ end preflight and memory

    # ------------------------------------------------------------------ evaluate
    # ------------------------------------------------------------------ end evaluate

    # ------------------------------------------------------------------ quantize
    # ------------------------------------------------------------------ end quantize

    # ------------------------------------------------------------------ init
    def init_family(self) -> str:
        return "bert"

    def init_needs_lm_head(self) -> bool:
        return False

    # ------------------------------------------------------------------ end init

    # ------------------------------------------------------------------ report
    # ------------------------------------------------------------------ end report


TASK = SequenceClassification()
