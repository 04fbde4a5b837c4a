"""What each memory lever that is a recipe key costs on the real recipe, measured: the bytes a
few training steps hold at their peak and the seconds per step, with the lever and without.

Each lever is one `train` key a user can set (LEVER_KEYS). For a lever the recipe already
enables, the recipe is measured against itself with the key at its default: the figures say what
the lever buys. Memory: the optimizer state's tensor bytes plus the peak of the tensors the
steps allocate (LiveTensorBytes: activations, gradients, temporaries; weights and the batch are
the same with and without a lever, and left out), the same bytes on every CPU run. Time: the mean
of the timed steps after one untimed step (a machine measurement: recorded, not compared).

A lever whose key cannot run here (a CUDA-only optimizer on the CPU; a model without gradient
checkpointing; packing for a classifier) is a row with the reason instead of numbers.
Packing keeps the examples of each step, so its figures compare like with like: the bytes and
time it saves by holding fewer, fuller rows (or costs, where its per-row masks outweigh that).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from campaign.core.defaults import TRAIN_DEFAULTS
from campaign.core.errors import CampaignError
from campaign.memory.levers import packing_unavailable

# lever -> the train keys it sets (what a fit-table suggestion names, `train.<key>`).
LEVER_KEYS: dict[str, dict[str, Any]] = {
    "gradient_checkpointing": {"gradient_checkpointing": True},
    "group_by_length": {"group_by_length": True},
    "optimizer": {"optimizer": "adamw_8bit"},
    "packing": {"packing": True},
}
# The keys' values that mean "lever off": their defaults (core/defaults.py).
OFF = {key: TRAIN_DEFAULTS[key] for key in LEVER_KEYS}

# Levers that only some tasks' models can take: lever -> why not for a task (None: it can);
# the fit table's row for the lever says the same words.
TASK_REFUSALS: dict[str, Callable[[str], str | None]] = {"packing": packing_unavailable}
# Per configuration, after one untimed step (the optimizer state then exists): the steps
# whose tensor bytes are counted (their peak is a result: two batches, so a lever's saving is
# not one batch's accident) and the steps timed (a machine measurement, recorded and not
# compared: one, where two cost the demo's preflight three more steps).
COUNTED_STEPS = 2
TIMED_STEPS = 1


def settings(lever: str) -> dict[str, Any]:
    """The fit table's suggestion for a lever: {"train.<key>": value}."""
    return {f"train.{k}": v for k, v in LEVER_KEYS[lever].items()}


def _state_bytes(optimizer) -> int:
    import torch

    from campaign.train import tensor_bytes

    return sum(
        tensor_bytes(v)
        for state in optimizer.state.values()
        for v in state.values()
        if isinstance(v, torch.Tensor)
    )


def measure_steps(
    trainer, timed_steps: int = TIMED_STEPS, counted_steps: int = COUNTED_STEPS
) -> dict[str, Any]:
    """{"peak_bytes", "optimizer_state_bytes", "step_peak_bytes", "seconds_per_step"} of a
    fresh trainer's first 1 + counted_steps + timed_steps steps (one untimed, then counted,
    then timed)."""
    from campaign.memory.measure import LiveTensorBytes, no_cycle_collection

    trainer.train_step()
    live = LiveTensorBytes()
    with no_cycle_collection(), live:
        for _ in range(counted_steps):
            trainer.train_step()
    step_peak = live.peak()
    live.close()
    started = time.perf_counter()
    for _ in range(timed_steps):
        trainer.train_step()
    seconds = (time.perf_counter() - started) / timed_steps
    state = _state_bytes(trainer.optimizer)
    return {
        "peak_bytes": state + step_peak,
        "optimizer_state_bytes": state,
        "step_peak_bytes": step_peak,
        "seconds_per_step": seconds,
    }


def lever_costs(
    make_trainer: Callable[..., Any],
    train_cfg: dict,
    device_type: str,
    levers: tuple[str, ...] = tuple(LEVER_KEYS),
    task: str | None = None,
) -> list[dict[str, Any]]:
    """One row per lever: {lever, setting, enabled, peak_bytes (with it), saves_bytes,
    step_time_ratio (with / without: above 1 is throughput lost), seconds_per_step, note}.

    make_trainer(**train_overrides): a fresh Trainer on the preflight sample with those keys.
    task: model.task (a lever the task's model cannot take, TASK_REFUSALS, is a row with the
    reason).
    """
    from campaign.train import optimizer_unavailable

    def off_state() -> dict[str, Any]:
        return {k: OFF[k] for keys in LEVER_KEYS.values() for k in keys}

    measured: dict[str, dict] = {}

    def measure(overrides: dict[str, Any]) -> dict:
        key = repr(sorted(overrides.items()))
        if key not in measured:
            measured[key] = measure_steps(make_trainer(**overrides))
        return measured[key]

    recipe = {k: train_cfg.get(k, OFF[k]) for k in OFF}
    rows = []
    for lever in levers:
        change = LEVER_KEYS[lever]
        enabled = all(recipe[k] == v for k, v in change.items())
        with_it = {**recipe, **change}
        without = {**recipe, **{k: off_state()[k] for k in change}}
        row = {
            "lever": lever,
            "setting": settings(lever),
            "enabled": enabled,
            "peak_bytes": None,
            "saves_bytes": None,
            "step_time_ratio": None,
            "seconds_per_step": None,
            "note": None,
        }
        reason = optimizer_unavailable(with_it["optimizer"], device_type)
        if task is not None and lever in TASK_REFUSALS:
            reason = TASK_REFUSALS[lever](task) or reason
        if reason is not None:
            rows.append({**row, "note": f"not measured here: {reason}"})
            continue
        try:
            on, off = measure(with_it), measure(without)
        except (CampaignError, RuntimeError, ValueError) as e:
            note = " ".join(str(e).split())[:200]
            rows.append({**row, "note": f"could not be measured: {note}"})
            continue
        rows.append(
            {
                **row,
                "peak_bytes": on["peak_bytes"],
                "saves_bytes": off["peak_bytes"] - on["peak_bytes"],
                "step_time_ratio": on["seconds_per_step"] / off["seconds_per_step"],
                "seconds_per_step": on["seconds_per_step"],
            }
        )
    return rows
