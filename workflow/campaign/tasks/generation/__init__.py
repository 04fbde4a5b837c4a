"""The generation task: prompt → free-form response, formatted with a chat template, trained with
the loss on the assistant's tokens only, judged on what the model generates.

Its parts: chat.py (templates, examples, the training hooks), floor.py (the retrieval and
zero-shot floors), few_shot.py (the few-shot floor), floor_stage.py (the floor stage),
scoring.py (the evaluation's Scorer and metric keys), text_scores.py (the per-item metrics),
errors.py (error analysis of generated text), quantized.py (generation by a quantized variant).
transformers and torch are imported
inside the functions that need them."""

from __future__ import annotations

import json
from pathlib import Path

from campaign.core.defaults import GENERATION_DEFAULTS
from campaign.core.errors import CampaignError
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

    def eval_items(self, model_spec: dict) -> int | None:
        """model.generation.eval_items (None: off)."""
        from campaign.core.defaults import generation_settings

        return generation_settings(model_spec)["eval_items"]

    def generated_score(self, model, tokenizer, run, split) -> float:
        """chat.generated_score: greedy generations scored by model.generation.metric."""
        return chat.generated_score(model, tokenizer, run, split)

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
    floor_spec = staticmethod(floors.floor_spec)
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

    def quantize_settings(self, section: dict) -> dict:
        """No sample generation beside the scores: its variants generate every answer."""
        return {"generation": None}

    def own_settings(self, model: dict, scoring: bool = True) -> dict:
        """TaskModule.own_settings, but the metric is kept when model.generation.eval_items is
        set: the train stage then scores with it (the generated-score curve, train.select's
        choice), so it is in the run spec and its id."""
        judged = (model.get(self.settings_key) or {}).get("eval_items") is not None
        return super().own_settings(model, scoring=scoring or judged)

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
    def init_family(self) -> str:
        """A small Llama: grouped-query attention (init_config)."""
        return "llama"

    def init_fields(self, args, fields: dict) -> dict:
        """Either --messages-column or --prompt-column and --response-column (the label
        column, if any, only stratifies the split); no --text-column."""
        talk = {"prompt": args.prompt_column, "response": args.response_column}
        if args.messages_column:
            talk = {"messages": args.messages_column}
        if not all(talk.values()) or (args.messages_column and args.prompt_column):
            raise CampaignError(
                "--task generation: name --messages-column, or both --prompt-column and "
                "--response-column"
            )
        if args.text_column:
            raise CampaignError("--text-column: not used by --task generation (the prompt is)")
        return {**fields, **talk}

    def init_config(self, config: dict) -> None:
        """Grouped-query attention: 4 heads, 2 key/value heads."""
        config.update(num_attention_heads=4, num_key_value_heads=2)

    def init_lowercase(self) -> bool:
        """An answer's capitals are part of it."""
        return False

    def init_generation(self, records, folder, train_tokenizers, longest):
        """model.chat_template and model.generation, and the formatted conversations' token
        lengths. A pretrained folder: its tokenizer and its chat template (none when it has no
        template); lengths are of the tokenized template, prompt and response. from_config: the
        plain template and the tokenizers the run trains, each on the conversations it was
        trained on. max_new_tokens: the longest response's tokens plus EOS, rounded up; the
        quantile: no more answers cut than model.generation.max_truncated_share allows (a cut
        answer teaches the model to stop early)."""
        from campaign.data import dedup_text

        talks = [json.loads(cell) for cell in records["messages"]]
        tok = None
        if folder is not None and (folder / "tokenizer_config.json").is_file():
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(str(folder))
        if tok is not None:
            setting = "model" if getattr(tok, "chat_template", None) else "none"
            pairs = [(tok, len(talks))]
        else:
            setting = "none"
            pairs = train_tokenizers([dedup_text(t) for t in talks]) if folder is None else []
        template = chat.resolve_template(setting, tok, Path(".")) if tok else chat.PLAIN_TEMPLATE
        lengths = [[chat.full_length(t, template, talk) for talk in talks[:n]] for t, n in pairs]
        answers = [chat.response_length(t, talk) for t, _n in pairs for talk in talks]
        # The longest response: a cut generation scores lower for no fault of the model.
        settings = {**dict(GENERATION_DEFAULTS), "max_new_tokens": longest(answers)}
        keys = {"chat_template": setting, "generation": settings}
        return keys, lengths, 1.0 - settings["max_truncated_share"]

    def init_model_text(self, model: dict, flow) -> list[str]:
        """model.chat_template and model.generation's keys."""
        rows = [
            f"  chat_template: {flow(model['chat_template'])}   # model | none | a Jinja file",
            "  # Generation on validation and test at the end of each run, scored per item.",
            "  generation:",
        ]
        return rows + [f"    {k}: {flow(v)}" for k, v in model["generation"].items()]

    def decision_key(self) -> str:
        return "model.generation.metric"

    # ------------------------------------------------------------------ end init

    # ------------------------------------------------------------------ report
    def report_data(self, splits, model_folder, specs, root):
        """Per split: records, prompt and response tokens (median, p95, max) with the runs'
        tokenizer and template, the share of answers each train.max_length cuts (lengths.py)."""
        from campaign.tasks.generation.lengths import report_data

        return report_data(splits, model_folder, specs, root)

    # ------------------------------------------------------------------ end report


TASK = Generation()
