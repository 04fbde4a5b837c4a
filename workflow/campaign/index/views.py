"""The part of results/data/summary.json the index reads: the dataset hash. The summary also
holds each source's licence and origin, which do not change the index's bytes; the index stage's
content key hashes this view (Stage.input_views), and the stage reads nothing else of the file."""

from __future__ import annotations

from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.io import read_json


def summary_view(path: Path) -> dict:
    """{"dataset_hash": ...} of the data summary."""
    summary = read_json(path)
    if not isinstance(summary.get("dataset_hash"), str):
        raise CampaignError(f"{path}: expected a key 'dataset_hash'")
    return {"dataset_hash": summary["dataset_hash"]}
