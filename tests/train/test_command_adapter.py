"""A classifier's peft adapter written by a command (train.command): scored merged into the run's
base with the head it trained, and refused in one line when it was saved without that head (the
base has none for the run's labels, so a reader would score with a freshly drawn one)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file, save_file
from test_command import EXAMPLE, command_spec
from trainkit import context, save_tiny_base, write_splits

from campaign.core.errors import CampaignError
from campaign.train.command import adopt_adapter, stage
from campaign.train.models import BASE_FILE, adapter_info, load_run_model

LORA = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["query", "value"]}
TASK = "sequence_classification"


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory) -> tuple[dict, Path, list[str]]:
    """The splits, a tiny "pretrained" BERT encoder folder with its tokenizer, the labels."""
    folder = tmp_path_factory.mktemp("adapter")
    splits = write_splits(folder / "splits", n_train=32, n_eval=8)
    return splits, *save_tiny_base(folder / "base", splits)


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
    assert "lacks the classification head's classifier (modules_to_save empty)" in message
    assert 'modules_to_save=["classifier"]' in message and "merged model" in message
    assert not (headless / BASE_FILE).exists()
    # The task is the run spec's: an adapter calling itself CAUSAL_LM is a classifier here.
    path = headless / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "task_type": "CAUSAL_LM"}))
    with pytest.raises(CampaignError, match="lacks the classification head's classifier"):
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


# Tiny from-config encoders whose classifier adds more than `classifier` to the encoder:
# DistilBERT a pre_classifier, DeBERTa-v2 a pooler. (config class, LoRA targets)
ENCODERS = {
    "distilbert": (lambda vocab: __import__("transformers").DistilBertConfig(
        vocab_size=vocab, dim=32, n_layers=1, n_heads=2, hidden_dim=64,
        max_position_embeddings=64), ["q_lin", "v_lin"]),
    "deberta-v2": (lambda vocab: __import__("transformers").DebertaV2Config(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64), ["query_proj", "value_proj"]),
}  # fmt: skip


def _base(kind: str, bert: Path, folder: Path, head_labels: int | None = None, bin_=False):
    """A tiny `kind` base with the BERT fixture's tokenizer: the encoder alone (as a hub
    checkpoint is), or with head_labels: a whole classifier with a trained head for that many
    labels (saved as a PyTorch .bin with bin_)."""
    import transformers as tf

    tokenizer = tf.AutoTokenizer.from_pretrained(bert)
    config = ENCODERS[kind][0](len(tokenizer))
    config.pad_token_id = tokenizer.pad_token_id
    torch.manual_seed(1)
    if head_labels is None:
        model = tf.AutoModel.from_config(config)
    else:
        config.num_labels = head_labels
        model = tf.AutoModelForSequenceClassification.from_config(config)
        with torch.no_grad():  # "trained": not what a fresh draw gives
            for p in model.classifier.parameters():
                p.add_(torch.randn_like(p))
    model.save_pretrained(folder)
    if bin_:
        (folder / "model.safetensors").unlink()
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
    tokenizer.save_pretrained(folder)
    return folder


def _train_adapter(base: Path, labels: list[str], texts: list[str], folder: Path, **lora):
    """A peft adapter over `base` after a few real AdamW steps (LoRA and whatever
    modules_to_save holds move away from their first draw), saved with its tokenizer; and the
    trained model's logits on `texts`, which the scored model must reproduce."""
    import peft
    import transformers as tf

    tokenizer = tf.AutoTokenizer.from_pretrained(base)
    targets = {"bert": ["query", "value"], **{k: v[1] for k, v in ENCODERS.items()}}[
        tf.AutoConfig.from_pretrained(base).model_type
    ]
    torch.manual_seed(2)  # another draw than the scorer's (seed 0) for any fresh module
    model = tf.AutoModelForSequenceClassification.from_pretrained(
        base,
        num_labels=len(labels),
        ignore_mismatched_sizes=True,  # a head for other labels
    )
    model = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=targets, **lora))
    batch = tokenizer(texts, padding=True, truncation=True, max_length=32, return_tensors="pt")
    target = torch.arange(len(texts)) % len(labels)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(3):
        model(**batch, labels=target).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    with torch.no_grad():
        logits = model(**batch).logits
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, batch, logits


