"""grad_accumulation: k micro-batches of different target counts accumulate to the gradient of one
batch holding all of them (float64, CPU)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from campaign.preflight.bench import Bench, Result
from campaign.train import accumulated_gradients, collate, count_targets, loss_sum

ORDER = 50  # place in the report


def _reference_gradients(model, batch: dict, task: str) -> dict[str, torch.Tensor]:
    """The gradient of the mean loss of one batch, computed here (not by accumulate)."""
    was = model.training
    model.eval()
    try:
        model.zero_grad(set_to_none=True)
        loss = loss_sum(model, batch, task) / count_targets(batch)
        loss.backward()
        return {
            n: p.grad.detach().clone()
            for n, p in model.named_parameters()
            if p.requires_grad and p.grad is not None
        }
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was)


def _relative_difference(a: dict, b: dict) -> float:
    if a.keys() != b.keys():
        return float("inf")
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    scale = max(float(b[k].abs().max()) for k in b)
    return diff / scale if scale else diff


def run(bench: Bench) -> Result:
    """k = max(2, grad_accum) micro-batches of 1, 2, ..., k examples (so their target counts
    differ) vs one batch of all of them, on a float64 CPU copy of the model."""
    tolerance = bench.cfg["grad_accum_tolerance"]
    trainer = bench.trainer()
    k = max(2, bench.recipe.grad_accum)
    sizes = list(range(1, k + 1))
    pool = trainer.examples["train"]
    examples = [pool[i % len(pool)] for i in range(sum(sizes))]
    bounds = np.cumsum([0, *sizes])
    micro = [
        collate(examples[a:b], trainer.pad_id) for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    whole = collate(examples, trainer.pad_id)
    counts = [count_targets(b) for b in micro]
    details: dict[str, Any] = {"micro_batches": k, "sizes": sizes, "target_counts": counts}
    if sum(counts) == 0:
        return Result(False, "no target in the batches: all labels are masked", details)
    model = copy.deepcopy(trainer.model).to("cpu", torch.float64)
    accumulated = bench.hooks.accumulated_gradients(model, micro, bench.task)
    reference = _reference_gradients(model, whole, bench.task)
    error = _relative_difference(accumulated, reference)
    # The check's power: the common shortcut (mean of per-micro-batch means) must differ.
    shortcut = accumulated_gradients(model, micro, bench.task, normalize=False)
    power = _relative_difference(shortcut, reference)
    details.update(
        {
            "relative_difference": error,
            "tolerance": tolerance,
            "shortcut_relative_difference": power,
            "distinct_target_counts": len(set(counts)) > 1,
        }
    )
    if not error <= tolerance:
        return Result(
            False,
            f"{k} accumulated micro-batches (targets {counts}) differ from one batch by "
            f"{error:.3g} (relative, > {tolerance:g}): the loss is not normalized by the whole "
            f"batch's target count",
            details,
        )
    return Result(
        True,
        f"{k} micro-batches (targets {counts}) equal one batch within {error:.2g} (tolerance "
        f"{tolerance:g}; the unnormalized shortcut would differ by {power:.2g})",
        details,
    )
