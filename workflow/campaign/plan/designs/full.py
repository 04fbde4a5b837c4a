"""full: every combination of the factors' levels (a full factorial)."""

from __future__ import annotations

import itertools
from typing import Any


def cells(
    keys: list[str], levels: list[list[Any]], baseline: dict[str, Any], ablation: dict
) -> list[tuple[tuple[str, Any], ...]]:
    if not keys:
        return []
    return [tuple(zip(keys, combo, strict=True)) for combo in itertools.product(*levels)]