def _scored_logits(folder: Path, base: Path, batch) -> torch.Tensor:
    """The logits of the model the campaign scores: the base with the adapter merged."""
    with torch.no_grad():
        return load_run_model(folder, TASK, base)(**batch).logits


@pytest.mark.parametrize("kind", sorted(ENCODERS))
def test_an_encoder_heads_modules_are_taken_from_the_adapter_and_scored_as_trained(
    pretrained, tmp_path, kind
):
    """peft's SEQ_CLS saves what its modules_to_save ("classifier", "score") match as a name's
    suffix: DistilBERT's pre_classifier too, DeBERTa's pooler not. An adapter is taken when the
    scored model's logits are the trained model's, and refused, naming the module and the
    modules_to_save to set, when a fresh draw would replace a module it trained through."""
    splits, bert, labels = pretrained
    texts = list(pd.read_parquet(splits["train"][0])["text"][:6])
    base = _base(kind, bert, tmp_path / "base")
    seq_cls, batch, trained = _train_adapter(base, labels, texts, tmp_path / "seq_cls",
                                             task_type="SEQ_CLS")  # fmt: skip
    extra = {"distilbert": "pre_classifier", "deberta-v2": "pooler"}[kind]
    if kind == "distilbert":  # "classifier" matches pre_classifier: both saved, taken
        adopt_adapter(seq_cls, base, labels, TASK)
        assert torch.allclose(_scored_logits(seq_cls, base, batch), trained, atol=1e-5)
        weights = seq_cls / "adapter_model.safetensors"  # without it, as a hand-made one
        save_file({k: v for k, v in load_file(weights).items() if extra not in k}, weights)
        (seq_cls / BASE_FILE).unlink()
    with pytest.raises(CampaignError) as refused:
        adopt_adapter(seq_cls, base, labels, TASK)
    message = str(refused.value)
    assert f"lacks the classification head's {extra} (modules_to_save [" in message, message
    assert f'set modules_to_save=["{extra}", "classifier"] in its LoraConfig' in message
    assert "\n" not in message and not (seq_cls / BASE_FILE).exists()
    if kind == "deberta-v2":  # the refusal is no caution: merged, it scores another model
        import peft

        torch.manual_seed(0)
        fresh = __import__("transformers").AutoModelForSequenceClassification.from_pretrained(
            base, num_labels=len(labels))  # fmt: skip
        merged = peft.PeftModel.from_pretrained(fresh, seq_cls).eval()
        with torch.no_grad():
            assert not torch.allclose(merged(**batch).logits, trained, atol=1e-3)
    # With the module named as the line says: taken, and scored as trained.
    whole, batch, trained = _train_adapter(base, labels, texts, tmp_path / "whole",
                                           modules_to_save=[extra, "classifier"])  # fmt: skip
    adopt_adapter(whole, base, labels, TASK)
    assert torch.allclose(_scored_logits(whole, base, batch), trained, atol=1e-5)


