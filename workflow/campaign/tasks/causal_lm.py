"""The causal_lm task: a decoder (GPT-2) scores every label's response after the prompt; the
probabilities are the softmax of the labels' total log-likelihoods. The loss is on the response
tokens; its examples pack (train.packing)."""

from __future__ import annotations

from campaign.core.tasks import TASKS
from campaign.tasks.labels import LabelTask


class CausalLM(LabelTask):
    info = TASKS["causal_lm"]

    # ------------------------------------------------------------------ data
    # ------------------------------------------------------------------ end data

    # ------------------------------------------------------------------ train
    def check_architecture(self, architecture: str) -> None:
        super().check_architecture(architecture)
        if architecture != "gpt2":
            from campaign.core.errors import CampaignError

            raise CampaignError(
                f"model.config.architecture: {self.info.name} needs gpt2 (a decoder)"
            )

    def label_format(self, tokenizer, labels, max_length):
        """The separator, each label's response tokens and the prompt's token budget
        (train.CausalFormat)."""
        from campaign.train import CausalFormat

        return CausalFormat.build(tokenizer, labels, max_length)

    def encode_split(self, run, tokenizer, split, max_length: int) -> list[dict]:
        """Prompt, separator, the label's response; the loss on the response tokens."""
        from campaign.train import encode_causal

        return encode_causal(tokenizer, split.texts, split.labels, run.label_ids, run.fmt)

    def scores(self, model, tokenizer, run, split, examples, **kwargs):
        """Every label's response scored after the prompt; the probabilities are the softmax
        of the labels' total log-likelihoods, the loss is that of the true response
        (train.causal_scores)."""
        from campaign.train import causal_scores

        return causal_scores(
            model,
            tokenizer,
            run.fmt,
            split,
            run.label_ids,
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
    # ------------------------------------------------------------------ end quantize

    # ------------------------------------------------------------------ init
    # ------------------------------------------------------------------ end init

    # ------------------------------------------------------------------ report
    # ------------------------------------------------------------------ end report


TASK = CausalLM()
