"""explicit: the cells the user lists in `ablation.explicit.cells`, in that order.

Each cell is a mapping {factor key: level}; a factor it leaves out keeps the baseline's value,
so `{train.lr: 1.0e-4}` is the control with lr moved. Every key must be a factor and every level
one of that factor's levels (the factors stay the one list of what the plan may vary).
"""

from __future__ import annotations

from typing import Any

from campaign.core.errors import CampaignError


def cells(
    keys: list[str], levels: list[list[Any]], baseline: dict[str, Any], ablation: dict
) -> list[tuple[tuple[str, Any], ...]]:
    listed = ablation["explicit"]["cells"]
    if not listed:
        raise CampaignError(
            "ablation.explicit.cells: design explicit needs a list of cells, each a mapping "
            "{factor key: level}"
        )
    allowed = dict(zip(keys, levels, strict=True))
    out = []
    for i, given in enumerate(listed):
        where = f"ablation.explicit.cells[{i}]"
        for key, level in given.items():
            if key not in allowed:
                known = ", ".join(keys) or "none"
                raise CampaignError(f"{where}: {key} is not a factor (factors: {known})")
            if not any(_same(level, lv) for lv in allowed[key]):
                shown = ", ".join(map(str, allowed[key]))
                raise CampaignError(f"{where}.{key}: {level!r} is not one of its levels ({shown})")
        out.append(tuple((k, given.get(k, baseline[k])) for k in keys))
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same kind (YAML's true is not the level 1)."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)
