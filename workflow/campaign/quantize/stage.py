"""The quantize stage: one trained run, one variant. Quantize the run's fp32 model, score it on
the validation and test items its own predictions were made on, compare with those predictions,
and measure what the variant costs.

Inputs (ctx.inputs): model (the run's model folder), run_manifest (its labels), the run's
predictions_validation / predictions_test (the reference), the train / validation / test
splits (calibration reads the train split only; scoring the held-out splits), and base_model
(the pretrained folder, for a LoRA run whose model folder is its adapter: merged in memory;
campaign.quantize.inputs derives it).
Outputs (ctx.outputs): model (folder: model.safetensors or state_dict.pt, and config.json),
predictions_validation / predictions_test (the training run's columns), result (JSON, the same
bytes on every identical run: identity, status, sizes, agreement, generations) and measurements
(JSON, volatile: latency, throughput, memory peak, device, threads).

A variant this job cannot run (CUDA only, on a CPU job; a KV-cache variant of a classifier; its
library absent) writes status "skipped" and the reason, empty prediction tables with the same
columns, and a model folder holding only SKIPPED.txt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from campaign.core.errors import CampaignError
from campaign.core.hashing import hash_value
from campaign.core.tasks import trainer_module
from campaign.memory import track_peak
from campaign.quantize.measure import (
    accuracy,
    agreement,
    inference_context,
    no_cycle_collection,
    state_bytes,
    time_batches,
)
from campaign.quantize.variant import WEIGHT_FILES, Variant, get_variant, placement
from campaign.train import SavedModel, collate, read_split, write_parquet

EVAL_SPLITS = ("validation", "test")


@dataclass
class Context:
    """What a variant's apply() may read: where to put the model, the saved run (to reload it
    with a quantization config), and calibration batches (train split only)."""

    device: torch.device
    saved: SavedModel
    calibration: list[dict] = field(default_factory=list)


def calibration_sample(train, size: int, seed: int):
    """`size` train records drawn without replacement by a Generator seeded with `seed`, in file
    order; the whole split when it is smaller. Never evaluation data: only the train split."""
    from campaign.train import Split

    n = len(train)
    if n == 0:
        raise CampaignError("input 'train': calibration needs train records; the split is empty")
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(n, size=min(size, n), replace=False))
    return Split(
        ids=[train.ids[i] for i in picked],
        texts=[train.texts[i] for i in picked],
        labels=[train.labels[i] for i in picked],
    )


def batches_of(saved: SavedModel, split, batch_size: int, device) -> list[dict]:
    """Collated model inputs (input_ids, attention_mask) of a split, in order."""
    examples = saved.encode(split)
    out = []
    for j in range(0, len(examples), batch_size):
        batch = collate(examples[j : j + batch_size], saved.pad_id)
        out.append({k: batch[k].to(device) for k in ("input_ids", "attention_mask")})
    return out


def save_variant(model, variant: Variant, folder: Path) -> int:
    """Write the variant's weights (and config.json) into `folder`; the weight file's bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    if variant.format == "safetensors":
        model.save_pretrained(str(folder))
    elif variant.format == "onnx":
        model.save(folder)
    else:
        # Quantized tensor subclasses cannot save_pretrained: the state dict, by torch.save.
        torch.save(model.state_dict(), folder / WEIGHT_FILES["state_dict"])
        model.config.to_json_file(str(folder / "config.json"))
    return (folder / WEIGHT_FILES[variant.format]).stat().st_size


def _write_json(path: Path, value: Any) -> None:
    Path(path).write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _peak_bytes(record: dict) -> int:
    return int(record.get("peak_allocated", record.get("rss_peak", 0)))


