"""Ablation designs, a registry: one module per design, named after it (`ablation.design`).

A design module defines `cells(keys, levels, baseline, ablation) -> list[cell]`:
    keys      the factors' dotted keys (`train.lr`), in params order
    levels    each factor's levels, in params order
    baseline  the control cell: each factor's value in the baseline recipe
    ablation  the whole `ablation` section (for a design's own settings)
and returns the cells to train besides the control, each a tuple of (key, level) for every
factor. The planner adds the control, merges identical cells and multiplies by the seeds.
"""

from __future__ import annotations

from types import ModuleType

from campaign.core.errors import CampaignError
from campaign.core.registry import discover, member_names


def names() -> list[str]:
    """Design names, from the module files (imports nothing)."""
    return member_names(__name__)


def get(name: str) -> ModuleType:
    found = discover(__name__)
    if name not in found:
        raise CampaignError(f"ablation.design: unknown design {name!r} (known: {', '.join(found)})")
    return found[name]