@pytest.mark.parametrize("bin_", [False, True], ids=["safetensors", "bin"])
def test_a_base_that_holds_a_trained_head_for_the_runs_labels_needs_none_in_the_adapter(
    pretrained, tmp_path, bin_
):
    """The base a classifier was saved as (its head for as many labels): the head comes from
    the base when the adapter is merged, so a LoRA-only adapter scores as trained. A head for
    another label count is not loaded (a fresh one is drawn): refused, naming it."""
    splits, bert, labels = pretrained
    texts = list(pd.read_parquet(splits["train"][0])["text"][:6])
    base = _base("distilbert", bert, tmp_path / "base", head_labels=len(labels), bin_=bin_)
    lora_only, batch, trained = _train_adapter(base, labels, texts, tmp_path / "lora")
    adopt_adapter(lora_only, base, labels, TASK)
    assert torch.allclose(_scored_logits(lora_only, base, batch), trained, atol=1e-5)

    other = _base("distilbert", bert, tmp_path / "other", head_labels=len(labels) + 1, bin_=bin_)
    headless, *_ = _train_adapter(other, labels, texts, tmp_path / "headless")
    with pytest.raises(CampaignError) as refused:
        adopt_adapter(headless, other, labels, TASK)
    # pre_classifier's shape does not depend on the labels: the base's is taken.
    assert "lacks the classification head's classifier (modules_to_save empty)" in str(
        refused.value
    ) and 'set modules_to_save=["classifier"]' in str(refused.value)


def test_a_base_saved_without_its_pooler_needs_the_pooler_in_the_adapter(pretrained, tmp_path):
    """A BERT base saved as a masked-LM checkpoint holds no pooler, which the sequence classifier
    runs every logit through: a SEQ_CLS adapter (classifier only) would be scored with a freshly
    drawn pooler. Refused, naming it; with the modules_to_save the line says, scored as
    trained."""
    import transformers as tf

    splits, bert, labels = pretrained
    texts = list(pd.read_parquet(splits["train"][0])["text"][:6])
    encoder = tf.AutoModel.from_pretrained(bert)
    mlm = tf.BertForMaskedLM(encoder.config)
    mlm.bert.load_state_dict(encoder.state_dict(), strict=False)  # all but the pooler
    base = tmp_path / "base"
    mlm.save_pretrained(base)
    tf.AutoTokenizer.from_pretrained(bert).save_pretrained(base)
    seq_cls, batch, trained = _train_adapter(base, labels, texts, tmp_path / "seq_cls",
                                             task_type="SEQ_CLS")  # fmt: skip
    with pytest.raises(CampaignError) as refused:
        adopt_adapter(seq_cls, base, labels, TASK)
    message = str(refused.value)
    assert "lacks pooler (modules_to_save [" in message, message
    assert 'set modules_to_save=["pooler", "classifier"]' in message and "\n" not in message
    assert not (seq_cls / BASE_FILE).exists()
    whole, batch, trained = _train_adapter(base, labels, texts, tmp_path / "whole",
                                           modules_to_save=["pooler", "classifier"])  # fmt: skip
    adopt_adapter(whole, base, labels, TASK)
    assert torch.allclose(_scored_logits(whole, base, batch), trained, atol=1e-5)


def test_an_encoder_saved_under_legacy_tensor_names_is_not_refused(pretrained, tmp_path):
    """transformers renames some checkpoints' encoder tensors as it loads them (BERT's legacy
    LayerNorm.gamma/beta): the base holds those modules, so an adapter over it is taken and
    scored as trained, not refused for tensors it reads under other names."""
    import shutil

    splits, bert, labels = pretrained
    texts = list(pd.read_parquet(splits["train"][0])["text"][:6])
    base = tmp_path / "base"
    shutil.copytree(bert, base)
    weights = base / "model.safetensors"
    legacy = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
              "LayerNorm.beta"): v for k, v in load_file(weights).items()}  # fmt: skip
    assert any(k.endswith("LayerNorm.gamma") for k in legacy)
    save_file(legacy, weights, metadata={"format": "pt"})
    folder, batch, trained = _train_adapter(
        base, labels, texts, tmp_path / "a", task_type="SEQ_CLS"
    )
    adopt_adapter(folder, base, labels, TASK)
    assert torch.allclose(_scored_logits(folder, base, batch), trained, atol=1e-5)
    # A base that lacks one encoder tensor (the others of its module held): a reader draws it
    # afresh, so the same adapter no longer scores as trained: refused, naming its module.
    (folder / BASE_FILE).unlink()
    save_file({k: v for k, v in legacy.items() if "token_type_embeddings" not in k}, weights,
              metadata={"format": "pt"})  # fmt: skip
    with pytest.raises(CampaignError) as refused:
        adopt_adapter(folder, base, labels, TASK)
    message = str(refused.value)
    assert "lacks embeddings (modules_to_save" in message, message
    assert f"the base {base} holds no trained one" in message and "\n" not in message
    assert not (folder / BASE_FILE).exists()


