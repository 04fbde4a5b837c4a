"""throughput: sustained steps/s after a warm-up, projected to a run and to the plan."""

from __future__ import annotations

import time

import numpy as np

from campaign.core.fsutil import remove_tree
from campaign.preflight.bench import (
    Bench,
    Result,
    evaluations_per_run,
    fmt_seconds,
    sync,
)
from campaign.train import (
    save_checkpoint,
)

ORDER = 70  # place in the report


def run(bench: Bench) -> Result:
    cfg, recipe = bench.cfg["throughput"], bench.recipe
    warmup, window = cfg["warmup_steps"], cfg["window_steps"]
    trainer = bench.trainer()
    first = []
    for _ in range(warmup):
        first.append(trainer.train_step())
    sync(trainer.device)
    t0 = time.perf_counter()
    rows = [trainer.train_step() for _ in range(window)]
    sync(trainer.device)
    elapsed = time.perf_counter() - t0
    steps_per_s = window / elapsed
    samples_per_s = window * recipe.batch_examples / elapsed
    tokens_per_s = sum(r["tokens"] for r in rows) / elapsed

    # Evaluation and checkpoint costs, measured here too: a run pays for them as well.
    split = "validation" if len(bench.sample.validation) else "train"
    n_eval = len(getattr(bench.sample, split))
    t0 = time.perf_counter()
    trainer.evaluate(split)
    sync(trainer.device)
    eval_s_per_example = (time.perf_counter() - t0) / max(n_eval, 1)
    folder = bench.scratch("throughput")
    t0 = time.perf_counter()
    save_checkpoint(folder, trainer.state_dict(), 1)
    save_s = time.perf_counter() - t0
    remove_tree(folder)

    full_val, full_test = len(bench.full.validation), len(bench.full.test)
    train_s = recipe.max_steps / steps_per_s
    eval_s = (
        evaluations_per_run(recipe.max_steps, recipe.eval_every) * full_val * eval_s_per_example
    )
    predict_s = (full_val + full_test) * eval_s_per_example
    n_saves = recipe.max_steps // recipe.checkpoint_every + (
        1 if recipe.max_steps % recipe.checkpoint_every else 0
    )
    run_s = train_s + eval_s + predict_s + n_saves * save_s
    plan_s = run_s * bench.plan_size
    first_rate = (
        warmup * recipe.batch_examples / sum(r["seconds"] for r in first) if first else None
    )
    details = {
        "device": trainer.device.type,
        "warmup_steps": warmup,
        "window_steps": window,
        "window_seconds": elapsed,
        "steps_per_s": steps_per_s,
        "samples_per_s": samples_per_s,
        "tokens_per_s": tokens_per_s,
        "tokens": "unpadded tokens of the examples",
        "warmup_samples_per_s": first_rate,
        # The spread shows a noisy window (a shared machine, thermal limits) at a glance.
        "step_seconds": {
            "min": min(r["seconds"] for r in rows),
            "median": float(np.median([r["seconds"] for r in rows])),
            "max": max(r["seconds"] for r in rows),
        },
        "eval_seconds_per_example": eval_s_per_example,
        "checkpoint_save_seconds": save_s,
        "per_run_seconds": {
            "train": train_s,
            "evaluation": eval_s,
            "predictions": predict_s,
            "checkpoints": n_saves * save_s,
            "total": run_s,
        },
        "plan_size": bench.plan_size,
        "plan_seconds": plan_s,
        "plan_hours": plan_s / 3600,
        "max_hours": bench.cfg["max_hours"],
        "assumes": "every run of the plan costs what the baseline costs, one run at a time on "
        "this device",
    }
    summary = (
        f"{samples_per_s:.1f} samples/s, {tokens_per_s:.0f} tokens/s sustained over "
        f"{window} steps after {warmup}; a run ~{fmt_seconds(run_s)}, the plan of "
        f"{bench.plan_size} runs ~{fmt_seconds(plan_s)}"
    )
    max_hours = bench.cfg["max_hours"]
    if max_hours is not None and plan_s / 3600 > max_hours:
        return Result(False, f"{summary}: over max_hours {max_hours:g}", details)
    return Result(True, summary, details)


def describe(d: dict) -> list[str]:
    if "per_run_seconds" not in d:
        return []
    r = d["per_run_seconds"]
    return [
        f"first {d['warmup_steps']} steps: "
        + (f"{d['warmup_samples_per_s']:.1f} samples/s" if d["warmup_samples_per_s"] else "-"),
        "window step time min / median / max: "
        + " / ".join(f"{1000 * d['step_seconds'][k]:.1f} ms" for k in ("min", "median", "max")),
        f"per run: train {fmt_seconds(r['train'])}, evaluation {fmt_seconds(r['evaluation'])}, "
        f"predictions {fmt_seconds(r['predictions'])}, checkpoints "
        f"{fmt_seconds(r['checkpoints'])}",
    ]
