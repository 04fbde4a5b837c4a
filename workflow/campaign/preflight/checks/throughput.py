"""throughput: sustained steps/s after a warm-up, and what evaluation and a checkpoint cost.

Rates are machine measurements: they go to the preflight's measurements (recorded, not compared
by `campaign reproduce`). The plan phase turns them into each run's projected time; the check
itself only fails when no finite rate could be measured.
"""

from __future__ import annotations

import math
import time

import numpy as np

from campaign.core.fsutil import remove_tree
from campaign.preflight.bench import Bench, Result, sync
from campaign.train import save_checkpoint

ORDER = 70  # place in the report
VOLATILE = ("rates",)  # details that differ between identical runs (timings)
# Run with no other check beside it (campaign.preflight.report): it times the training step
# that the forecast scales, at a training job's threads, on cores nothing else is using.
ALONE = True


def run(bench: Bench) -> Result:
    cfg, recipe = bench.cfg["throughput"], bench.recipe
    warmup, window = cfg["warmup_steps"], cfg["window_steps"]
    trainer = bench.trainer()
    first = [trainer.train_step() for _ in range(warmup)]
    sync(trainer.device)
    t0 = time.perf_counter()
    rows = [trainer.train_step() for _ in range(window)]
    sync(trainer.device)
    elapsed = time.perf_counter() - t0
    tokens = sum(r["tokens"] for r in rows)

    # Evaluation and checkpoint costs, measured here too: a run pays for them as well.
    split = "validation" if len(bench.sample.validation) else "train"
    n_eval = len(getattr(bench.sample, split))
    t0 = time.perf_counter()
    trainer.evaluate(split)
    sync(trainer.device)
    loss_s_per_example = (time.perf_counter() - t0) / max(n_eval, 1)
    judged = judged_cost(bench, trainer)
    # The projection (plan/projection.py) prices n_validation x eval_seconds_per_example per
    # evaluation: the judged items' generation is spread over the validation examples there.
    n_val = len(bench.full.validation)
    eval_s_per_example = loss_s_per_example + judged["seconds_per_evaluation"] / max(n_val, 1)
    folder = bench.scratch("throughput")
    t0 = time.perf_counter()
    save_checkpoint(folder, trainer.state_dict(), 1)
    save_s = time.perf_counter() - t0
    remove_tree(folder)

    rates = {
        "device": trainer.device.type,
        "window_seconds": elapsed,
        "steps_per_s": window / elapsed,
        "samples_per_s": window * recipe.batch_examples / elapsed,
        "tokens_per_s": tokens / elapsed,
        "warmup_samples_per_s": (
            warmup * recipe.batch_examples / sum(r["seconds"] for r in first) if first else None
        ),
        # The spread shows a noisy window (a shared machine, thermal limits) at a glance.
        "step_seconds": {
            "min": min(r["seconds"] for r in rows),
            "median": float(np.median([r["seconds"] for r in rows])),
            "max": max(r["seconds"] for r in rows),
        },
        "eval_seconds_per_example": eval_s_per_example,
        "loss_seconds_per_example": loss_s_per_example,
        "generate_seconds_per_item": judged["seconds_per_item"],
        "judged_seconds_per_evaluation": judged["seconds_per_evaluation"],
        "checkpoint_save_seconds": save_s,
    }
    details = {
        "warmup_steps": warmup,
        "window_steps": window,
        "batch_examples": recipe.batch_examples,
        "tokens_per_step": tokens / window,  # unpadded tokens of the examples
        "rates": rates,
    }
    summary = (
        f"{rates['samples_per_s']:.1f} samples/s, {rates['tokens_per_s']:.0f} tokens/s sustained "
        f"over {window} steps after {warmup}"
    )
    measured = [rates["steps_per_s"], eval_s_per_example, save_s]
    if not all(math.isfinite(v) and v >= 0 for v in measured) or rates["steps_per_s"] <= 0:
        return Result(False, f"{summary}: no finite rate was measured", details)
    return Result(True, summary, details)


def judged_cost(bench: Bench, trainer) -> dict:
    """What model.generation.eval_items adds to each evaluation: the judged items' greedy
    generation and scoring, timed on the sample's judged items and scaled to the campaign's
    (min(eval_items, validation records)). Zero when eval_items is off."""
    if trainer.judged is None or not len(trainer.judged):
        return {"seconds_per_item": 0.0, "seconds_per_evaluation": 0.0, "items": 0}
    t0 = time.perf_counter()
    trainer.judge()
    sync(trainer.device)
    per_item = (time.perf_counter() - t0) / len(trainer.judged)
    items = min(trainer.eval_items, len(bench.full.validation))
    return {
        "seconds_per_item": per_item,
        "seconds_per_evaluation": per_item * items,
        "items": items,
    }


def describe(d: dict) -> list[str]:
    r = d.get("rates")
    if not r:
        return []
    return [
        f"first {d['warmup_steps']} steps: "
        + (f"{r['warmup_samples_per_s']:.1f} samples/s" if r["warmup_samples_per_s"] else "-"),
        "window step time min / median / max: "
        + " / ".join(f"{1000 * r['step_seconds'][k]:.1f} ms" for k in ("min", "median", "max")),
        f"evaluation {1000 * r['eval_seconds_per_example']:.2f} ms per example; a checkpoint "
        f"{r['checkpoint_save_seconds']:.2f} s",
        *judged_lines(r),
    ]


def judged_lines(r: dict) -> list[str]:
    """The generated score's share of an evaluation (model.generation.eval_items), when on."""
    per_eval = r.get("judged_seconds_per_evaluation") or 0.0
    if not per_eval:
        return []
    return [
        f"generated score: {1000 * r['generate_seconds_per_item']:.1f} ms per judged item, "
        f"{per_eval:.2f} s per evaluation (in the evaluation's time per example)"
    ]