def test_an_adapter_with_resized_embeddings_is_refused_before_scoring(pretrained, tmp_path):
    """Tokens added and the embeddings resized: peft saves the resized embeddings with the
    adapter, and merging them into the base (its own vocabulary) crashes scoring after the whole
    run. Refused by the tensor's shape, naming the file, the tensor and what to save instead."""
    import peft
    import transformers as tf

    _, base, labels = pretrained
    tokenizer = tf.AutoTokenizer.from_pretrained(base)
    vocab = len(tokenizer)
    tokenizer.add_tokens(["<order_id>", "<sku>"])
    model = tf.AutoModelForSequenceClassification.from_pretrained(base, num_labels=len(labels))
    model.resize_token_embeddings(len(tokenizer))
    config = peft.LoraConfig(task_type="SEQ_CLS", r=2, target_modules=["query", "value"])
    folder = tmp_path / "resized"
    peft.get_peft_model(model, config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    hidden = model.config.hidden_size
    expected = (
        f"train.command: {folder / 'adapter_model.safetensors'} holds "
        f"bert.embeddings.word_embeddings.weight of shape [{vocab + 2}, {hidden}], but the "
        f"run's base has [{vocab}, {hidden}]"
    )
    with pytest.raises(CampaignError) as refused:
        adopt_adapter(folder, base, labels, TASK)
    message = str(refused.value)
    assert message.startswith(expected) and "save the merged model" in message, message
    assert not (folder / BASE_FILE).exists()


def test_an_adapter_file_peft_would_load_nothing_from_is_refused(pretrained, tmp_path):
    """PeftModel.from_pretrained only warns of tensors outside its base_model.model. names and
    loads none of them (a fresh head and no LoRA scored); a LoRA file with no LoRA tensor scores
    the base. Each refused in one line naming the file and a tensor."""
    _, base, labels = pretrained
    folder = _peft_adapter(base, labels, tmp_path / "a", task_type="SEQ_CLS")
    weights = folder / "adapter_model.safetensors"
    tensors = load_file(weights)
    save_file({k.removeprefix("base_model.model."): v for k, v in tensors.items()}, weights)
    with pytest.raises(CampaignError) as refused:
        adopt_adapter(folder, base, labels, TASK)
    message = str(refused.value)
    assert message.startswith(f"train.command: {weights} holds "), message
    assert "outside peft's 'base_model.model.' names" in message and "\n" not in message
    save_file({k: v for k, v in tensors.items() if ".lora_" not in k}, weights)
    with pytest.raises(CampaignError, match=re.escape(f"{weights} holds no LoRA tensor")):
        adopt_adapter(folder, base, labels, TASK)
    save_file(tensors, weights)
    adopt_adapter(folder, base, labels, TASK)  # as peft saved it: taken


def test_a_causal_adapter_is_checked_as_a_classifiers_is(tmp_path):
    """A generation run's adapter: embeddings resized for added tokens, or a modules_to_save
    module stripped from the file, would crash or score the base's copy; refused in one line.
    As peft saves it, taken."""
    import peft
    from genkit import tiny_llama, tiny_tokenizer

    base = tmp_path / "base"
    tokenizer = tiny_tokenizer()
    tiny_llama().save_pretrained(base)
    tokenizer.save_pretrained(base)
    config = peft.LoraConfig(task_type="CAUSAL_LM", r=2, target_modules=["q_proj", "v_proj"],
                             modules_to_save=["lm_head"])  # fmt: skip
    whole = tmp_path / "whole"
    peft.get_peft_model(tiny_llama(), config).save_pretrained(whole)
    adopt_adapter(whole, base, [], "generation")
    (whole / BASE_FILE).unlink()
    weights = whole / "adapter_model.safetensors"
    save_file({k: v for k, v in load_file(weights).items() if "lm_head" not in k}, weights)
    with pytest.raises(CampaignError, match="names lm_head in modules_to_save \\['lm_head'\\] but"):
        adopt_adapter(whole, base, [], "generation")
    import transformers as tf

    resized = tf.AutoModelForCausalLM.from_pretrained(base)  # peft compares with its config
    resized.resize_token_embeddings(len(tokenizer) + 3)
    lora = peft.LoraConfig(task_type="CAUSAL_LM", r=2, target_modules=["q_proj", "v_proj"])
    peft.get_peft_model(resized, lora).save_pretrained(tmp_path / "resized")
    vocab = len(tokenizer)
    expected = f"holds model.embed_tokens.weight of shape [{vocab + 3}, 32], but the run's base "
    with pytest.raises(CampaignError, match=re.escape(f"{expected}has [{vocab}, 32]")):
        adopt_adapter(tmp_path / "resized", base, [], "generation")
    # LoRA on the resized embeddings: peft saves them as embed_tokens.base_layer, or (with
    # save_embedding_layers=False) only lora_embedding_A over the larger vocabulary.
    on_embeddings = peft.LoraConfig(task_type="CAUSAL_LM", r=2, target_modules=["embed_tokens"])
    wrapped = peft.get_peft_model(resized, on_embeddings)
    for name, options in (("base_layer", {}), ("lora_only", {"save_embedding_layers": False})):
        wrapped.save_pretrained(tmp_path / name, **options)
        with pytest.raises(CampaignError) as refused:
            adopt_adapter(tmp_path / name, base, [], "generation")
        message = str(refused.value)
        assert "does not fit the run's base's" in message or expected in message, message
        assert "save the merged model with its tokenizer" in message and "\n" not in message
    assert "lora_embedding_A of shape [2, " in message, message
    assert not (whole / BASE_FILE).exists() and not (tmp_path / "resized" / BASE_FILE).exists()


def test_a_tied_output_layer_modules_to_save_names_must_be_in_the_adapter_file(tmp_path):
    """A tied lm_head (one parameter under two names) that modules_to_save wraps: peft reads it
    from the adapter file alone, so a file without it fails scoring with a KeyError; refused."""
    import peft
    import transformers as tf
    from genkit import tiny_tokenizer

    tokenizer = tiny_tokenizer()
    config = tf.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                            num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                            tie_word_embeddings=True, pad_token_id=0)  # fmt: skip
    base = tmp_path / "base"
    tf.LlamaForCausalLM(config).save_pretrained(base)
    lora = peft.LoraConfig(task_type="CAUSAL_LM", r=2, target_modules=["q_proj", "v_proj"],
                           modules_to_save=["lm_head"])  # fmt: skip
    model = tf.AutoModelForCausalLM.from_pretrained(base)
    peft.get_peft_model(model, lora).save_pretrained(tmp_path / "a")
    adopt_adapter(tmp_path / "a", base, [], "generation")  # as peft saved it: taken
    (tmp_path / "a" / BASE_FILE).unlink()
    weights = tmp_path / "a" / "adapter_model.safetensors"
    save_file({k: v for k, v in load_file(weights).items() if "lm_head" not in k}, weights)
    with pytest.raises(CampaignError, match="names lm_head in modules_to_save \\['lm_head'\\] but"):
        adopt_adapter(tmp_path / "a", base, [], "generation")


