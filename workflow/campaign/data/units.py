"""Leak units: records joined (union-find) by a shared group and, under ``split.dedup.policy:
unite``, by exact and near duplicates, so that a unit is assigned to one split as a whole; the
duplicate clusters ``drop`` uses instead; the check that no unit is too large to place; and the
small pieces of the assignment the audit and the salt search reuse (a unit's position, the
split an interval owns, the cutoff)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import blake3
import numpy as np

from campaign.core.errors import CampaignError
from campaign.data.dedup import (
    DuplicateCluster,
    UnionFind,
    duplicate_clusters,
    exact_groups,
    near_pairs_normalized,
    normalize,
    splitmix64,
)
from campaign.data.settings import TRAIN, check_cfg, parse_cutoff

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class LeakUnits:
    """The leak structure of n records (all lists in record order).

    ids, labels: (n,); groups: (n,) group value or None; unit: (n,) unit key of each record;
    exact: exact-duplicate clusters (lists of ids); near_pairs: (id_a, id_b, jaccard) between
    exact-cluster representatives; clusters: both kinds, with labels and conflicts;
    duplicate_of: (n,) index of the smallest record id of the record's duplicate component
    (exact and near pairs joined, chains too), or -1 for a record without duplicates;
    policy: ``split.dedup.policy`` the units were joined under."""

    ids: list[str]
    labels: list[str]
    groups: list[str | None]
    unit: list[str]
    exact: list[list[str]]
    near_pairs: list[tuple[str, str, float]]
    clusters: list[DuplicateCluster]
    duplicate_of: list[int]
    policy: str = "unite"


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
    # A conversation's label only stratifies (one stratum when none is named): the check is for
    # a classifier's labels, which need two classes to learn anything.
    if len(labels) < 2 and "messages" not in records:
        raise CampaignError(
            f"data.fields.label: all {len(records)} records have label {labels[0]!r}; a split "
            "needs at least two classes"
        )


def _groups(records: pd.DataFrame) -> list[str | None]:
    return [None if g is None or g != g else str(g) for g in records["group"].tolist()]


def _anchor_units(ids: list[str], groups: list[str | None], uf: UnionFind) -> list[str]:
    """(n,) unit key of each record: the smallest anchor of its set (see ``split``)."""
    anchors = [f"g:{g}" if g is not None else f"i:{i}" for i, g in zip(ids, groups, strict=True)]
    roots = uf.roots()
    key_of_root: dict[int, str] = {}
    for root, anchor in zip(roots, anchors, strict=True):
        if root not in key_of_root or anchor < key_of_root[root]:
            key_of_root[root] = anchor
    return [key_of_root[r] for r in roots]


def leak_units(records: pd.DataFrame, near: dict, seed: int, policy: str = "unite") -> LeakUnits:
    """Units of a ``manifest.load_records`` frame: union-find over groups and, with policy
    ``unite``, over exact clusters and near pairs too (near: ``split.dedup.near``; seed draws
    the MinHash functions). With ``drop`` units are groups only; the duplicate components are
    kept in ``duplicate_of`` for the split to resolve."""
    ids = [str(i) for i in records["id"].tolist()]
    labels = [str(x) for x in records["label"].tolist()]
    groups = _groups(records)
    normalized = [normalize(t) for t in records["text"].tolist()]
    exact = exact_groups(ids, normalized)
    near_pairs = near_pairs_normalized(ids, normalized, seed=seed, **near)

    index = {record_id: i for i, record_id in enumerate(ids)}
    units = UnionFind(len(ids))
    first_of_group: dict[str, int] = {}
    for i, group in enumerate(groups):
        if group is not None:
            units.union(first_of_group.setdefault(group, i), i)
    duplicates = UnionFind(len(ids))
    edges = [(index[c[0]], index[other]) for c in exact for other in c[1:]]
    edges += [(index[a], index[b]) for a, b, _ in near_pairs]
    for a, b in edges:
        duplicates.union(a, b)
        if policy == "unite":
            units.union(a, b)

    smallest: dict[int, int] = {}
    for i, root in enumerate(duplicates.roots()):
        if root not in smallest or ids[i] < ids[smallest[root]]:
            smallest[root] = i
    roots = duplicates.roots()
    sizes = Counter(roots)
    duplicate_of = [smallest[r] if sizes[r] > 1 else -1 for r in roots]
    clusters = duplicate_clusters(ids, labels, exact, near_pairs)
    return LeakUnits(
        ids,
        labels,
        groups,
        _anchor_units(ids, groups, units),
        exact,
        near_pairs,
        clusters,
        duplicate_of,
        policy,
    )


def restrict(units: LeakUnits, keep: list[bool]) -> LeakUnits:
    """The leak structure of the kept records only (keep: (n,)): exact clusters cut to their
    kept members, near pairs moved to the smallest kept copy of each end (a pair whose end has
    no kept copy is gone with it), clusters recomputed; unit keys as before."""
    kept = [i for i, k in enumerate(keep) if k]
    ids = [units.ids[i] for i in kept]
    labels = [units.labels[i] for i in kept]
    alive = {units.ids[i] for i in kept}
    exact, stand_in = [], {}
    for cluster in units.exact:
        members = [m for m in cluster if m in alive]
        stand_in[cluster[0]] = members[0] if members else None
        if len(members) >= 2:
            exact.append(members)
    near = []
    for a, b, score in units.near_pairs:
        a2 = stand_in.get(a, a if a in alive else None)
        b2 = stand_in.get(b, b if b in alive else None)
        if a2 is not None and b2 is not None:
            near.append((min(a2, b2), max(a2, b2), score))
    position = {old: new for new, old in enumerate(kept)}
    duplicate_of = []
    for i in kept:
        j = units.duplicate_of[i]
        duplicate_of.append(position.get(j, -1) if j >= 0 else -1)
    return LeakUnits(
        ids,
        labels,
        [units.groups[i] for i in kept],
        [units.unit[i] for i in kept],
        exact,
        sorted(near),
        duplicate_clusters(ids, labels, exact, near),
        duplicate_of,
        units.policy,
    )


def _limits(cfg: dict) -> tuple[float, float]:
    """(largest share of the records one evaluation split can hold, largest share of the records
    one unit may have and still go to train) within ``split.size_tolerance``: a unit of share u
    in train makes train's expected share u + f_train (1 - u)."""
    fractions, tolerance = cfg["fractions"], cfg["size_tolerance"]
    eval_cap = max(f for name, f in fractions.items() if name != TRAIN) + tolerance
    f_train = fractions[TRAIN]
    train_cap = 1.0 if f_train >= 1 else tolerance / (1.0 - f_train)
    return eval_cap, train_cap


