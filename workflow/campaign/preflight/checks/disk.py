"""disk: the measured size of one run's artifacts (a checkpoint, the model, predictions and logs),
and whether one run fits on the disk with the margin.

Sizes come from the sample's model and are exact (the same bytes each time); free space is a
machine measurement (recorded, not compared). The plan phase multiplies the sizes out for the
whole plan (checkpoints kept per run, every run) against the free space measured here.
"""

from __future__ import annotations

import json

from campaign.core.fsutil import remove_tree
from campaign.preflight.bench import Bench, Result, evaluations_per_run, fmt_bytes, tree_bytes
from campaign.train import (
    commands_of,
    device_info,
    run_manifest,
    save_checkpoint,
    timings,
    write_parquet,
)

ORDER = 80  # place in the report
VOLATILE = ("free_bytes", "path", "timings_bytes")  # details that differ between identical runs


def run(bench: Bench) -> Result:
    recipe = bench.recipe
    folder = bench.scratch("disk")
    trainer = bench.trainer(work_dir=folder / "checkpoints")
    row = trainer.train_step()  # the optimizer state exists from the first step on
    if recipe.select == "best_generated":
        # every checkpoint after the first judged step also holds the kept step's trainable
        # state (train/loop.py keep_current), and the job holds that copy in host memory
        trainer.keep_current()
    ckpt = save_checkpoint(folder / "checkpoints", trainer.state_dict(), 1)
    checkpoint_bytes = ckpt.stat().st_size
    trainer.save_model(folder / "model")  # as the run writes it: a LoRA run, its adapter
    model_bytes = tree_bytes(folder / "model")

    split = "validation" if len(bench.sample.validation) else "train"
    predictions = trainer.predictions(split)
    write_parquet(predictions, folder / "predictions.parquet")
    per_prediction = (folder / "predictions.parquet").stat().st_size / max(len(predictions), 1)
    n_validation, n_test = len(bench.full.validation), len(bench.full.test)
    prediction_bytes = int(per_prediction * (n_validation + n_test))
    # The metrics table as the run writes it: one row per step, one per evaluation.
    n_rows = recipe.max_steps + evaluations_per_run(recipe.max_steps, recipe.eval_every)
    trainer.history = [{**row, "step": s + 1} for s in range(n_rows)]
    write_parquet(trainer.metrics_frame(), folder / "metrics.parquet")
    manifest = run_manifest(trainer, {}, None)
    record = timings(trainer, device_info(trainer.device), 0.0)
    log_bytes = (folder / "metrics.parquet").stat().st_size + len(
        json.dumps(manifest, indent=2, sort_keys=True).encode()
    )
    # The timings' size varies with the digits of the floats it holds: measured, not exact.
    timings_bytes = len(json.dumps(record, indent=2, sort_keys=True).encode())
    remove_tree(folder)

    # The model, predictions and logs are in the store and, as a private copy, in results/
    # (a reflink shares the blocks where the filesystem has them: counted twice, to be safe).
    one_run = checkpoint_bytes + 2 * (model_bytes + prediction_bytes + log_bytes)
    need = int(one_run * (1 + bench.cfg["disk_margin"]))
    free = int(bench.hooks.free_bytes(bench.work_dir))
    details = {
        "checkpoint_bytes": checkpoint_bytes,
        "model_bytes": model_bytes,
        "prediction_bytes": prediction_bytes,
        "log_bytes": log_bytes,
        "validation_examples": n_validation,
        "test_examples": n_test,
        "one_run_bytes": one_run,
        "disk_margin": bench.cfg["disk_margin"],
        "free_bytes": free,
        "timings_bytes": timings_bytes,
        "path": str(bench.work_dir),
        "assumes": "outputs counted twice: in the store and copied to results/",
    }
    # A command's runs write what the command check measures (the plan sizes them with it).
    whose = "a built-in run" if commands_of(bench.spec["train"]) else "one run"
    summary = (
        f"{whose} writes {fmt_bytes(one_run)} (a checkpoint {fmt_bytes(checkpoint_bytes)}, the "
        f"model {fmt_bytes(model_bytes)}); {fmt_bytes(free)} free"
    )
    if need > free:
        return Result(False, f"{summary}: one run does not fit with the margin", details)
    return Result(True, summary, details)


def describe(d: dict) -> list[str]:
    if "one_run_bytes" not in d:
        return []
    parts = ("checkpoint", "model", "prediction", "log")
    return ["one run: " + ", ".join(f"{k} {fmt_bytes(d[f'{k}_bytes'])}" for k in parts)]
