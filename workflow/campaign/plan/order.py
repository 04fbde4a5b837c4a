"""The plan's order: each cell by what it adds to what the plan can estimate, cheaper first.

Tiers, in order:
    control       the baseline recipe: every contrast is taken against it
    main          cells that complete the main-effect contrasts: each makes one more main-effect
                  parameter estimable (the rank of intercept + main effects grows)
    interaction   cells that make one more two-factor interaction parameter estimable
    higher_order  the design's other cells: they only add to three-factor and higher
                  interactions
    extra_seed    every cell again at the next seed (ablation.seeds, in order), one round per
                  seed, each round in the cells' order
The first seed's cells are tiered greedily: cells nearer the control (fewer factors moved) are
tried first, then cheaper ones, then the design's own order; a cell joins `main` if it makes the
main-effects model's rank grow, else `interaction` if it makes the two-factor model's rank grow.
Within a tier the cells are then listed cheaper first (ties in the design's order), so a cut from
the end drops the least useful runs and, among equally useful ones, the dearest.

Rank is measured on treatment-coded rows (an indicator per non-control level, and their
products for interactions): the same column spaces as any other coding of those models.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

TIERS = ("control", "main", "interaction", "higher_order", "extra_seed")

Cell = tuple[tuple[str, Any], ...]

# A row adds to the span when what is left of it after projecting out the span is longer than
# this, relative to its own length: rows hold 0 and 1, so a row in the span leaves ~1e-15.
_TOLERANCE = 1e-8


class Span:
    """An orthonormal basis of the rows added so far (Gram-Schmidt, twice for stability)."""

    def __init__(self, dim: int) -> None:
        self.basis = np.zeros((dim, dim))
        self.size = 0

    def add(self, row: np.ndarray) -> bool:
        """Add `row` if it is outside the span; say whether it was."""
        rest = row.astype(float)
        for _ in range(2):
            if self.size:
                q = self.basis[: self.size]
                rest = rest - q.T @ (q @ rest)
        norm = float(np.linalg.norm(rest))
        if norm <= _TOLERANCE * max(1.0, float(np.linalg.norm(row))):
            return False
        self.basis[self.size] = rest / norm
        self.size += 1
        return True

    @property
    def full(self) -> bool:
        """Every row is in the span now: nothing more can grow it."""
        return self.size == len(self.basis)


class Coding:
    """Treatment-coded rows of cells against the control: an indicator per level other than the
    control's (those some cell has), and for interactions their products. A cell's main-effects
    row has 1 + Σ m_i entries, its two-factor row 1 + Σ m_i + Σ_{i<j} m_i m_j."""

    def __init__(self, cells: Sequence[Cell]) -> None:
        control = cells[0]
        self.reference = [level for _, level in control]
        self.others: list[list[Any]] = [[] for _ in control]
        for cell in cells:
            for i, (_, level) in enumerate(cell):
                if level != self.reference[i] and level not in self.others[i]:
                    self.others[i].append(level)
        sizes = [len(o) for o in self.others]
        self.main_dim = 1 + sum(sizes)
        self.pair_dim = self.main_dim + sum(
            sizes[i] * sizes[j] for i in range(len(sizes)) for j in range(i + 1, len(sizes))
        )

    def indicators(self, cell: Cell) -> list[np.ndarray]:
        out = []
        for i, (_, level) in enumerate(cell):
            block = np.zeros(len(self.others[i]))
            if level != self.reference[i]:
                block[self.others[i].index(level)] = 1.0
            out.append(block)
        return out

    def main_row(self, cell: Cell) -> np.ndarray:
        return np.concatenate([np.ones(1), *self.indicators(cell)])

    def pair_row(self, cell: Cell) -> np.ndarray:
        blocks = self.indicators(cell)
        pairs = [
            np.outer(blocks[i], blocks[j]).ravel()
            for i in range(len(blocks))
            for j in range(i + 1, len(blocks))
        ]
        return np.concatenate([np.ones(1), *blocks, *pairs])


def distance(cell: Cell, control: Cell) -> int:
    """How many factors the cell moves away from the control."""
    return sum(a != b for (_, a), (_, b) in zip(cell, control, strict=True))


def tier_cells(cells: Sequence[Cell], costs: Sequence[float]) -> list[tuple[int, str]]:
    """(index into cells, tier) of every cell, in plan order. cells[0] is the control; all are
    distinct; costs: one number per cell, comparable (the planner's training tokens)."""
    control = cells[0]
    coding = Coding(cells)
    span_main, span_pair = Span(coding.main_dim), Span(coding.pair_dim)
    span_main.add(coding.main_row(control))
    span_pair.add(coding.pair_row(control))
    candidates = sorted(
        range(1, len(cells)), key=lambda i: (distance(cells[i], control), costs[i], i)
    )
    tier = {0: "control"}
    for i in candidates:
        if not span_main.full and span_main.add(coding.main_row(cells[i])):
            tier[i] = "main"
            span_pair.add(coding.pair_row(cells[i]))
    for i in candidates:
        if i not in tier:
            grows = not span_pair.full and span_pair.add(coding.pair_row(cells[i]))
            tier[i] = "interaction" if grows else "higher_order"
    rank = {name: n for n, name in enumerate(TIERS)}
    ordered = sorted(range(len(cells)), key=lambda i: (rank[tier[i]], costs[i], i))
    return [(i, tier[i]) for i in ordered]