def test_a_prompt_tuning_classifier_is_taken_and_scored_as_trained(pretrained, tmp_path):
    """Prompt learning saves the head under base_model. (not peft's LoRA prefix): taken, and
    scored with its trained head."""
    import peft
    import transformers as tf

    splits, base, labels = pretrained
    texts = list(pd.read_parquet(splits["train"][0])["text"][:6])
    tokenizer = tf.AutoTokenizer.from_pretrained(base)
    torch.manual_seed(2)
    model = tf.AutoModelForSequenceClassification.from_pretrained(base, num_labels=len(labels))
    config = peft.PromptTuningConfig(task_type="SEQ_CLS", num_virtual_tokens=4)
    model = peft.get_peft_model(model, config)
    batch = tokenizer(texts, padding=True, truncation=True, max_length=32, return_tensors="pt")
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(3):
        model(**batch, labels=torch.arange(len(texts)) % len(labels)).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    with torch.no_grad():
        trained = model(**batch).logits
    model.save_pretrained(tmp_path / "prompt")
    tokenizer.save_pretrained(tmp_path / "prompt")
    adopt_adapter(tmp_path / "prompt", base, labels, TASK)
    assert torch.allclose(_scored_logits(tmp_path / "prompt", base, batch), trained, atol=1e-5)


