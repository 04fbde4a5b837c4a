"""Ablation designs, a registry: one module per design, named after it (`ablation.design`).

A design module defines `cells(keys, levels, baseline, ablation) -> list[cell]`:
    keys      the factors' dotted keys (`train.lr`), in params order
    levels    each factor's levels, in params order
    baseline  the control cell: each factor's value in the baseline recipe
    ablation  the whole `ablation` section (a design's own settings live under
              `ablation.<design name>`, e.g. `ablation.fractional.p`)
and returns the cells to train besides the control, each a tuple of (key, level) for every
factor, in the design's own order (the tie-break of the plan's order). The planner adds the
control, merges identical cells, multiplies by the seeds and orders the runs; what the cells can
estimate is worked out from the cells themselves (campaign.plan.estimability), so a design needs
no analysis of its own.

Optionally, `describe(keys, levels, baseline, ablation) -> list[str]`: lines that say what the
design is as written (the fractional design: its generators, resolution and alias structure),
printed by `campaign plan` and written to the plan's report.
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