def quantize_run(
    spec: dict,
    inputs: dict[str, list[Path]],
    outputs: dict[str, Path],
    job_device: str,
    key: str | None = None,
    code_version: str | None = None,
    root: Path | None = None,
):
    """The stage body (see the module docstring). Returns the result record, which names the
    content key the runner stores the outputs under (`key`) and the stage's code version."""
    import pandas as pd

    variant = get_variant(spec["variant"]["name"])
    try:
        manifest = json.loads(Path(inputs["run_manifest"][0]).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CampaignError(f"input 'run_manifest': not readable JSON ({e})") from None
    saved = SavedModel(
        folder=Path(inputs["model"][0]),
        task=spec["task"],
        labels=list(manifest["labels"]),
        max_length=spec["max_length"],
        batch_size=spec["batch_size"],
        base=Path(inputs["base_model"][0]) if inputs.get("base_model") else None,
    )
    references = {name: pd.read_parquet(inputs[f"predictions_{name}"][0]) for name in EVAL_SPLITS}
    result: dict[str, Any] = {
        "run": spec["run"],
        "variant": variant.name,
        "kind": variant.kind,
        # a canary (built to be rejected): the evaluation reads it here
        "canary": variant.canary,
        "method": variant.method,
        "library": variant.library,
        "library_version": spec["variant"]["library_version"],
        "format": variant.format,
        "store_key": key,
        "code_version": code_version,
    }
    if "libraries" in spec["variant"]:  # an ONNX variant: onnx's version beside onnxruntime's
        result["libraries"] = spec["variant"]["libraries"]
    device_type, reason = placement(variant, job_device, spec["task"])
    measurements: dict[str, Any] = {"job_device": job_device, "threads": torch.get_num_threads()}
    folder = Path(outputs["model"])
    if reason is not None:
        return _skipped(reason, result, measurements, references, outputs)
    device = torch.device(device_type)
    if trainer_module(spec["task"]) is not None:  # a task whose runs generate: judged on that
        job = (spec, inputs, outputs, root or Path("."))
        return _generated(*job, saved, variant, device, result, measurements)
    splits = {name: read_split(inputs[name], name) for name in EVAL_SPLITS}
    ctx = Context(device=device, saved=saved)
    if variant.calibration:
        cal = spec["calibration"]
        sample = calibration_sample(read_split(inputs["train"], "train"), cal["size"], cal["seed"])
        ctx.calibration = batches_of(saved, sample, spec["batch_size"], device)
        result["calibration"] = {
            "split": "train",
            "size": len(sample),
            "seed": cal["seed"],
            "ids_hash": hash_value(sample.ids),
        }
    torch.manual_seed(0)  # nothing here draws, but a library might: the same draws every time
    model = variant.apply(saved.load(), ctx)
    model.eval()
    with inference_context(variant.inference):
        frames = {name: saved.predictions(model, splits[name], device) for name in EVAL_SPLITS}
    for name in EVAL_SPLITS:
        write_parquet(frames[name], outputs[f"predictions_{name}"])
    result["size_bytes"] = save_variant(model, variant, folder)
    result["state_bytes"] = state_bytes(model)
    result["agreement"] = {
        name: agreement(frames[name], references[name], f"predictions_{name}")
        for name in EVAL_SPLITS
    }
    result["accuracy"] = {name: accuracy(frames[name]) for name in EVAL_SPLITS}
    result["reference_accuracy"] = {name: accuracy(references[name]) for name in EVAL_SPLITS}
    result["status"] = "ok"
    result["reason"] = None
    result["device"] = device.type
    if spec.get("generation") is not None:
        from campaign.tasks.generation.quantized import generate

        gen = spec["generation"]
        with inference_context(variant.inference):
            result["generation"] = generate(
                model,
                saved,
                splits["validation"],
                gen["prompts"],
                gen["max_new_tokens"],
                device,
                cache=variant.cache,
            )
    measurements.update(measure(model, saved, splits["test"], spec["timing"], variant, device))
    _write_json(outputs["result"], result)
    _write_json(outputs["measurements"], measurements)
    return result


def _skipped(reason: str, result: dict, measurements: dict, references: dict, outputs) -> dict:
    """A variant this job cannot run: status skipped with the reason, empty prediction tables
    with the run's columns, a model folder holding only SKIPPED.txt."""
    folder = Path(outputs["model"])
    result.update(status="skipped", reason=reason)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKIPPED.txt").write_text(reason + "\n", encoding="utf-8")
    for name in EVAL_SPLITS:
        write_parquet(references[name].iloc[0:0], outputs[f"predictions_{name}"])
    _write_json(outputs["result"], result)
    _write_json(outputs["measurements"], measurements)
    return result


def _generated(spec, inputs, outputs, root, saved, variant, device, result, measurements) -> dict:
    """A generation run's variant (tasks/generation/quantized.py): predictions
    with the per-item score, so the evaluation decides on what the variant generates."""
    from campaign.tasks.generation.quantized import generation_variant

    torch.manual_seed(0)
    with inference_context(variant.inference), track_peak(device, memory := {}, "generate"):
        ctx = Context(device=device, saved=saved)
        frames, model, fields, measured = generation_variant(spec, inputs, ctx, variant, root)
    for name in EVAL_SPLITS:
        write_parquet(frames[name], outputs[f"predictions_{name}"])
    result["size_bytes"] = save_variant(model, variant, Path(outputs["model"]))
    result["state_bytes"] = state_bytes(model)
    # No score here: the evaluation scores what the variant generated (tasks/generation/chat.py
    # PREDICTION_COLUMNS); agreement with the run's own outputs needs no metric.
    result.update(fields, accuracy=None, status="ok", reason=None, device=device.type)
    measurements.update(
        measured,
        device=device.type,
        memory=memory["generate"],
        peak_memory_bytes=_peak_bytes(memory["generate"]),
    )
    _write_json(outputs["result"], result)
    _write_json(outputs["measurements"], measurements)
    return result


def measure(model, saved: SavedModel, split, timing: dict, variant: Variant, device) -> dict:
    """Latency, throughput and the memory peak while predicting, on the first
    `timing.batches` batches of `timing.batch_size` test items (the same for every variant)."""
    batches = batches_of(saved, split, timing["batch_size"], device)[: timing["batches"]]
    if not batches:
        return {"timing": None, "memory": None, "note": "no test items to time"}
    memory: dict[str, Any] = {}

    def forward(batch):
        return model(**batch)

    with inference_context(variant.inference), no_cycle_collection():
        with track_peak(device, memory, "predict"):
            timed = time_batches(
                forward, batches, device, timing["warmup_batches"], timing["repeats"]
            )
    return {
        "device": device.type,
        "threads": torch.get_num_threads(),
        "timing": timed,
        "memory": memory["predict"],
        "peak_memory_bytes": _peak_bytes(memory["predict"]),
    }


def stage(ctx) -> None:
    """Stage entry (campaign.core.runner)."""
    device = (ctx.execution or {}).get("device", "cpu")
    quantize_run(
        ctx.spec,
        ctx.inputs,
        ctx.outputs,
        device,
        key=ctx.key,
        code_version=ctx.code_version,
        root=ctx.root,
    )
