"""overfit: a few examples, trained with the recipe's lr and optimizer, are learned."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from campaign.core.tasks import module_of
from campaign.preflight.bench import Bench, Result
from campaign.train import DataOrder, Trainer, collate, count_targets, loss_sum

ORDER = 40  # place in the report

# The documented rule (docs/training.md, preflight.overfit in the schema): the check passes when the
# eval-mode loss on the examples reaches preflight.overfit.max_final_loss within its steps.
# When it does not, a loss that fell by less than this share of its initial value "does not
# learn": the weights barely moved, so the cause is what moves them (train.lr, the optimizer,
# weights that do not train), not too few steps; one that fell further "learns too slowly".
# Both fail: a recipe that cannot fit 8 examples in 100 full-batch steps at its peak lr is
# unlikely to learn thousands in its max_steps, and this costs seconds instead of GPU hours.
MIN_DROP = 0.25


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
    task = module_of(bench.task)
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
    losses, reached, final, missed = [], None, initial, None
    for step in range(1, steps + 1):
        row = trainer.train_step()
        losses.append(row["loss"])
        if not math.isfinite(row["loss"]):
            break
        # The eval-mode loss (no dropout) on the same examples, after every step: stop as soon
        # as it is below the threshold (and, for a generative task, the answers come back).
        final = _mean_loss(trainer, examples)
        if final <= threshold:
            reached = reached or step
            # A mean loss per token below the threshold can still hide one wrong token in a
            # long answer (a JSON field): train on while steps remain, as a user would.
            missed = task.not_reproduced(trainer, bench.sample.train, len(examples), details)
            if missed is None:
                if task.generates_text():  # the step its answers came back
                    details["reproduced_at_step"] = step
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
    lr = bench.recipe.lr
    if not all(math.isfinite(v) for v in losses) or not math.isfinite(final):
        return Result(
            False,
            f"loss became non-finite at step {len(losses)} (train.lr {lr:g} diverges)",
            details,
        )
    if reached is None:
        return Result(False, _not_reached(initial, final, steps, n, threshold, lr), details)
    if missed:  # a generative task must also give the answers back
        return Result(
            False,
            f"loss fell to {final:.3g} (below {threshold:g} from step {reached}), but after "
            f"{len(losses)} steps {missed}: raise preflight.overfit.steps or train.lr",
            details,
        )
    given_back = details.get("reproduced_at_step")
    return Result(
        True,
        f"loss fell from {initial:.3g} to {final:.3g} (below {threshold:g}) at step {reached} "
        f"of {steps} on {n} examples"
        + (f"; answers given back at step {given_back}" if given_back else ""),
        details,
    )


def _not_reached(initial: float, final: float, steps: int, n: int, threshold: float, lr: float):
    """The one line of a loss that stayed above `threshold`: did it move at all (MIN_DROP)?"""
    drop = (initial - final) / initial if initial > 0 else 0.0
    moved = f"from {initial:.3g} to {final:.3g} in {steps} steps on {n} examples"
    goal = f"must fall below {threshold:g}"
    if drop <= -MIN_DROP:
        return f"loss rose by {-drop:.0%} ({moved}; {goal}): train.lr {lr:g} is too large"
    if drop < MIN_DROP:
        return (
            f"does not learn: loss fell by {max(drop, 0.0):.0%} ({moved}; {goal}, and by "
            f"{MIN_DROP:.0%} to count as learning): train.lr {lr:g} is too small (or too large: "
            "see the losses), or no weight trains"
        )
    return (
        f"learns too slowly: loss fell by {drop:.0%} ({moved}; {goal}): raise train.lr "
        f"({lr:g}) or preflight.overfit.steps"
    )


def describe(d: dict) -> list[str]:
    losses = d.get("losses") or []
    if not losses:
        return []
    shown = ", ".join(f"{v:.3g}" for v in losses[:: max(1, len(losses) // 10)])
    return [f"train loss every ~{max(1, len(losses) // 10)} steps: {shown}"]
