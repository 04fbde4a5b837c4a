"""Estimate against measurement, and whether a recipe fits each target card with its margin."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from campaign.core.errors import CampaignError
from campaign.memory.estimate import MICRO_BATCH, setting
from campaign.memory.levers import lever_rows
from campaign.memory.shape import GIB


def compare(estimate: dict[str, Any], measured: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows {component, estimated, measured, ratio} for the components both sides have.

    Activations: an analytic estimate's saved-for-backward bytes against the measured saved
    tensors; a measured (extrapolated) estimate's peak against the step's measured peak tensor
    bytes. On CUDA the step's estimated total is also set against the peak allocated.
    """
    est, got = estimate["bytes"], measured["bytes"]
    pairs = [
        ("weights", est["weights"], got["weights"]),
        ("gradients", est["gradients"], got["gradients"]),
        ("optimizer_state", est["optimizer_state"], got["optimizer_state"]),
    ]
    if "activations_detail" in estimate:
        saved = estimate["activations_detail"]["saved_for_backward"]
        pairs.append(("activations (saved)", saved, got["activations"]))
    else:
        pairs.append(("activations (peak)", est["activations"], got["activations_peak"]))
    if measured["peak"]["kind"] == "cuda_allocated":
        pairs.append(
            (
                "train step peak",
                estimate["phases"]["train_step"]["bytes"],
                measured["peak"]["bytes"],
            )
        )
    return [
        {"component": c, "estimated": e, "measured": m, "ratio": e / m if m else None}
        for c, e, m in pairs
    ]


def fit_table(
    estimate: dict[str, Any],
    cards: Sequence[dict[str, Any]],
    margin_fraction: float,
    variants: Sequence[dict[str, Any]] | None = None,
    packing: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Does the run fit each card, keeping `margin_fraction` of its memory free?

    cards: [{name, memory_gib}]. Per card: need (the estimate's peak phase), margin left (bytes,
    % of the card), fits, and max_micro_batch: the largest micro-batch whose every phase fits
    in memory_gib x (1 - margin_fraction), from fixed + bytes_per_example x micro_batch (None when
    no phase grows with the micro-batch; a phase that scales with another batch, a generation
    task's KV cache, counts as fixed there); source: "estimated" (analytic) or "measured";
    devices: the cards one run takes (train.devices; every need here is per card). A card
    the run does not fit lists the levers (`levers.lever_rows`): the arithmetic ones always,
    the recipe-changing ones from `variants` (`analytic_variants` / `measured_variants`);
    packing: {task, enabled, rows} for the packing lever (`levers.packing_row`).
    """
    if not 0 <= margin_fraction < 1:
        raise CampaignError(f"margin_fraction: {margin_fraction} is not in [0, 1)")
    phases = estimate["phases"]
    need, phase = estimate["peak_bytes"], estimate["peak_phase"]
    rows = []
    for n, card in enumerate(cards):
        name, gib = card.get("name"), card.get("memory_gib")
        if not isinstance(name, str) or not name:
            raise CampaignError(f"cards[{n}].name: expected a card name")
        if isinstance(gib, bool) or not isinstance(gib, int | float) or gib <= 0:
            raise CampaignError(f"cards[{n}].memory_gib: expected a number > 0, got {gib!r}")
        capacity = int(gib * GIB)
        usable = capacity * (1 - margin_fraction)
        limits = []
        for p in phases.values():
            if p.get("scales_with", MICRO_BATCH) != MICRO_BATCH:
                # A generation task's cache: the generation batch sets it, micro_batch cannot.
                if p["bytes"] > usable:
                    limits.append(0)
            elif p["bytes_per_example"] > 0:
                limits.append(
                    max(0, math.floor((usable - p["fixed_bytes"]) / p["bytes_per_example"]))
                )
            elif p["fixed_bytes"] > usable:
                limits.append(0)
        rows.append(
            {
                "card": name,
                "memory_bytes": capacity,
                "need_bytes": need,
                "phase": phase,
                "margin_bytes": capacity - need,
                "margin_pct": 100.0 * (capacity - need) / capacity,
                "required_margin_pct": 100.0 * margin_fraction,
                "fits": need <= usable,
                "micro_batch": estimate["micro_batch"],
                "devices": int(setting(estimate, "devices")),
                "max_micro_batch": min(limits) if limits else None,
                "source": estimate.get("source", "estimated"),
                "usable_bytes": int(usable),
                "levers": [] if need <= usable else lever_rows(estimate, variants, usable, packing),
            }
        )
    return rows