def check_unit_sizes(units: LeakUnits, cfg: dict, group_units: Counter | None = None) -> None:
    """Raise CampaignError (one line) when the largest unit cannot be placed anywhere within
    ``split.size_tolerance``: larger than any evaluation split can hold, and too large for train
    to absorb. Names its size, its largest groups and what would resolve it. Not applied to
    temporal splits (their sizes follow the cutoff). group_units: records per group-only unit,
    to tell whether ``split.dedup.policy: drop`` would resolve it."""
    if cfg["method"] == "temporal":
        return
    sizes = Counter(units.unit)
    n = len(units.unit)
    key, size = min(sizes.items(), key=lambda kv: (-kv[1], kv[0]))
    share = size / n
    eval_cap, train_cap = _limits(cfg)
    if share <= eval_cap or share <= train_cap:
        return
    in_unit = Counter(
        g if g is not None else "(no group)"
        for g, k in zip(units.groups, units.unit, strict=True)
        if k == key
    )
    n_groups = sum(1 for g in in_unit if g != "(no group)")
    top = ", ".join(f"{g} ({c:,})" for g, c in sorted(in_unit.items(), key=lambda x: -x[1])[:3])
    fixes = []
    if units.policy == "unite" and n_groups > 1:
        largest = max(group_units.values()) / n if group_units else None
        if largest is not None and (largest <= eval_cap or largest <= train_cap):
            fixes.append(
                f"split.dedup.policy: drop (duplicates then no longer join groups; the largest "
                f"group-only unit is {largest:.1%})"
            )
        else:
            fixes.append("split.dedup.policy: drop (duplicates then no longer join groups)")
        fixes.append("a higher split.dedup.near.threshold (fewer near duplicates join)")
    fixes.append("a finer data.fields.group")
    needed = min(share - (eval_cap - cfg["size_tolerance"]), share * (1 - cfg["fractions"][TRAIN]))
    fixes.append(f"split.size_tolerance >= {math.ceil(needed * 1000) / 1000:g} (sizes off target)")
    raise CampaignError(
        f"split: unit {key!r} holds {size:,} of {n:,} records ({share:.1%}) in {n_groups:,} "
        f"groups, more than an evaluation split can hold ({eval_cap:.1%} with "
        f"split.size_tolerance {cfg['size_tolerance']}) and more than train can absorb "
        f"({train_cap:.1%}); largest groups: {top}; resolve with " + ", or ".join(fixes)
    )


