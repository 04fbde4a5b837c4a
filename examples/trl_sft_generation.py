"""A TRL `SFTTrainer` script for the generation task (prompt -> response) that keeps the campaign's
trainer contract (docs/trainer-contract.md). Point train.command at it:

    train:
      command:
        argv: [python, examples/trl_sft_generation.py]
        files: [examples/trl_sft_generation.py]
        packages: [trl, transformers, accelerate, datasets]

What an existing SFTTrainer script needs for the contract is marked "CONTRACT" below: the
contract's callback (campaign.train.contract, shipped with the campaign: it reads the run spec,
turns the recipe into SFTConfig arguments, logs progress lines, stops on a signal with a
checkpoint and exits 75, resumes, saves the model and tokenizer to output_dir), the chat
template the campaign scores with, and the spec's model and train split.

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
import sys
from pathlib import Path

import datasets
import pandas as pd
import torch
import transformers as tf
import trl
import yaml

from campaign.train.contract import Contract  # CONTRACT


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


def lora_config(lora: dict | None):
    """train.lora as peft's LoraConfig (None: a full fine-tune). On a pretrained base the saved
    model is the adapter, which names its base; the campaign scores it over that base."""
    if lora is None:
        return None
    import peft

    return peft.LoraConfig(
        r=lora["r"],
        lora_alpha=lora["alpha"],
        lora_dropout=lora["dropout"],
        target_modules=list(lora["target_modules"]),
        task_type="CAUSAL_LM",
    )


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
    contract = Contract.from_env()  # CONTRACT
    spec, recipe = contract.spec, contract.spec["recipe"]
    tokenizer = tf.AutoTokenizer.from_pretrained(spec["tokenizer"])
    tokenizer.chat_template = spec["chat_template"]  # CONTRACT: the template the campaign scores
    model = build_model(spec, tokenizer)
    # CONTRACT: the recipe's keys win over the config file's.
    args = trl.SFTConfig(
        **{**config_file(sys.argv[1:]), **contract.trainer_args(handled=("lora",))},
        max_length=recipe["max_length"],
        completion_only_loss=True,
    )
    trainer = trl.SFTTrainer(
        model=model,
        args=args,
        train_dataset=conversations(spec["splits"]["train"]),
        processing_class=tokenizer,
        callbacks=[contract],  # CONTRACT
        peft_config=lora_config(recipe["lora"]),  # train.lora: handled above
    )
    trainer.train(resume_from_checkpoint=contract.resume)  # CONTRACT
    return contract.finish(trainer, tokenizer)  # CONTRACT: exit 75, or the model saved


if __name__ == "__main__":
    sys.exit(main())
