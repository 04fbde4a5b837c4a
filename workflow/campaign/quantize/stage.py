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
from campaign.core.tasks import module_of
from campaign.memory import no_cycle_collection, track_peak
from campaign.quantize.measure import (
    accuracy,
    agreement,
    inference_context,
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


@dataclass
class Job:
    """One quantize job as its task's `quantized` sees it (core/tasks.py TaskModule): the job's
    spec and inputs, the project root, the Context (device, the saved run, calibration), the
    variant and the run's own predictions (references)."""

    spec: dict
    inputs: dict[str, list[Path]]
    root: Path
    ctx: Context
    variant: Variant
    references: dict
    splits: dict = field(default_factory=dict)

    def split(self, name: str):
        """An evaluation (or the train) split, read once."""
        if name not in self.splits:
            self.splits[name] = read_split(self.inputs[name], name)
        return self.splits[name]

    def inference(self):
        """The context the variant predicts under (its INFERENCE)."""
        return inference_context(self.variant.inference)

    peak_bytes = staticmethod(_peak_bytes)

    def label_scores(self) -> tuple:
        """A label task's variant: calibrated where it asks, applied, its label predictions on
        both evaluation splits compared with the run's own (agreement, accuracy), and timed on
        the test split. Returns (frames, model, result fields, measurements fields)."""
        spec, ctx, variant = self.spec, self.ctx, self.variant
        fields: dict[str, Any] = {}
        if variant.calibration:
            cal = spec["calibration"]
            sample = calibration_sample(self.split("train"), cal["size"], cal["seed"])
            ctx.calibration = batches_of(ctx.saved, sample, spec["batch_size"], ctx.device)
            fields["calibration"] = {
                "split": "train",
                "size": len(sample),
                "seed": cal["seed"],
                "ids_hash": hash_value(sample.ids),
            }
        torch.manual_seed(0)  # nothing here draws, but a library might: the same draws every time
        model = variant.apply(ctx.saved.load(), ctx)
        model.eval()
        with self.inference():
            frames = {
                n: ctx.saved.predictions(model, self.split(n), ctx.device) for n in EVAL_SPLITS
            }
        refs = self.references
        fields["agreement"] = {
            n: agreement(frames[n], refs[n], f"predictions_{n}") for n in EVAL_SPLITS
        }
        fields["accuracy"] = {n: accuracy(frames[n]) for n in EVAL_SPLITS}
        fields["reference_accuracy"] = {n: accuracy(refs[n]) for n in EVAL_SPLITS}
        return frames, model, fields, self.measured(model)

    def measured(self, model) -> dict:
        """The measurements of a variant that scores its items in one forward pass: latency,
        throughput and the memory peak of `model` on the test split's first batches
        (measure; the run's own encoding, quantization.timing)."""
        ctx = self.ctx
        return measure(
            model, ctx.saved, self.split("test"), self.spec["timing"], self.variant, ctx.device
        )


def _saved_run(spec: dict, inputs: dict[str, list[Path]]) -> SavedModel:
    """The trained run the job quantizes: its model folder, labels (run_manifest), encoding."""
    try:
        manifest = json.loads(Path(inputs["run_manifest"][0]).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CampaignError(f"input 'run_manifest': not readable JSON ({e})") from None
    return SavedModel(
        folder=Path(inputs["model"][0]),
        task=spec["task"],
        labels=list(manifest["labels"]),
        max_length=spec["max_length"],
        batch_size=spec["batch_size"],
        base=Path(inputs["base_model"][0]) if inputs.get("base_model") else None,
    )


def _identity(spec: dict, variant: Variant, key: str | None, code_version: str | None) -> dict:
    """What the result says of the job before it runs: run, variant, method, library, key."""
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
    return result


def quantize_run(
    spec: dict,
    inputs: dict[str, list[Path]],
    outputs: dict[str, Path],
    job_device: str,
    key: str | None = None,
    code_version: str | None = None,
    root: Path | None = None,
):
    """The stage body (see the module docstring): the run's task judges the variant (its
    `quantized`: labels scored, or answers generated); this writes what it gives. Returns the
    result record, which names the content key the runner stores the outputs under (`key`)
    and the stage's code version."""
    import pandas as pd

    variant = get_variant(spec["variant"]["name"])
    saved = _saved_run(spec, inputs)
    references = {name: pd.read_parquet(inputs[f"predictions_{name}"][0]) for name in EVAL_SPLITS}
    result = _identity(spec, variant, key, code_version)
    device_type, reason = placement(variant, job_device, spec["task"])
    measurements: dict[str, Any] = {"job_device": job_device, "threads": torch.get_num_threads()}
    if reason is not None:
        return _skipped(reason, result, measurements, references, outputs)
    device = torch.device(device_type)
    ctx = Context(device=device, saved=saved)
    job = Job(spec, inputs, root or Path("."), ctx, variant, references)
    frames, model, fields, measured = module_of(spec["task"]).quantized(job)
    for name in EVAL_SPLITS:
        write_parquet(frames[name], outputs[f"predictions_{name}"])
    result["size_bytes"] = save_variant(model, variant, Path(outputs["model"]))
    result["state_bytes"] = state_bytes(model)
    result.update(fields, status="ok", reason=None, device=device.type)
    measurements.update(measured)
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
