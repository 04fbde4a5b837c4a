"""A TRL `SFTTrainer` script for the generation task (prompt -> response) that keeps the campaign's
trainer contract (docs/trainer-contract.md). Point train.command at it:

    train:
      command:
        argv: [python, examples/trl_sft_generation.py]
        files: [examples/trl_sft_generation.py]
        packages: [trl, transformers, accelerate, datasets]

What an existing SFTTrainer script needs for the contract is marked "CONTRACT" below: read the run
spec, format with the chat template the campaign scores with, log progress lines, stop on a signal
with a checkpoint and exit 75, resume, save the model and tokenizer to output_dir. It imports
nothing from the campaign.

An existing `trl sft` config file can come along: `argv: [python, examples/trl_sft_generation.py,
my_sft.yaml]` (list it in `files` too). Its SFTConfig keys apply; the keys the campaign decides
(the recipe's lr, steps, batch, schedule, seed, lengths, precision, the paths) are the run spec's,
and the model and the data are the spec's (model_name_or_path, dataset_name and the like are
ignored, and named on stdout).

The loss: TRL's prompt-completion format, so only the last assistant turn of each conversation is
a target (completion_only_loss). The built-in loop also trains on earlier assistant turns of a
multi-turn conversation; on prompt -> response pairs the two train on the same tokens.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import datasets
import pandas as pd
import torch
import transformers as tf
import trl
import yaml

PREEMPTED_EXIT = 75  # CONTRACT: "checkpointed, run me again"
SCHEDULES = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}


def conversations(path: str) -> datasets.Dataset:
    """A split file's conversations as TRL's conversational prompt-completion records: the
    messages before the last assistant turn are the prompt, that turn the completion."""
    frame = pd.read_parquet(path)
    talks = [json.loads(cell) for cell in frame["messages"]]
    return datasets.Dataset.from_list(
        [{"prompt": talk[:-1], "completion": talk[-1:]} for talk in talks]
    )


def build_model(spec: dict, tokenizer):
    model = spec["model"]
    if model["source"] != "from_config":
        return tf.AutoModelForCausalLM.from_pretrained(model["source"], dtype=torch.float32)
    c = model["config"]
    torch.manual_seed(spec["seed"])
    config = tf.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=c["hidden_size"],
        num_hidden_layers=c["num_hidden_layers"],
        num_attention_heads=c["num_attention_heads"],
        num_key_value_heads=c["num_key_value_heads"],
        intermediate_size=c["intermediate_size"],
        max_position_embeddings=c["max_position_embeddings"],
        attention_dropout=c.get("dropout", 0.0),
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    return tf.LlamaForCausalLM(config)


class Contract(tf.TrainerCallback):
    """CONTRACT: a progress line per step; on SIGTERM/SIGUSR1 save at the step's end and stop."""

    def __init__(self, progress_file: str):
        self.progress_file = progress_file
        self.signalled: int | None = None
        self.tokens_before = 0
        for sig in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(sig, self.note)

    def note(self, signum, _frame) -> None:
        self.signalled = signum

    def on_train_begin(self, args, state, control, **kwargs):
        # Resumed: the count restored from the checkpoint, so the next line has its step's tokens.
        self.tokens_before = int(state.num_input_tokens_seen)

    def on_step_end(self, args, state, control, **kwargs):
        if self.signalled is not None:
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "loss" not in logs:
            return
        seen = int(state.num_input_tokens_seen)
        line = {
            "step": state.global_step,
            "loss": logs["loss"],
            "lr": logs.get("learning_rate"),
            "grad_norm": logs.get("grad_norm"),
            "tokens": seen - self.tokens_before,
        }
        self.tokens_before = seen
        with open(self.progress_file, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


def config_file(argv: list[str]) -> dict:
    """The SFTConfig keys of a `trl sft` config file named on the command line (none: {})."""
    if not argv:
        return {}
    raw = yaml.safe_load(Path(argv[0]).read_text()) or {}
    fields = trl.SFTConfig.__dataclass_fields__
    ignored = sorted(k for k in raw if k not in fields)
    if ignored:
        print(f"{argv[0]}: not SFTConfig keys, the run spec decides them: {', '.join(ignored)}")
    return {k: v for k, v in raw.items() if k in fields}


def main() -> int:
    spec = json.loads(Path(os.environ["CAMPAIGN_RUN_SPEC"]).read_text())  # CONTRACT
    recipe = spec["recipe"]
    tokenizer = tf.AutoTokenizer.from_pretrained(spec["tokenizer"])
    tokenizer.chat_template = spec["chat_template"]  # CONTRACT: the template the campaign scores
    model = build_model(spec, tokenizer)
    decided = dict(
        output_dir=spec["checkpoint_dir"],  # CONTRACT: checkpoints where a rerun finds them
        max_steps=recipe["max_steps"],
        per_device_train_batch_size=recipe["micro_batch"],
        gradient_accumulation_steps=recipe["grad_accum"],
        learning_rate=recipe["lr"],
        weight_decay=recipe["weight_decay"],
        warmup_steps=recipe["warmup_steps"],
        lr_scheduler_type=SCHEDULES[recipe["schedule"]],
        max_grad_norm=recipe["max_grad_norm"] or 0.0,
        max_length=recipe["max_length"],
        completion_only_loss=True,
        seed=spec["seed"],
        data_seed=spec["seed"],
        save_strategy="steps",
        save_steps=recipe["checkpoint_every"],
        save_total_limit=recipe["keep_checkpoints"],
        logging_steps=1,
        include_num_input_tokens_seen="non_padding",
        report_to="none",
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
        bf16=recipe["precision"] == "bf16",
        fp16=recipe["precision"] == "fp16",
    )
    args = trl.SFTConfig(**{**config_file(sys.argv[1:]), **decided})  # the recipe wins
    contract = Contract(spec["progress_file"])
    trainer = trl.SFTTrainer(
        model=model,
        args=args,
        train_dataset=conversations(spec["splits"]["train"]),
        processing_class=tokenizer,
        callbacks=[contract],
    )
    # CONTRACT: resume from the newest checkpoint a signalled (or killed) job left behind.
    resume = any(Path(spec["checkpoint_dir"]).glob("checkpoint-*"))
    trainer.train(resume_from_checkpoint=True if resume else None)
    if contract.signalled is not None and trainer.state.global_step < recipe["max_steps"]:
        print(f"signal {contract.signalled}: checkpointed step {trainer.state.global_step}")
        return PREEMPTED_EXIT
    # CONTRACT: the model and its tokenizer (save_pretrained: trainer.save_model would add
    # training_args.bin, which holds this job's paths and so differs on every rerun).
    trainer.model.save_pretrained(spec["output_dir"])
    tokenizer.save_pretrained(spec["output_dir"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
