"""overfit: a few examples, trained with the recipe's lr and optimizer, are learned."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from campaign.preflight.bench import Bench, Result
from campaign.train import DataOrder, Trainer, collate, count_targets, loss_sum

ORDER = 40  # place in the report


@torch.no_grad()
def _mean_loss(trainer: Trainer, examples: Sequence[dict]) -> float:
    """Mean loss per target over `examples` in eval mode (no dropout)."""
    was = trainer.model.training
    trainer.model.eval()
    total, count = 0.0, 0
    try:
        for j in range(0, len(examples), trainer.recipe.micro_batch):
            batch = trainer._to_device(
                collate(examples[j : j + trainer.recipe.micro_batch], trainer.pad_id)
            )
            with trainer.autocast():
                total += float(loss_sum(trainer.model, batch, trainer.task))
            count += count_targets(batch)
    finally:
        trainer.model.train(was)
    return total / count if count else float("nan")


def run(bench: Bench) -> Result:
    """One step = the whole tiny set (micro_batch x grad_accum covering it), constant lr after a
    warm-up of at most a quarter of the steps: the recipe's lr, optimizer and clipping."""
    cfg = bench.cfg["overfit"]
    n, steps, threshold = cfg["examples"], cfg["steps"], cfg["max_final_loss"]
    micro = min(bench.recipe.micro_batch, n)
    trainer = bench.trainer(
        max_steps=steps,
        micro_batch=micro,
        grad_accum=math.ceil(n / micro),
        schedule="constant",
        warmup_steps=min(bench.recipe.warmup_steps, steps // 4),
    )
    examples = trainer.examples["train"][:n]
    trainer.examples["train"] = examples
    trainer.order = DataOrder(len(examples), trainer.seed)
    details: dict[str, Any] = {
        "examples": len(examples),
        "steps": steps,
        "max_final_loss": threshold,
        "lr": bench.recipe.lr,
        "micro_batch": micro,
        "grad_accum": trainer.recipe.grad_accum,
    }
    if count_targets(collate(examples, trainer.pad_id)) == 0:
        details["losses"] = []
        return Result(False, "no target in the sample: all labels are masked", details)
    initial = _mean_loss(trainer, examples)
    losses, reached, final = [], None, initial
    for step in range(1, steps + 1):
        row = trainer.train_step()
        losses.append(row["loss"])
        if not math.isfinite(row["loss"]):
            break
        # The eval-mode loss (no dropout) on the same examples, after every step: stop as soon
        # as it is below the threshold.
        final = _mean_loss(trainer, examples)
        if final <= threshold:
            reached = step
            break
    details.update(
        {
            "initial_loss": initial,
            "final_loss": final,
            "reached_at_step": reached,
            "losses": losses,
            "grad_norm_last": row["grad_norm"],
        }
    )
    if not all(math.isfinite(v) for v in losses) or not math.isfinite(final):
        return Result(
            False,
            f"loss became non-finite at step {len(losses)} (lr {bench.recipe.lr:g} diverges)",
            details,
        )
    if final > threshold:
        trend = "rose" if final > initial else "only fell"
        return Result(
            False,
            f"loss {trend} from {initial:.3g} to {final:.3g} in {steps} steps on {n} examples "
            f"(must fall below {threshold:g}; lr {bench.recipe.lr:g})",
            details,
        )
    if trainer.hooks is not None:  # a generative task must also give the answers back
        missed = trainer.hooks.not_reproduced(trainer, bench.sample.train, len(examples), details)
        if missed:
            return Result(False, f"loss fell to {final:.3g}, but {missed}", details)
    return Result(
        True,
        f"loss fell from {initial:.3g} to {final:.3g} (below {threshold:g}) at step {reached} "
        f"of {steps} on {n} examples",
        details,
    )


def describe(d: dict) -> list[str]:
    losses = d.get("losses") or []
    if not losses:
        return []
    shown = ", ".join(f"{v:.3g}" for v in losses[:: max(1, len(losses) // 10)])
    return [f"train loss every ~{max(1, len(losses) // 10)} steps: {shown}"]
