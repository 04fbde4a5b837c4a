"""The training stage: fine-tune one run's model on the train split, resumably, and write the
model, its metrics, validation/test predictions and a run manifest.

Inputs (ctx.inputs): train, validation, test (Parquet: id, text, label, ...), and base_model
(the pretrained folder, when model.source is a path) so that its content is part of the key.
Outputs (ctx.outputs): model (folder), metrics (Parquet), predictions_validation,
predictions_test (Parquet), run_manifest (JSON).
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path

from campaign.core.code import code_version, module_hashes
from campaign.core.defaults import train_key
from campaign.core.errors import CampaignError
from campaign.core.hashing import hash_tree
from campaign.core.versions import installed_versions
from campaign.plan import identity
from campaign.train import devices, distributed, models
from campaign.train.loop import EVAL_SPLITS, Trainer, read_data

# What the train stage's code version covers: its declaration's code modules (Stage.code_modules:
# the entry, campaign.train.command, and the execution module), so a run manifest's code version
# is its store key's (tests/index checks it). Written out, not read from the registry: importing
# the registry here would put every reader in the training stage's code version.
STAGE_MODULES = ("campaign.train.command", "campaign.train.execution")


def stage_modules() -> tuple[str, ...]:
    return STAGE_MODULES


def write_parquet(frame, path: Path) -> None:
    # No pandas index and fixed writer options: the same frame gives the same bytes.
    frame.to_parquet(path, index=False, engine="pyarrow", compression="zstd")


def library_versions(lora: bool) -> dict[str, str]:
    names = ["torch", "transformers", "tokenizers", "safetensors", "numpy", "pandas", "pyarrow"]
    if lora:
        names.append("peft")
    return {"python": platform.python_version(), **installed_versions(names)}


def run_manifest(
    trainer: Trainer,
    inputs: dict[str, list[Path]],
    execution: dict | None,
) -> dict:
    """What the run is and computed, identical for identical runs (no timings, no paths, no host:
    those are in timings.json)."""
    total, trainable = models.count_parameters(trainer.model)
    # the kept step's validation row (train.select; the last row when it has none)
    kept = trainer.chosen()
    validation = [r for r in trainer.history if r["split"] == "validation"]
    validation = [r for r in validation if r["step"] != kept] + [
        r for r in validation if r["step"] == kept
    ]
    final = (
        {k: validation[-1].get(k) for k in ("step", "split", "loss", "accuracy", "generated")}
        if validation
        else None
    )
    return {
        "spec": identity(trainer.spec),
        "spec_hash": trainer.spec_hash,
        "inputs": {name: [hash_tree(p) for p in paths] for name, paths in sorted(inputs.items())},
        "code": {
            "version": code_version(*stage_modules()),
            "modules": module_hashes(*stage_modules()),
        },
        "versions": library_versions(trainer.recipe.lora is not None),
        "execution": execution,
        "device": trainer.device.type,
        "labels": trainer.labels,
        "tokenizer_vocab_size": len(trainer.tokenizer),
        "parameters": {"total": total, "trainable_during_training": trainable},
        "lora": _lora_output(trainer),
        "steps": trainer.step,
        "examples_seen": trainer.step * trainer.recipe.batch_examples,
        "epochs_seen": trainer.step
        * trainer.recipe.batch_examples
        / len(trainer.examples["train"]),
        "final_validation": final,
        "selected": selected(trainer),
    }


def selected(trainer: Trainer) -> dict:
    """train.select and the step it kept, with that step's generated score (None: not judged)."""
    step = trainer.chosen()
    return {
        "select": trainer.recipe.select,
        "step": step,
        "of_steps": trainer.step,
        "generated": trainer.generated_scores().get(step),
        "eval_items": trainer.eval_items,
    }


def _lora_output(trainer: Trainer) -> str | None:
    if trainer.recipe.lora is None:
        return None
    if trainer.base_source is None:
        return "merged into the weights"
    return "adapter only; base model named by its content hash (base.json)"


def timings(trainer: Trainer, device: dict, wall_s: float) -> dict:
    """How the run went on this machine: recorded, not compared (a volatile output)."""
    return {
        "device": device,
        "resumed_from_step": trainer.resumed_from,
        "train_seconds": round(trainer.train_seconds, 3),
        "wall_seconds": round(wall_s, 3),
        "peak_memory_bytes": _peak_memory(trainer.device),  # rank 0's
        "processes": {"count": trainer.world, "launcher": distributed.launcher()},
        "per_step": trainer.timing_columns(),
    }


def _peak_memory(device) -> int:
    """The job's peak: CUDA memory allocated on a GPU, the process's RSS high-water mark on a
    CPU (what the budget reports per job: a store hit's Snakemake benchmark measures the hit)."""
    import resource

    import torch

    if getattr(device, "type", None) == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def run_training(
    spec: dict,
    inputs: dict[str, list[Path]],
    outputs: dict[str, Path],
    work_dir: Path,
    root: Path = Path("."),
    after_step: Callable[[int], None] | None = None,
    stream=None,
    execution: dict | None = None,
    key: str | None = None,
) -> Trainer:
    """The stage body: resume or start, train to max_steps, write every output. `key`: the
    content key the runner stores the outputs under, recorded in the run manifest."""
    started = time.perf_counter()
    lease = devices.lease_from_env()  # before anything touches CUDA
    data = read_data(inputs)
    base = inputs.get("base_model")
    trainer = Trainer(
        spec, data, work_dir, root=root, base_model=base[0] if base else None, stream=stream
    )
    trainer.resume()
    trainer.run(after_step=after_step, final_evaluation=False)
    if trainer.step < trainer.recipe.max_steps:
        raise CampaignError(
            f"training stopped at step {trainer.step} of {trainer.recipe.max_steps}"
        )
    if trainer.rank != 0:
        return trainer  # rank 0 writes the run's outputs
    device = devices.device_info(trainer.device, lease)
    trainer.keep_chosen()  # train.select: the chosen step's weights are the run's model
    trainer.save_model(outputs["model"])  # and merges a LoRA adapter for the predictions
    # Each split scored once, on the saved model: the last validation row comes from the
    # predictions' own scores.
    scores = trainer.final_scores()
    if scores["validation"] is not None:  # the progress line of the last step has none
        loss, accuracy = scores["validation"][:2]
        print(
            f"train: validation {trainer.score_name} "
            f"{loss if accuracy is None else accuracy:.4g} at step "
            f"{trainer.chosen()} "
            "(the saved model)",
            file=trainer.stream,
            flush=True,
        )
    for split in EVAL_SPLITS:
        write_parquet(trainer.predictions(split, scores[split]), outputs[f"predictions_{split}"])
    write_parquet(trainer.metrics_frame(), outputs["metrics"])
    manifest = run_manifest(trainer, inputs, execution)
    manifest["store_key"] = key
    outputs["run_manifest"].write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    if "timings" in outputs:
        record = timings(trainer, device, time.perf_counter() - started)
        outputs["timings"].write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return trainer


def stage(ctx) -> None:
    """Stage entry (campaign.core.runner): ctx.spec is the run spec {model, train, seed}.
    train.devices > 1: the N processes of campaign.train.distributed train it."""
    n = int(train_key(ctx.spec["train"], "devices"))
    if n > 1:
        distributed.launch(
            n, ctx.spec, ctx.inputs, ctx.outputs, ctx.work_dir, ctx.root, ctx.execution, ctx.key
        )
        return
    run_training(
        ctx.spec,
        ctx.inputs,
        ctx.outputs,
        ctx.work_dir,
        ctx.root,
        execution=ctx.execution,
        key=ctx.key,
    )
