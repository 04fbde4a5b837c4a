"""disk: checkpoints, model, logs and predictions of every run, against free space."""

from __future__ import annotations

import json

from campaign.core.fsutil import remove_tree
from campaign.preflight.bench import (
    Bench,
    Result,
    evaluations_per_run,
    fmt_bytes,
    tree_bytes,
)
from campaign.train import (
    device_info,
    run_manifest,
    save_checkpoint,
    save_model,
    write_parquet,
)

ORDER = 80  # place in the report


def run(bench: Bench) -> Result:
    """Measured sizes of one run's artifacts (on the sample's model), projected to the plan."""
    recipe = bench.recipe
    folder = bench.scratch("disk")
    trainer = bench.trainer(work_dir=folder / "checkpoints")
    row = trainer.train_step()  # the optimizer state exists from the first step on
    ckpt = save_checkpoint(folder / "checkpoints", trainer.state_dict(), 1)
    checkpoint_bytes = ckpt.stat().st_size
    trainer.finish()
    save_model(trainer.model, trainer.tokenizer, folder / "model")
    model_bytes = tree_bytes(folder / "model")

    split = "validation" if len(bench.sample.validation) else "train"
    predictions = trainer.predictions(split)
    write_parquet(predictions, folder / "predictions.parquet")
    per_prediction = (folder / "predictions.parquet").stat().st_size / max(len(predictions), 1)
    prediction_bytes = per_prediction * (len(bench.full.validation) + len(bench.full.test))
    # The metrics table as the run writes it: one row per step, one per evaluation.
    n_rows = recipe.max_steps + evaluations_per_run(recipe.max_steps, recipe.eval_every)
    trainer.history = [{**row, "step": s + 1} for s in range(n_rows)]
    write_parquet(trainer.metrics_frame(), folder / "metrics.parquet")
    manifest = run_manifest(trainer, {}, device_info(trainer.device), 0.0)
    log_bytes = (folder / "metrics.parquet").stat().st_size + len(
        json.dumps(manifest, indent=2, sort_keys=True).encode()
    )
    remove_tree(folder)

    per_run = {
        "checkpoints": checkpoint_bytes * recipe.keep_checkpoints,
        "model": model_bytes,
        "logs": log_bytes,
        "predictions": int(prediction_bytes),
    }
    per_run_total = sum(per_run.values())
    need = int(per_run_total * bench.plan_size * (1 + bench.cfg["disk_margin"]))
    free = int(bench.hooks.free_bytes(bench.work_dir))
    details = {
        "checkpoint_bytes": checkpoint_bytes,
        "keep_checkpoints": recipe.keep_checkpoints,
        "per_run_bytes": per_run,
        "per_run_total_bytes": per_run_total,
        "plan_size": bench.plan_size,
        "disk_margin": bench.cfg["disk_margin"],
        "need_bytes": need,
        "free_bytes": free,
        "path": str(bench.work_dir),
        "assumes": "every run keeps keep_checkpoints checkpoints until it ends; outputs are "
        "materialized by hard link (a copy would count them twice)",
    }
    summary = (
        f"the plan needs {fmt_bytes(need)} ({bench.plan_size} runs x "
        f"{fmt_bytes(per_run_total)} + {100 * bench.cfg['disk_margin']:.0f}%), "
        f"{fmt_bytes(free)} free"
    )
    if need > free:
        return Result(False, f"{summary}: does not fit", details)
    return Result(True, summary, details)


def describe(d: dict) -> list[str]:
    if "per_run_bytes" not in d:
        return []
    return ["per run: " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in d["per_run_bytes"].items())]
