"""Leak units: records joined (union-find) by a shared group, exact duplicates and near
duplicates, so that a unit is assigned to one split as a whole; and the small pieces of the
assignment the audit reuses (a unit's position, the split an interval owns, the cutoff)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from campaign.core.errors import CampaignError
from campaign.core.hashing import hash_bytes
from campaign.data.dedup import (
    DuplicateCluster,
    UnionFind,
    duplicate_clusters,
    exact_groups,
    near_pairs_normalized,
    normalize,
)

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class LeakUnits:
    """The leak structure of n records (all lists in record order).

    ids, labels: (n,); groups: (n,) group value or None; unit: (n,) unit key of each record;
    exact: exact-duplicate clusters (lists of ids); near_pairs: (id_a, id_b, jaccard) between
    exact-cluster representatives; clusters: both kinds, with labels and conflicts."""

    ids: list[str]
    labels: list[str]
    groups: list[str | None]
    unit: list[str]
    exact: list[list[str]]
    near_pairs: list[tuple[str, str, float]]
    clusters: list[DuplicateCluster]


def check_records(records: pd.DataFrame) -> None:
    missing = [c for c in ("id", "text", "label", "group", "timestamp") if c not in records]
    if missing:
        raise CampaignError(f"records: missing columns {', '.join(missing)}")
    if not len(records):
        raise CampaignError("records: there are no records to split")
    if records["id"].duplicated().any():
        dup = records["id"][records["id"].duplicated()].iloc[0]
        raise CampaignError(f"record {dup!r}: id appears twice")
    labels = records["label"].unique()
    if len(labels) < 2:
        raise CampaignError(
            f"data.fields.label: all {len(records)} records have label {labels[0]!r}; a split "
            "needs at least two classes"
        )


def _groups(records: pd.DataFrame) -> list[str | None]:
    return [None if g is None or g != g else str(g) for g in records["group"].tolist()]


def leak_units(records: pd.DataFrame, near: dict, seed: int) -> LeakUnits:
    """Units of a ``manifest.load_records`` frame: union-find over groups, exact clusters and
    near pairs (near: ``split.dedup.near``; seed draws the MinHash functions)."""
    ids = [str(i) for i in records["id"].tolist()]
    labels = [str(x) for x in records["label"].tolist()]
    groups = _groups(records)
    normalized = [normalize(t) for t in records["text"].tolist()]
    exact = exact_groups(ids, normalized)
    near_pairs = near_pairs_normalized(ids, normalized, seed=seed, **near)

    index = {record_id: i for i, record_id in enumerate(ids)}
    uf = UnionFind(len(ids))
    first_of_group: dict[str, int] = {}
    for i, group in enumerate(groups):
        if group is not None:
            uf.union(first_of_group.setdefault(group, i), i)
    for cluster in exact:
        for other in cluster[1:]:
            uf.union(index[cluster[0]], index[other])
    for a, b, _ in near_pairs:
        uf.union(index[a], index[b])

    anchors = [f"g:{g}" if g is not None else f"i:{i}" for i, g in zip(ids, groups, strict=True)]
    roots = uf.roots()
    key_of_root: dict[int, str] = {}
    for root, anchor in zip(roots, anchors, strict=True):
        if root not in key_of_root or anchor < key_of_root[root]:
            key_of_root[root] = anchor
    unit = [key_of_root[r] for r in roots]
    clusters = duplicate_clusters(ids, labels, exact, near_pairs)
    return LeakUnits(ids, labels, groups, unit, exact, near_pairs, clusters)


def pick_split(position: float, fractions: dict[str, float]) -> str:
    """The split (in name order, intervals of [0, 1) as long as the fractions) holding position;
    fractions need not sum to 1 (they are rescaled)."""
    names = sorted(fractions)
    total = math.fsum(fractions.values())
    edge = 0.0
    for name in names[:-1]:
        edge += fractions[name] / total
        if position < edge:
            return name
    return names[-1]


def time_text(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def unit_position(salt: str, key: str) -> float:
    """The unit's place in [0, 1): first 8 bytes of BLAKE3(salt 0x1f key) / 2^64."""
    digest = hash_bytes(f"{salt}\x1f{key}".encode())
    return int(digest[:16], 16) / 2.0**64
