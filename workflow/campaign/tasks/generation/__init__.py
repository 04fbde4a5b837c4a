"""The generation task: prompt → free-form response, formatted with a chat template, trained with
the loss on the assistant's tokens only, judged on what the model generates.

Its parts: chat.py (templates, examples, the training hooks), floor.py (the retrieval and
zero-shot floors), few_shot.py (the few-shot floor), floor_stage.py (the floor stage),
scoring.py (the evaluation's Scorer and metric keys), text_scores.py (the per-item metrics),
errors.py (error analysis of generated text), quantized.py (generation by a quantized variant).
transformers and torch are imported
inside the functions that need them."""

from __future__ import annotations

from campaign.core.defaults import GENERATION_DEFAULTS
from campaign.core.tasks import TASKS, TaskModule
from campaign.tasks.generation import chat, scoring
from campaign.tasks.generation import floor_stage as floors


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

    def generates_text(self) -> bool:
        return True

    def longest_prompt(self, trainer, full) -> tuple[int, str]:
        """Formatted by prompt_ids with the run's template, every turn before the reference
        answer ("no item", 0 tokens, for empty splits)."""
        from campaign.data import parse_messages
        from campaign.train import EVAL_SPLITS

        longest, item = 0, "no item"
        for name in EVAL_SPLITS:
            split = getattr(full, name)
            for record_id, cell in zip(split.ids, split.messages or (), strict=False):
                talk = parse_messages(cell, f"{name} record {record_id}")
                n = len(chat.prompt_ids(trainer.tokenizer, trainer.run_setup.template, talk))
                if n > longest:
                    longest, item = n, f"{name} item {record_id}"
        return longest, item

    def memory_task(self) -> str:
        """Trained and scored as a causal LM: the LM head over the formatted conversation, no
        label set (one sequence an example; the KV cache at what it generates)."""
        return "causal_lm"

    # ------------------------------------------------------------------ end preflight and memory

    # ------------------------------------------------------------------ evaluate
    metric_of = staticmethod(chat.metric_of)
    floor_stage = staticmethod(floors.floor_stage)
    scorer = staticmethod(scoring.scorer)
    check_evaluation = staticmethod(scoring.check_evaluation)
    evaluation_model = staticmethod(scoring.evaluation_model)
    metric_libraries = staticmethod(scoring.metric_libraries)
    metric_code = staticmethod(scoring.metric_code)
    check_metric = staticmethod(scoring.check_metric)
    # ------------------------------------------------------------------ end evaluate

    # ------------------------------------------------------------------ quantize
    # Judged on what it generates, through a KV cache, formatted as conversations; its own
    # settings are model.generation (metric scores only: in no run id).
    model_offers = ("kv_cache", "judged_on_generation", "lm_harness", "chat_format")
    settings_key = "generation"
    scoring_only_settings = ("metric",)
    settings_defaults = GENERATION_DEFAULTS

    def selection_metric(self, metric, model: dict) -> str:
        """model.generation.metric, whatever evaluation.metric says."""
        return self.metric_of(model)

    def quantized(self, job):
        """A variant generates every validation and test answer (quantized.py; torch is
        imported there, not when the DAG lists the tasks)."""
        from campaign.tasks.generation.quantized import judged_variant

        return judged_variant(job)

    # ------------------------------------------------------------------ end quantize

    # ------------------------------------------------------------------ init
    # ------------------------------------------------------------------ end init

    # ------------------------------------------------------------------ report
    # ------------------------------------------------------------------ end report


TASK = Generation()