def test_an_adapter_head_for_another_label_count_is_refused_before_scoring(pretrained, tmp_path):
    """A head trained for 7 labels when the run has 6 would be adopted and crash at scoring,
    after the whole run: refused by its shape in the adapter's header (safetensors or .bin)."""
    import peft
    import transformers as tf

    _, base, labels = pretrained
    model = tf.AutoModelForSequenceClassification.from_pretrained(base, num_labels=len(labels) + 1)
    config = peft.LoraConfig(task_type="SEQ_CLS", r=2, target_modules=["query", "value"])
    folder = tmp_path / "seven"
    peft.get_peft_model(model, config).save_pretrained(folder)
    hidden = model.config.hidden_size
    expected = (
        f"holds classifier.weight of shape [{len(labels) + 1}, {hidden}], but the run's "
        f"{len(labels)} labels need [{len(labels)}, {hidden}]; train it with "
        f"num_labels={len(labels)}"
    )
    with pytest.raises(CampaignError, match=re.escape(expected)):
        adopt_adapter(folder, base, labels, TASK)
    weights = folder / "adapter_model.safetensors"
    torch.save(load_file(weights), folder / "adapter_model.bin")
    weights.unlink()
    with pytest.raises(CampaignError, match=re.escape(expected)):
        adopt_adapter(folder, base, labels, TASK)
    assert not (folder / BASE_FILE).exists()


def test_a_head_modules_to_save_names_must_be_in_the_adapter_file_whatever_the_base_holds(
    pretrained, tmp_path
):
    """peft loads a module modules_to_save wraps from the adapter's file alone: one stripped
    from it is not excused by the base's own (untrained) head for as many labels."""
    splits, bert, labels = pretrained
    texts = list(pd.read_parquet(splits["train"][0])["text"][:6])
    base = _base("distilbert", bert, tmp_path / "base", head_labels=len(labels))
    folder, *_ = _train_adapter(base, labels, texts, tmp_path / "seq_cls", task_type="SEQ_CLS")
    adopt_adapter(folder, base, labels, TASK)  # whole: taken
    (folder / BASE_FILE).unlink()
    weights = folder / "adapter_model.safetensors"
    save_file({k: v for k, v in load_file(weights).items() if ".classifier." not in k}, weights)
    with pytest.raises(CampaignError) as refused:
        adopt_adapter(folder, base, labels, TASK)
    message = str(refused.value)
    assert "names classifier in modules_to_save ['classifier', 'score']" in message, message
    assert "adapter_model.safetensors lacks them" in message and "\n" not in message
    assert not (folder / BASE_FILE).exists()


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
