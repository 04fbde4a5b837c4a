"""The generation task: prompt → free-form response, formatted with a chat template, trained with
the loss on the assistant's tokens only, judged on what the model generates.

Its parts: chat.py (templates, examples, the training hooks), floor.py (the zero-shot and
retrieval floors), text_scores.py (the per-item metrics), errors.py (error analysis of generated
text), quantized.py (generation by a quantized variant). transformers and torch are imported
inside the functions that need them."""

from __future__ import annotations

from campaign.core.tasks import TASKS, TaskModule
from campaign.tasks.generation import chat


class Generation(TaskModule):
    info = TASKS["generation"]

    # ------------------------------------------------------------------ data
    # ------------------------------------------------------------------ end data

    # ------------------------------------------------------------------ train
    encode_split = staticmethod(chat.encode_split)
    check_train_examples = staticmethod(chat.check_train_examples)
    empty_predictions = staticmethod(chat.empty_predictions)

    def setup(self, model_spec: dict, tokenizer, root, *, labels=(), max_length=None):
        """The template and generation settings (chat.setup); a generation run has no
        labels, and its max_length is applied per split."""
        return chat.setup(model_spec, tokenizer, root)

    def evaluate(self, model, tokenizer, run, split, examples, **kwargs):
        """chat.evaluate: the loss, then on the saved model the generated predictions; the
        loop's autocast is not applied (scoring and generating in fp32)."""
        kwargs.pop("autocast", None)
        return chat.evaluate(model, tokenizer, run, split, examples, **kwargs)

    def command_fields(self, model_spec: dict, tokenizer_folder, root) -> dict:
        """The chat template the campaign formats and scores with (model.chat_template
        resolved), so the command trains on the very text its model is judged on."""
        from pathlib import Path

        from campaign.train import load_tokenizer

        tok = load_tokenizer(Path(tokenizer_folder), self.info.name)
        return {"chat_template": self.setup(model_spec, tok, root).template}

    # The chat pieces other phases use through the task.
    prompt_ids = staticmethod(chat.prompt_ids)
    # ------------------------------------------------------------------ end train

    # ------------------------------------------------------------------ preflight and memory
    tokenization_check = staticmethod(chat.tokenization_check)
    not_reproduced = staticmethod(chat.not_reproduced)
    # ------------------------------------------------------------------ end preflight and memory

    # ------------------------------------------------------------------ evaluate
    metric_of = staticmethod(chat.metric_of)
    floor_stage = staticmethod(chat.floor_stage)
    # ------------------------------------------------------------------ end evaluate

    # ------------------------------------------------------------------ quantize
    # ------------------------------------------------------------------ end quantize

    # ------------------------------------------------------------------ init
    # ------------------------------------------------------------------ end init

    # ------------------------------------------------------------------ report
    # ------------------------------------------------------------------ end report


TASK = Generation()
