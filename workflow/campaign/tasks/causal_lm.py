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
    # ------------------------------------------------------------------ end train

    # ------------------------------------------------------------------ preflight and memory
    # ------------------------------------------------------------------ end preflight and memory

    # ------------------------------------------------------------------ evaluate
    # ------------------------------------------------------------------ end evaluate

    # ------------------------------------------------------------------ quantize
    # ------------------------------------------------------------------ end quantize

    # ------------------------------------------------------------------ init
    def init_family(self) -> str:
        return "gpt2"

    # ------------------------------------------------------------------ end init

    # ------------------------------------------------------------------ report
    # ------------------------------------------------------------------ end report


TASK = CausalLM()
