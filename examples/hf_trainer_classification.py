"""A plain Hugging Face `Trainer` script for text classification that keeps the campaign's trainer
contract (docs/trainer-contract.md). Point train.command at it:

    train:
      command:
        argv: [python, examples/hf_trainer_classification.py]
        files: [examples/hf_trainer_classification.py]
        packages: [transformers, accelerate]

What an existing Trainer script needs for the contract is marked "CONTRACT" below: the
contract's callback (campaign.train.contract, shipped with the campaign: it reads the run spec,
turns the recipe into TrainingArguments, logs progress lines, stops on a signal with a checkpoint
and exits 75, resumes, saves the model and tokenizer to output_dir), and the spec's model,
labels and train split.
"""

from __future__ import annotations

import sys

import pandas as pd
import torch
import transformers as tf

from campaign.train.contract import Contract  # CONTRACT


class Examples(torch.utils.data.Dataset):
    """One split's texts, tokenized, with label ids."""

    def __init__(self, path: str, tokenizer, labels: list[str], max_length: int):
        frame = pd.read_parquet(path)
        self.encoded = tokenizer(list(frame["text"]), truncation=True, max_length=max_length)
        index = {name: i for i, name in enumerate(labels)}
        self.labels = [index[v] for v in frame["label"]]

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        return {**{k: v[i] for k, v in self.encoded.items()}, "labels": self.labels[i]}


def build_model(spec: dict, tokenizer):
    labels = spec["labels"]
    id2label = dict(enumerate(labels))
    label2id = {name: i for i, name in id2label.items()}
    model = spec["model"]
    if model["source"] != "from_config":
        return tf.AutoModelForSequenceClassification.from_pretrained(
            model["source"], num_labels=len(labels), id2label=id2label, label2id=label2id
        )
    c = model["config"]
    torch.manual_seed(spec["seed"])
    config = tf.BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=c["hidden_size"],
        num_hidden_layers=c["num_hidden_layers"],
        num_attention_heads=c["num_attention_heads"],
        intermediate_size=c["intermediate_size"],
        max_position_embeddings=c["max_position_embeddings"],
        hidden_dropout_prob=c.get("dropout", 0.1),
        attention_probs_dropout_prob=c.get("dropout", 0.1),
        pad_token_id=tokenizer.pad_token_id,
        num_labels=len(labels),
        id2label=id2label,
        label2id=label2id,
    )
    return tf.BertForSequenceClassification(config)


def with_lora(model, lora: dict | None):
    """train.lora as peft adapters (None: a full fine-tune). SEQ_CLS makes peft train and save
    the new classification head too (modules_to_save): the campaign refuses an adapter saved
    without its head, which would be scored with a freshly drawn one."""
    if lora is None:
        return model
    import peft

    config = peft.LoraConfig(
        r=lora["r"],
        lora_alpha=lora["alpha"],
        lora_dropout=lora["dropout"],
        target_modules=list(lora["target_modules"]),
        task_type="SEQ_CLS",
    )
    return peft.get_peft_model(model, config)


def main() -> int:
    contract = Contract.from_env()  # CONTRACT
    spec, recipe = contract.spec, contract.spec["recipe"]
    tokenizer = tf.AutoTokenizer.from_pretrained(spec["tokenizer"])
    model = with_lora(build_model(spec, tokenizer), recipe["lora"])
    train = Examples(spec["splits"]["train"], tokenizer, spec["labels"], recipe["max_length"])
    args = tf.TrainingArguments(**contract.trainer_args(handled=("lora",)))  # CONTRACT: the recipe
    # A sequence classifier's forward takes **kwargs, so the Trainer assumes it normalizes its
    # loss over the accumulated batch (num_items_in_batch) and does not divide by grad_accum;
    # its loss is a plain mean, so loss and gradients would come out grad_accum times too large.
    model.accepts_loss_kwargs = False
    trainer = tf.Trainer(
        model=model,
        args=args,
        train_dataset=train,
        data_collator=tf.DataCollatorWithPadding(tokenizer),
        callbacks=[contract],  # CONTRACT
    )
    trainer.train(resume_from_checkpoint=contract.resume)  # CONTRACT
    return contract.finish(trainer, tokenizer)  # CONTRACT: exit 75, or the model saved


if __name__ == "__main__":
    sys.exit(main())