def group_unit_sizes(units: LeakUnits) -> Counter:
    """Records per unit if only groups joined records (what ``drop`` would make)."""
    pairs = zip(units.ids, units.groups, strict=True)
    return Counter(f"g:{g}" if g is not None else f"i:{i}" for i, g in pairs)


def split_edges(fractions: dict[str, float]) -> tuple[list[str], np.ndarray]:
    """(names in order, (n_splits - 1,) inner interval edges): split i owns [edge_{i-1},
    edge_i) of [0, 1); the fractions are rescaled to sum to 1."""
    names = sorted(fractions)
    total = math.fsum(fractions.values())
    edges, edge = [], 0.0
    for name in names[:-1]:
        edge += fractions[name] / total
        edges.append(edge)
    return names, np.array(edges, dtype=np.float64)


def pick_split(position: float, fractions: dict[str, float]) -> str:
    """The split (in name order, intervals of [0, 1) as long as the fractions) holding position;
    fractions need not sum to 1 (they are rescaled)."""
    names, edges = split_edges(fractions)
    return names[int(np.searchsorted(edges, position, side="right"))]


def drop_copies(units: LeakUnits, split: list[str]) -> list[bool]:
    """(n,) whether each record stays under ``split.dedup.policy: drop``.

    Within each duplicate component (exact and near pairs, chains too) whose members fall in
    more than one split: when some member is in train, its train members stay and the members
    in evaluation splits are dropped; otherwise the members in the split of the component's
    representative (its smallest id) stay and the others are dropped. Copies inside one split
    stay: they leak nothing across splits. Train never loses a record."""
    splits_of: dict[int, set[str]] = {}
    for i, rep in enumerate(units.duplicate_of):
        if rep >= 0:
            splits_of.setdefault(rep, set()).add(split[i])
    keep = []
    for i, rep in enumerate(units.duplicate_of):
        if rep < 0 or len(splits_of[rep]) == 1 or split[i] == TRAIN:
            keep.append(True)
        elif TRAIN in splits_of[rep]:
            keep.append(False)
        else:
            keep.append(split[i] == split[rep])
    return keep


