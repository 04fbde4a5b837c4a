"""Fine-tuning on a quantized base (train.base_quantization): LoRA adapters train in fp32 on an
int8 weight-only base (torchao); the run resumes bit for bit after a SIGKILL, its saved model
(dequantized base + merged adapters) predicts what the run wrote, the memory estimate counts the
int8 weights to the byte, and the settings the backend cannot run stop with one-line errors."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from trainkit import KILLED_JOB, REPO, context, killed_job_env, tiny_spec, write_splits

from campaign import memory
from campaign.core.errors import CampaignError
from campaign.core.hashing import hash_tree
from campaign.train import (
    SavedModel,
    Trainer,
    checkpoint,
    loss_sum,
    models,
    read_data,
    run_training,
)
from campaign.train.basequant import is_quantized, quantized_weight_names
from conftest import copy_project, snakemake

LORA = {"r": 4, "alpha": 8, "dropout": 0.1, "target_modules": ["query", "value"]}
INT8 = "int8_weight_only"
MAX_STEPS = 16
# The linears of one BERT block; with the pooler, what int8_weight_only quantizes.
BLOCK = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch):
    """Bitwise resume is a CPU claim (and nf4 must meet a machine without CUDA)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


def quant_spec(**train) -> dict:
    settings = dict(
        layers=2,
        lr=1.0e-2,
        max_steps=MAX_STEPS,
        checkpoint_every=5,
        eval_every=8,
        lora=LORA,
        base_quantization=INT8,
    )
    return tiny_spec(**{**settings, **train})


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, list[Path]]:
    return write_splits(tmp_path_factory.mktemp("splits"), n_train=120, n_eval=40)


@pytest.fixture(scope="module")
def reference(inputs, tmp_path_factory):
    """One uninterrupted quantized-base run through the training stage."""
    ctx = context(quant_spec(), inputs, tmp_path_factory.mktemp("reference"))
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    trainer = run_training(
        ctx.spec, ctx.inputs, ctx.outputs, ctx.work_dir, REPO, stream=io.StringIO()
    )
    return ctx, trainer


def test_lora_on_the_int8_base_learns(tmp_path):
    # 16 train examples, all in every step: the adapters and head fit them (overfit check).
    inputs = write_splits(tmp_path / "splits", n_train=16, n_eval=8)
    spec = quant_spec(lr=3.0e-2, max_steps=24, schedule="constant")
    trainer = Trainer(spec, read_data(inputs), tmp_path / "work", root=REPO, stream=io.StringIO())
    quantized = set(quantized_weight_names(trainer.model))
    expected = {
        f"base_model.model.bert.encoder.layer.{i}.{m}"
        + (".base_layer.weight" if m.endswith(("query", "value")) else ".weight")
        for i in range(2)
        for m in BLOCK
    } | {"base_model.model.bert.pooler.dense.weight"}
    assert quantized == expected
    q = trainer.model.base_model.model.bert.encoder.layer[0].attention.self.key.weight
    assert q.qdata.dtype == torch.int8
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_" in n or ".classifier." in n for n in trainable)
    _, before, count = trainer.scores("train")
    # Adapters in the first block get gradients: backward runs through the int8 matmuls above.
    trainer.run()
    first = trainer.model.base_model.model.bert.encoder.layer[0].attention.self.query
    assert first.lora_B["default"].weight.abs().sum() > 0
    _, after, _ = trainer.scores("train")
    assert after / count < before / count - 0.1, (before / count, after / count)
    assert torch.equal(
        q.qdata,
        trainer.model.base_model.model.bert.encoder.layer[0].attention.self.key.weight.qdata,
    )  # frozen


