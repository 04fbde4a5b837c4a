"""Ablation effects as linear contrasts over the plan's cells, read from the plan table alone.

A cell is a tuple of levels (one per factor, runs.tsv's columns between `run` and `seed`); the
control is the cell of the `control` tier (the baseline recipe). An effect is a set of weights
over cells; its value at a seed is the weighted sum of the cells' metric at that seed.

- cell: a cell against the control (+1, -1).
- main effect of factor f at level l (against the control's level c): for every cell with f = l
  whose partner (f = c, every other factor equal) is planned, the mean of (cell - partner): the
  main effect of a full factorial, the moved cell against the control in one-at-a-time. Where no
  partner exists (a two-level fractional design), the mean over cells with f = l minus the mean
  over cells with f = c, if the design is balanced in f (each level on equally many cells).
- interaction of f = l and g = m: the mean over complete quadruples of
  (l, m) - (l, c_g) - (c_f, m) + (c_f, c_g); not estimable (left out) where none is planned.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

Cell = tuple[str, ...]


@dataclass(frozen=True)
class Contrast:
    name: str  # e.g. "train.lr 0.001 -> 0.003"
    kind: str  # cell, main, interaction
    factors: tuple[str, ...]
    weights: tuple[tuple[Cell, float], ...]


def _moved(factors: list[str], control: Cell, cell: Cell) -> str:
    parts = [f"{f} {c} -> {v}" for f, c, v in zip(factors, control, cell, strict=True) if c != v]
    return ", ".join(parts) or "control"


def contrasts(factors: list[str], cells: list[Cell], control: Cell) -> list[Contrast]:
    planned = set(cells)
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
    for i, f in enumerate(factors):
        levels = sorted({c[i] for c in cells} - {control[i]})
        for level in levels:
            with_level = [c for c in cells if c[i] == level]
            pairs = [(c, c[:i] + (control[i],) + c[i + 1 :]) for c in with_level]
            pairs = [(c, p) for c, p in pairs if p in planned]
            weights: dict[Cell, float] = {}
            if pairs:
                for c, p in pairs:
                    weights[c] = weights.get(c, 0.0) + 1 / len(pairs)
                    weights[p] = weights.get(p, 0.0) - 1 / len(pairs)
            else:
                at_control = [c for c in cells if c[i] == control[i]]
                if not at_control or len(at_control) != len(with_level):
                    continue  # unbalanced and unpaired: not estimable from this plan
                for c in with_level:
                    weights[c] = weights.get(c, 0.0) + 1 / len(with_level)
                for c in at_control:
                    weights[c] = weights.get(c, 0.0) - 1 / len(at_control)
            out.append(
                Contrast(f"{f} {control[i]} -> {level}", "main", (f,), tuple(weights.items()))
            )
    for (i, f), (j, g) in combinations(enumerate(factors), 2):
        for lf in sorted({c[i] for c in cells} - {control[i]}):
            for lg in sorted({c[j] for c in cells} - {control[j]}):
                quads = []
                for c in cells:
                    if c[i] != lf or c[j] != lg:
                        continue

                    def at(vi, vj, c=c, i=i, j=j):
                        x = list(c)
                        x[i], x[j] = vi, vj
                        return tuple(x)

                    quad = [
                        at(lf, lg),
                        at(lf, control[j]),
                        at(control[i], lg),
                        at(control[i], control[j]),
                    ]
                    if all(q in planned for q in quad):
                        quads.append(quad)
                if not quads:
                    continue
                weights: dict[Cell, float] = {}
                for quad in quads:
                    for q, sign in zip(quad, (1, -1, -1, 1), strict=True):
                        weights[q] = weights.get(q, 0.0) + sign / len(quads)
                out.append(
                    Contrast(
                        f"{f} {control[i]} -> {lf} x {g} {control[j]} -> {lg}",
                        "interaction",
                        (f, g),
                        tuple((c, w) for c, w in weights.items() if w != 0),
                    )
                )
    return out