def time_text(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _hash64(domain: bytes, text: str) -> int:
    """First 8 bytes (little-endian) of BLAKE3(domain 0x1f text)."""
    digest = blake3.blake3(domain + b"\x1f" + text.encode("utf-8")).digest(length=8)
    return int.from_bytes(digest, "little")


def key_hashes(keys: list[str]) -> np.ndarray:
    """(n_units,) uint64: each unit key's 64-bit BLAKE3 hash (computed once per unit)."""
    return np.array([_hash64(b"unit", k) for k in keys], dtype=np.uint64)


def salt_hash(salt: str) -> np.uint64:
    """The salt's 64-bit BLAKE3 hash."""
    return np.uint64(_hash64(b"salt", salt))


def positions(salt_hashes: np.ndarray, unit_hashes: np.ndarray) -> np.ndarray:
    """(n_salts, n_units) positions in [0, 1): the top 53 bits of SplitMix64(unit ^ salt) /
    2^53. salt_hashes: (n_salts,) uint64; unit_hashes: (n_units,) uint64."""
    with np.errstate(over="ignore"):
        mixed = splitmix64(salt_hashes[:, None] ^ unit_hashes[None, :])
    return (mixed >> np.uint64(11)).astype(np.float64) * 2.0**-53


def unit_position(salt: str, key: str) -> float:
    """The unit's place in [0, 1) (see ``positions``): a function of the salt and the key alone,
    computed per unit with two BLAKE3 hashes and a 64-bit mixer, so a salt search scores
    thousands of salts at once."""
    return float(positions(np.array([salt_hash(salt)]), key_hashes([key]))[0, 0])


def record_times(records: pd.DataFrame) -> list[datetime]:
    import pandas as pd

    stamps = records["timestamp"]
    if stamps.isna().all():
        raise CampaignError(
            "data.fields.timestamp: split.method 'temporal' needs timestamps, but the records "
            "have none (map data.fields.timestamp)"
        )
    if stamps.isna().any():
        bad = records["id"][stamps.isna()].iloc[0]
        raise CampaignError(
            f"record {bad!r}: no timestamp (data.fields.timestamp), but split.method is 'temporal'"
        )
    return [pd.Timestamp(t).to_pydatetime().astimezone(UTC) for t in stamps.tolist()]


def latest_times(units: LeakUnits, cfg: dict, stamps: list[datetime]) -> dict[str, datetime]:
    """unit key -> its latest timestamp; CampaignError when the cutoff leaves no record before
    or after it, or would leave train empty."""
    cutoff = parse_cutoff(cfg["temporal_cutoff"])
    latest: dict[str, datetime] = {}
    for key, t in zip(units.unit, stamps, strict=True):
        latest[key] = max(latest.get(key, t), t)
    if min(stamps) >= cutoff:
        raise CampaignError(
            f"split.temporal_cutoff: no record is before {time_text(cutoff)} (the "
            f"earliest is {time_text(min(stamps))}); move the cutoff later"
        )
    if max(stamps) < cutoff:
        raise CampaignError(
            f"split.temporal_cutoff: no record is at or after {time_text(cutoff)} (the "
            f"latest is {time_text(max(stamps))}); move the cutoff earlier"
        )
    if all(t >= cutoff for t in latest.values()):
        raise CampaignError(
            f"split.temporal_cutoff: every unit with records before {time_text(cutoff)} "
            "also has records at or after it, so train would be empty; move the cutoff later"
        )
    return latest


def prepare(records: pd.DataFrame, cfg: dict, seed: int) -> tuple[LeakUnits, list | None]:
    """Checked params and records, their leak units (refused when one is too large to place),
    and the timestamps of a temporal split."""
    check_cfg(cfg)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise CampaignError(f"seed: expected an integer, got {seed!r}")
    check_records(records)
    if cfg["method"] == "group_hash" and records["group"].isna().all():
        raise CampaignError(
            "data.fields.group: split.method 'group_hash' needs a group field (author, source "
            "document, ...) but the records have none; map data.fields.group"
        )
    stamps = record_times(records) if cfg["method"] == "temporal" else None
    units = leak_units(records, cfg["dedup"]["near"], int(seed), cfg["dedup"]["policy"])
    check_unit_sizes(units, cfg, group_unit_sizes(units))
    return units, stamps
