"""What the two label tasks share (sequence_classification, the label-scoring causal_lm): a closed
set of labels, each item scored by the probability of each label, the label floors (majority,
TF-IDF + logistic regression), and a split that balances label shares."""

from __future__ import annotations

from campaign.core.errors import CampaignError
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
    # ------------------------------------------------------------------ end quantize

    # ------------------------------------------------------------------ init
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
