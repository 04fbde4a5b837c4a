"""one_at_a_time: the control, and each factor moved alone to each of its other levels.

k factors with L_i levels give 1 + Σ(L_i − 1) cells when the baseline's value is one of each
factor's levels (a factor whose baseline value is not a level adds all L_i). Each cell differs
from the shared control in one factor: the main effects are measured at the control's values of
the other factors, and no interaction is estimable.
"""

from __future__ import annotations

from typing import Any


def cells(
    keys: list[str], levels: list[list[Any]], baseline: dict[str, Any], ablation: dict
) -> list[tuple[tuple[str, Any], ...]]:
    out = []
    for i, key in enumerate(keys):
        for level in levels[i]:
            if level == baseline[key]:
                continue  # the control itself
            out.append(tuple((k, level if k == key else baseline[k]) for k in keys))
    return out
