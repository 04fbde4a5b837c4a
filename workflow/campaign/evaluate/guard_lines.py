"""The guard lines the evaluation's verdict carries, read from the guards' decisions
(results/guards/guards.json, written by campaign.guards.decide: its `lines`)."""

from __future__ import annotations

import json
from pathlib import Path

from campaign.core.errors import CampaignError


def guard_lines(paths: list[Path]) -> list[str]:
    """The lines of guards.json (campaign.guards.decide.decide_guards); none without one."""
    lines: list[str] = []
    for path in paths:
        try:
            lines += json.loads(Path(path).read_text(encoding="utf-8"))["lines"]
        except (OSError, ValueError, KeyError) as e:
            raise CampaignError(f"{path}: not the guards' decisions ({e})") from None
    return lines
