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
    decoder = False
    label_head = True
    model_noun = "sequence classifier"

    def check_architecture(self, architecture: str) -> None:
        if architecture == "llama":
            from campaign.core.errors import CampaignError

            raise CampaignError(
                f"model.config.architecture: llama is a decoder for the generation task, not "
                f"{self.info.name} (use bert or gpt2)"
            )

    def model_class(self):
        import transformers

        return transformers.AutoModelForSequenceClassification

    def head_config(self, labels) -> dict:
        return dict(
            num_labels=len(labels),
            id2label=dict(enumerate(labels)),
            label2id={name: i for i, name in enumerate(labels)},
        )

    def lora_task_type(self):
        """SEQ_CLS: peft also trains and saves the new head ("classifier" for bert, "score"
        for gpt2), which starts random and must learn."""
        from peft import TaskType

        return TaskType.SEQ_CLS

    def loss_sum(self, logits, labels):
        """Cross-entropy of the (B, C) class logits against each item's label id."""
        import torch.nn.functional as F

        from campaign.train import IGNORE

        return F.cross_entropy(logits, labels, ignore_index=IGNORE, reduction="sum")

    def encode_split(self, run, tokenizer, split, max_length: int) -> list[dict]:
        """[CLS] text [SEP] (the tokenizer's own specials), cut to max_length; its label id."""
        from campaign.train import encode_classification

        return encode_classification(
            tokenizer, split.texts, split.labels, run.label_ids, max_length
        )

    def scores(self, model, tokenizer, run, split, examples, **kwargs):
        """The head's softmax (train.classifier_scores)."""
        from campaign.train import classifier_scores

        return classifier_scores(
            model,
            examples,
            kwargs["micro_batch"],
            kwargs["pad_id"],
            kwargs["device"],
            kwargs["autocast"],
        )

    # ------------------------------------------------------------------ end train

    # ------------------------------------------------------------------ preflight and memory
    # ------------------------------------------------------------------ end preflight and memory

    # ------------------------------------------------------------------ evaluate
    # ------------------------------------------------------------------ end evaluate

    # ------------------------------------------------------------------ quantize
    # A classification head: an ONNX export serves it; no KV cache, nothing generated.
    model_offers = ("classification_head",)
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
