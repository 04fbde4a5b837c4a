"""Ablation effects as linear contrasts over the plan's cells, read from the plan table alone.

A cell is a tuple of levels (one per factor, runs.tsv's columns between `run` and `seed`); the
control is the cell of the `control` tier (the baseline recipe). An effect is a set of weights
over cells; its value at a seed is the weighted sum of the cells' metric at that seed.

Which cells estimate which main effect or interaction, with which weights, and whether the
design can estimate it at all, is the plan phase's answer (campaign.plan.effects:
estimable_contrasts, the same code that tells the plan what it will be able to say); this module
only names the contrasts and adds each cell against the control (+1, -1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from campaign.plan import estimable_contrasts

Cell = tuple[str, ...]


@dataclass(frozen=True)
class Contrast:
    name: str  # e.g. "train.lr 0.001 -> 0.003"
    kind: str  # cell, main, interaction
    factors: tuple[str, ...]
    weights: tuple[tuple[Cell, float], ...]
    estimability: str = ""  # the plan's verdict for an effect: clear, at_control, if_additive
    aliases: tuple[tuple[str, ...], ...] = ()


def _moved(factors: list[str], control: Cell, cell: Cell) -> str:
    parts = [f"{f} {c} -> {v}" for f, c, v in zip(factors, control, cell, strict=True) if c != v]
    return ", ".join(parts) or "control"


def contrasts(
    factors: list[str],
    cells: list[Cell],
    control: Cell,
    seeds: Mapping[Cell, int] | None = None,
) -> list[Contrast]:
    """Each cell against the control, then every estimable main effect and interaction.
    seeds: seeds run per cell (default 1 each; they set the plan's seeds-per-contrast only)."""
    out = [
        Contrast(
            f"{_moved(factors, control, cell)} (cell)",
            "cell",
            tuple(factors),
            ((cell, 1.0), (control, -1.0)),
        )
        for cell in cells
        if cell != control
    ]
    counted = [(c, (seeds or {}).get(c, 1)) for c in cells]
    for term in estimable_contrasts(counted, list(factors), control):
        for levels, weights in term["contrasts"]:
            moved = [f"{f} {control[factors.index(f)]} -> {lv}" for f, lv in levels.items()]
            out.append(
                Contrast(
                    " x ".join(moved),
                    "main" if len(term["term"]) == 1 else "interaction",
                    tuple(term["term"]),
                    tuple(weights),
                    term["kind"],
                    tuple(tuple(a) for a in term["aliases"]),
                )
            )
    return out