def test_the_saved_model_predicts_what_the_run_wrote(reference, inputs):
    ctx, trainer = reference
    # The saved model is a plain fp32 transformers model (dequantized base + merged adapters).
    saved = SavedModel(ctx.outputs["model"], trainer.task, trainer.labels, 32, 8)
    model = saved.load()
    assert not any(is_quantized(p) for p in model.parameters())
    assert not any("lora" in n for n, _ in model.named_parameters())
    data = read_data(inputs)
    for split in ("validation", "test"):
        written = pd.read_parquet(ctx.outputs[f"predictions_{split}"])
        with torch.no_grad():
            again = saved.predictions(model, getattr(data, split), torch.device("cpu"))
        pd.testing.assert_frame_equal(written, again, check_exact=True)
    manifest = json.loads(ctx.outputs["run_manifest"].read_text())
    assert manifest["spec"]["train"]["base_quantization"] == INT8


def test_killed_run_resumes_bitwise_equal(reference, inputs, tmp_path):
    ref_ctx, _ = reference
    spec, folder, step = quant_spec(), tmp_path / "killed", 12
    # This checkout's package first: the virtual environment's install may point at another.
    path = os.pathsep.join([str(REPO / "workflow"), str(REPO / "tests")])
    env = killed_job_env(path)
    args = [json.dumps(spec), json.dumps({k: [str(p) for p in v] for k, v in inputs.items()})]
    job = subprocess.Popen(
        [sys.executable, "-c", KILLED_JOB, *args, str(folder), str(step)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 180
    while not (folder / "stopped-here").exists():
        assert job.poll() is None, job.stdout.read().decode()[-3000:]
        assert time.monotonic() < deadline, f"the job never reached step {step}"
        time.sleep(0.05)
    job.send_signal(signal.SIGKILL)
    job.wait(timeout=30)
    work = folder / "work"
    assert [s for s, _ in checkpoint.checkpoint_files(work)] == [5, 10]
    # The checkpoint holds the trainable tensors only: the int8 base is rebuilt from the seed.
    state = torch.load(checkpoint.checkpoint_files(work)[-1][1], weights_only=True)
    assert state["model"] and all(".lora_" in k or ".classifier." in k for k in state["model"])

    ctx = context(spec, inputs, folder)
    log = io.StringIO()
    trainer = run_training(ctx.spec, ctx.inputs, ctx.outputs, ctx.work_dir, REPO, stream=log)
    assert trainer.resumed_from == 10 and "resumed from step 10" in log.getvalue()
    for name in ("model", "metrics", "predictions_validation", "predictions_test"):
        assert hash_tree(ctx.outputs[name]) == hash_tree(ref_ctx.outputs[name]), name


# ------------------------------------------------------------------ memory
class _Tokenizer:
    pad_token_id, eos_token_id = 0, 1

    def __len__(self) -> int:
        return 100


def _model_spec(layers=2, hidden=48, inter=80):
    spec = tiny_spec(layers=layers, hidden=hidden)["model"]
    spec["config"].update(intermediate_size=inter, num_attention_heads=3, dropout=0.0)
    spec["tokenizer"]["vocab_size"] = 100
    return spec


def _estimate_and_measure(spec: dict, train: dict) -> tuple[dict, dict]:
    est = memory.estimate_memory(spec, train, num_labels=3, device="cpu")
    model = models.build_model(spec, _Tokenizer(), ["a", "b", "c"], seed=0, source=None)
    model = models.quantize_base(model, train, "cpu")
    model = models.apply_lora(model, train["lora"], spec["task"])
    g = torch.Generator().manual_seed(0)
    ids, mask = torch.randint(2, 100, (4, 32), generator=g), torch.ones(4, 32, dtype=torch.long)
    ids[0, 16:], mask[0, 16:] = 0, 0  # half padding: attention masks in play
    batch = {
        "input_ids": ids,
        "attention_mask": mask,
        "labels": torch.randint(0, 3, (4,), generator=g),
    }
    measured = memory.measure_memory(
        model,
        batch,
        lambda params: torch.optim.AdamW(params, lr=1e-3),
        "cpu",
        loss_fn=lambda m, b: loss_sum(m, b, "sequence_classification"),
    )
    return est, {**measured["bytes"], **memory.parameter_bytes(model)}


def test_memory_estimate_counts_int8_weights_to_the_byte():
    spec = _model_spec()
    train = {"micro_batch": 4, "max_length": 32, "precision": "fp32", "lora": LORA}
    fp32, fp32_real = _estimate_and_measure(spec, {**train, "base_quantization": None})
    est, real = _estimate_and_measure(spec, {**train, "base_quantization": INT8})
    for part in ("weights", "gradients", "optimizer_state"):
        assert est["bytes"][part] == real[part], part
    # int8 instead of fp32 for the quantized weights; adapters' gradients and AdamW unchanged.
    quant = est["model"]["base_quantization"]
    assert (
        fp32["bytes"]["weights"] - est["bytes"]["weights"] == 4 * quant["params"] - quant["bytes"]
    )
    assert est["bytes"]["optimizer_state"] == fp32["bytes"]["optimizer_state"]
    # What autograd saves grows by each live int8 matmul's fp32 weight cast and row scales:
    # the estimate's increase is the measured one, to the byte.
    saved, fp32_saved = (e["activations_detail"]["saved_for_backward"] for e in (est, fp32))
    assert saved - fp32_saved == real["activations"] - fp32_real["activations"] > 0
    assert abs(saved / real["activations"] - 1) <= 0.01
    # The fit table reads the estimate.
    card = [{"name": "tiny", "memory_gib": 1}]
    rows = [memory.fit_table(e, card, 0.1)[0] for e in (est, fp32)]
    assert [r["need_bytes"] for r in rows] == [est["peak_bytes"], fp32["peak_bytes"]]


# ------------------------------------------------------------------ errors
def _one_line_error(call, *fragments) -> str:
    with pytest.raises(CampaignError) as err:
        call()
    message = str(err.value)
    assert "\n" not in message and message.startswith("train.base_quantization:"), message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_int8_base_without_lora_is_a_one_line_error(inputs, tmp_path):
    spec = quant_spec(lora=None)
    data = read_data(inputs)
    _one_line_error(lambda: Trainer(spec, data, tmp_path, root=REPO), "needs train.lora")
    train = {"micro_batch": 4, "max_length": 32, "precision": "fp32", "lora": None}
    _one_line_error(
        lambda: memory.estimate_memory(
            _model_spec(), {**train, "base_quantization": INT8}, num_labels=3
        ),
        "needs train.lora",
    )
    _one_line_error(
        lambda: Trainer(quant_spec(base_quantization="int4"), data, tmp_path, root=REPO),
        "'int4' is not one of",
    )


def test_cuda_only_method_on_cpu_and_gpt2_conv1d_are_one_line_errors(inputs, tmp_path):
    data = read_data(inputs)
    _one_line_error(
        lambda: Trainer(quant_spec(base_quantization="nf4"), data, tmp_path, root=REPO),
        "nf4 needs CUDA",
        "device is cpu",
    )
    gpt2 = quant_spec(
        task="causal_lm", architecture="gpt2", lora={**LORA, "target_modules": ["c_attn"]}
    )
    _one_line_error(lambda: Trainer(gpt2, data, tmp_path, root=REPO), "Conv1D")


# ------------------------------------------------------------------ end to end
@pytest.mark.slow(minutes=3)
def test_tiny_campaign_with_an_int8_base_runs_through_snakemake(tmp_path):
    project = copy_project(tmp_path / "project")
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    params["train"]["lora"] = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["query"]}
    params["train"]["base_quantization"] = INT8
    params["ablation"]["seeds"] = [1]
    # The overfit check asks a LoRA r=4 run at lr 1e-3 to reach loss 0.1 on 8 examples in 400
    # steps, which LoRA at that lr does not do with or without a quantized base: not blocking.
    params["preflight"]["blocking"].remove("overfit")
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    snakemake(project, "results/evaluation/metrics.parquet", timeout=900)
    runs = sorted((project / "results/runs").iterdir())
    assert runs
    for run in runs:
        manifest = json.loads((run / "run_manifest.json").read_text())
        assert manifest["spec"]["train"]["base_quantization"] == INT8
        assert (run / "predictions_test.parquet").is_file()
    metrics = pd.read_parquet(project / "results/evaluation/metrics.parquet")
    assert {r.name for r in runs} <= set(metrics.variant)
