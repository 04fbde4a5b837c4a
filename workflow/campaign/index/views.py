"""The part of results/data/summary.json the index reads: the dataset hash. The summary also
holds each source's licence and origin, which do not change the index's bytes; the index stage's
content key hashes this view (Stage.input_views), and the stage reads nothing else of the file."""

from __future__ import annotations

import json
from pathlib import Path

from campaign.core.errors import CampaignError


def summary_view(path: Path) -> dict:
    """{"dataset_hash": ...} of the data summary."""
    try:
        summary = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise CampaignError(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("dataset_hash"), str):
        raise CampaignError(f"{path}: expected a key 'dataset_hash'")
    return {"dataset_hash": summary["dataset_hash"]}
