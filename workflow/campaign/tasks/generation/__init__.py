"""The generation task: prompt → free-form response, formatted with a chat template, trained with
the loss on the assistant's tokens only, judged on what the model generates.

Its parts: chat.py (templates, examples, the training hooks), floor.py (the retrieval and
zero-shot floors), few_shot.py (the few-shot floor), floor_stage.py (the floor stage),
text_scores.py (the per-item metrics), errors.py (error analysis of generated text), quantized.py
(generation by a quantized variant). transformers and torch are imported
inside the functions that need them."""

from __future__ import annotations

from campaign.core.tasks import TASKS, TaskModule
from campaign.tasks.generation import chat, floor_stage


class Generation(TaskModule):
    info = TASKS["generation"]

    # ------------------------------------------------------------------ data
    # ------------------------------------------------------------------ end data

    # ------------------------------------------------------------------ train
    setup = staticmethod(chat.setup)
    encode_split = staticmethod(chat.encode_split)
    check_train_examples = staticmethod(chat.check_train_examples)
    evaluate = staticmethod(chat.evaluate)
    empty_predictions = staticmethod(chat.empty_predictions)
    # The chat pieces other phases use through the task.
    prompt_ids = staticmethod(chat.prompt_ids)
    # ------------------------------------------------------------------ end train

    # ------------------------------------------------------------------ preflight and memory
    tokenization_check = staticmethod(chat.tokenization_check)
    not_reproduced = staticmethod(chat.not_reproduced)
    # ------------------------------------------------------------------ end preflight and memory

    # ------------------------------------------------------------------ evaluate
    metric_of = staticmethod(chat.metric_of)
    floor_stage = staticmethod(floor_stage.floor_stage)
    # ------------------------------------------------------------------ end evaluate

    # ------------------------------------------------------------------ quantize
    # ------------------------------------------------------------------ end quantize

    # ------------------------------------------------------------------ init
    # ------------------------------------------------------------------ end init

    # ------------------------------------------------------------------ report
    # ------------------------------------------------------------------ end report


TASK = Generation()
