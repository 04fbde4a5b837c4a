"""A classifier's peft adapter written by a command (train.command): scored merged into the run's
base with the head it trained, and refused in one line when it was saved without that head (the
base has none for the run's labels, so a reader would score with a freshly drawn one)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file, save_file
from test_command import EXAMPLE, command_spec
from trainkit import context, tiny_spec, write_splits

from campaign.core.errors import CampaignError
from campaign.train.command import adopt_adapter, stage
from campaign.train.models import BASE_FILE, adapter_info, load_run_model

LORA = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["query", "value"]}
TASK = "sequence_classification"


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory) -> tuple[dict, Path, list[str]]:
    """The splits, a tiny "pretrained" BERT encoder folder (no classification head, as a
    checkpoint on a hub is) with its tokenizer, and the run's labels."""
    from campaign.train import models
    from campaign.train.loop import read_data

    folder = tmp_path_factory.mktemp("adapter")
    splits = write_splits(folder / "splits", n_train=32, n_eval=8)
    data = read_data(splits)
    labels = models.label_names(data.train.labels)
    spec = tiny_spec()
    tokenizer = models.make_tokenizer(spec["model"], data.train.texts, None)
    encoder = models.build_model(spec["model"], tokenizer, labels, 0, None).bert
    encoder.save_pretrained(folder / "base")
    tokenizer.save_pretrained(folder / "base")
    return splits, folder / "base", labels


def _peft_adapter(base: Path, labels: list[str], folder: Path, **lora) -> Path:
    """A real peft adapter over `base`, saved with PeftModel.save_pretrained."""
    import peft
    import transformers as tf

    torch.manual_seed(0)
    model = tf.AutoModelForSequenceClassification.from_pretrained(base, num_labels=len(labels))
    config = peft.LoraConfig(r=2, target_modules=["query", "value"], **lora)
    peft.get_peft_model(model, config).save_pretrained(folder)
    return folder


def test_a_classifier_adapter_saved_without_its_head_is_refused_in_one_line(pretrained, tmp_path):
    _, base, labels = pretrained
    # No task_type, no modules_to_save: peft saves the LoRA tensors only.
    headless = _peft_adapter(base, labels, tmp_path / "headless")
    with pytest.raises(CampaignError) as refused:
        adopt_adapter(headless, base, labels, TASK)
    message = str(refused.value)
    assert "\n" not in message and str(headless) in message, message
    assert "modules_to_save empty" in message and "classifier.weight" in message
    assert 'modules_to_save=["classifier"]' in message and "merged model" in message
    assert not (headless / BASE_FILE).exists()
    # The task is the run spec's: an adapter calling itself CAUSAL_LM is a classifier here.
    path = headless / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "task_type": "CAUSAL_LM"}))
    with pytest.raises(CampaignError, match="holds no trained classification head"):
        adopt_adapter(headless, base, labels, TASK)

    # SEQ_CLS names the head in modules_to_save; weights saved without it are refused too.
    whole = _peft_adapter(base, labels, tmp_path / "whole", task_type="SEQ_CLS")
    stripped = _peft_adapter(base, labels, tmp_path / "stripped", task_type="SEQ_CLS")
    weights = stripped / "adapter_model.safetensors"
    tensors = load_file(weights)
    save_file({k: v for k, v in tensors.items() if ".classifier." not in k}, weights)
    with pytest.raises(CampaignError, match="modules_to_save \\['classifier', 'score'\\]"):
        adopt_adapter(stripped, base, labels, TASK)
    adopt_adapter(whole, base, labels, TASK)  # with its head: taken
    assert adapter_info(whole)["task"] == TASK


@pytest.mark.slow(minutes=1)
def test_the_hf_example_under_lora_saves_its_head_and_is_scored_with_it(pretrained, tmp_path):
    """train.lora on a pretrained base: the HF example applies it (naming it handled), saves the
    adapter with its trained head, and the campaign scores the base merged with both."""
    splits, base, labels = pretrained
    spec = command_spec([sys.executable, EXAMPLE], [EXAMPLE], max_steps=4, lora=LORA)
    spec["model"]["source"] = str(base)
    ctx = context(spec, {**splits, "base_model": [base]}, tmp_path)
    stage(ctx)
    folder = ctx.outputs["model"]
    assert not list(folder.glob("model*.safetensors"))  # an adapter, not a merged model
    assert adapter_info(folder)["task"] == TASK
    frame = pd.read_parquet(ctx.outputs["predictions_validation"])
    assert len(frame) == 8 and set(frame["prediction"]) <= set(labels)
    # The head scored is the one the command trained, not a fresh draw over the base.
    trained = load_file(folder / "adapter_model.safetensors")
    head = next(v for k, v in trained.items() if k.endswith("classifier.weight"))
    merged = load_run_model(folder, TASK, base)
    assert merged.classifier.weight.equal(head)
