"""Leak-free train/validation/test split of the manifest records, and the audit that proves it.

Leak units. Records are joined (union-find) when they share a group value (author, document,
...), when their normalized texts are equal (exact duplicates) or when their word-shingle
Jaccard reaches ``split.dedup.near.threshold`` (near duplicates; see ``campaign.dedup``).
Joins are transitive: a chain A~B~C is one unit. A unit is assigned as a whole, so no group and
no duplicate pair found by ``campaign.dedup`` can straddle two splits.

Unit key. A record's anchor is ``"g:" + group`` when it has a group, else ``"i:" + id``; the
unit key is the smallest anchor of its members (group anchors sort first). New records by an
author already in the data carry that author's anchor, so they join the unit without changing
its key.

Assignment (``method: group_hash``). A unit's position is ``x = BLAKE3(salt, 0x1f, key)``'s
first 8 bytes / 2^64, in [0, 1). The splits, in name order, own consecutive intervals of
[0, 1) whose lengths are ``split.fractions``; a unit goes to the split whose interval holds x.
The decision looks at nothing but the unit's key and the params, hence the stability promise:

    Adding records never moves an existing record, except when the new records (a) join two or
    more existing units into one (bridging: a new record that shares an author with one unit and
    is a near copy of a record of another, say), or (b) join an existing unit and bring an
    anchor that sorts before its key (a new author or, for group-less units, a smaller id,
    attached through a duplicate). Then the whole joined unit follows the new key. Pass
    ``previous`` (id -> split of an earlier run) and the audit lists every moved id with its
    reason (``bridged``, ``new_anchor``, or ``params`` when salt/fractions/dedup changed).
    In temporal mode a unit also leaves train when it gains a record at or after the cutoff.
    Duplicate detection among existing records does not change when records are added: each
    pair is decided from its two texts and the seed alone.

Stratification: what is promised, and why not more. Any rule that never moves an existing unit
whatever is added must decide each unit from that unit alone (if unit u's split depended on
the others, adding some could change it). So the splits are independent per-unit draws and
their label proportions are right in expectation only; the spread is that of a weighted
binomial, about sqrt(sum_u n_uL^2 f (1 - f)) / (f N) for label L in a split of fraction f,
which is large when units are few and big. Stratified hashing (a position drawn per majority-
label stratum) is still one independent draw per unit, so it has the same spread; shrinking
it needs units ranked against each other, which is exactly what breaks stability (and a
unit's majority label can flip as it grows). We therefore keep stability strict and make
balance a CHECKED property: the audit measures, per split and label, ``|share of label in
split - share overall|`` and its maximum, and ``check_audit`` fails when that exceeds
``split.stratify_tolerance`` (absolute; set 1.0 to switch the check off, e.g. for temporal
splits of drifting data). The one free choice left is the salt, a single draw for the whole
split: ``find_salt`` tries ``<salt>-0``, ``<salt>-1``, ... and returns the best one within the
tolerance (rerandomization, see there). Once it is in params, growth keeps every record in
place; if growth pushes the deviation over the tolerance the audit fails and says so.
On the demo corpus (3,000 records, 254 units, up to 66 records each) the median deviation over
salts is ~0.13 and only ~0.1-1% of salts reach 0.05; on 3,000 records with a 90/8/2 label mix
and authors of 1-4 records, every one of 100 salts did.

Temporal mode (``method: temporal``). A unit goes to train when its LATEST timestamp is before
``split.temporal_cutoff`` (strictly), so no record at or after the cutoff ever reaches train;
units with records on both sides go to evaluation whole (the audit counts the pre-cutoff
records pulled along). Evaluation units are divided among the other splits by the same salted
position, with their fractions rescaled to sum to 1 (``fractions.train`` is not used).

Determinism: the assignment depends on the records, the params and ``seed`` (which draws the
MinHash functions; it can only change which near pairs are found), never on the input order.
The audit's naive contrast (per-record uniform split, the usual ``train_test_split``) draws from
``numpy.random.default_rng([seed, 1])``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from campaign.dedup import (
    DuplicateCluster,
    UnionFind,
    check_near_params,
    duplicate_clusters,
    exact_groups,
    near_pairs_normalized,
    normalize,
)
from campaign.errors import CampaignError
from campaign.hashing import hash_bytes

if TYPE_CHECKING:
    import pandas as pd

METHODS = ("group_hash", "temporal")
CFG_KEYS = (
    "method",
    "fractions",
    "salt",
    "stratify_tolerance",
    "temporal_cutoff",
    "dedup",
    "audit",
)
NEAR_KEYS = ("threshold", "num_perm", "shingle_size")
POLICY_KEYS = ("max_group_overlap", "max_cross_split_duplicates", "allow_label_conflicts")
ASSIGNMENT_COLUMNS = ("id", "text", "label", "group", "unit", "split")
FRACTION_SUM_TOLERANCE = 1e-9
TRAIN = "train"
_EXAMPLES = 5  # examples kept in the audit per finding
_NAIVE_STREAM = 1  # default_rng([seed, _NAIVE_STREAM]) draws the naive contrast split


# ---------------------------------------------------------------------------------------------
# Params


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _parse_cutoff(value: Any) -> datetime:
    """``split.temporal_cutoff`` as an aware UTC datetime: an ISO 8601 string, or the datetime
    or date YAML makes of an unquoted one; a time without an offset is UTC."""
    if isinstance(value, datetime):
        cutoff = value
    elif isinstance(value, date):
        cutoff = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            cutoff = datetime.fromisoformat(value)
        except ValueError:
            raise CampaignError(
                f"split.temporal_cutoff: {value!r} is not an ISO 8601 time "
                "(e.g. '2024-06-01T00:00:00Z')"
            ) from None
    else:
        raise CampaignError(
            "split.temporal_cutoff: expected an ISO 8601 time such as '2024-06-01T00:00:00Z', "
            f"got {value!r}"
        )
    return cutoff.replace(tzinfo=UTC) if cutoff.tzinfo is None else cutoff.astimezone(UTC)


def check_cfg(cfg: Any) -> None:
    """Raise CampaignError (one line naming the ``split.<key>``) unless cfg has the shape
    described in ``make_splits``."""
    if not isinstance(cfg, dict):
        raise CampaignError(f"split: expected a mapping with {', '.join(CFG_KEYS)}")
    for key in cfg:
        if key not in CFG_KEYS:
            raise CampaignError(f"split.{key}: unknown key; expected {', '.join(CFG_KEYS)}")
    for key in CFG_KEYS:
        if key not in cfg:
            hint = " (use null unless method is 'temporal')" if key == "temporal_cutoff" else ""
            raise CampaignError(f"split.{key}: missing{hint}")
    if cfg["method"] not in METHODS:
        raise CampaignError(f"split.method: {cfg['method']!r} is not one of {', '.join(METHODS)}")

    fractions = cfg["fractions"]
    if not isinstance(fractions, dict) or len(fractions) < 2 or TRAIN not in fractions:
        raise CampaignError(
            "split.fractions: expected a mapping of split name to fraction with 'train' and at "
            f"least one other split, got {fractions!r}"
        )
    for name, value in fractions.items():
        if not isinstance(name, str) or not name:
            raise CampaignError(f"split.fractions: split names must be strings, got {name!r}")
        if not _number(value) or value < 0:
            raise CampaignError(f"split.fractions.{name}: expected a fraction >= 0, got {value!r}")
        if value == 0:
            raise CampaignError(
                f"split.fractions.{name}: is 0, so split {name!r} would be empty; give it a "
                "positive fraction or remove it"
            )
    total = math.fsum(fractions.values())
    if abs(total - 1.0) > FRACTION_SUM_TOLERANCE:
        raise CampaignError(
            f"split.fractions: sum to {total:.12g}, expected 1 (within {FRACTION_SUM_TOLERANCE})"
        )

    if not isinstance(cfg["salt"], str) or not cfg["salt"]:
        raise CampaignError(f"split.salt: expected a non-empty string, got {cfg['salt']!r}")
    tolerance = cfg["stratify_tolerance"]
    if not _number(tolerance) or not 0 < tolerance <= 1:
        raise CampaignError(
            f"split.stratify_tolerance: expected an absolute share in (0, 1], got {tolerance!r}"
        )
    if cfg["method"] == "temporal":
        if cfg["temporal_cutoff"] is None:
            raise CampaignError("split.temporal_cutoff: method 'temporal' needs a cutoff time")
        _parse_cutoff(cfg["temporal_cutoff"])
    elif cfg["temporal_cutoff"] is not None:
        raise CampaignError(
            f"split.temporal_cutoff: only used by method 'temporal' (method is "
            f"{cfg['method']!r}); set it to null"
        )

    dedup = cfg["dedup"]
    if not isinstance(dedup, dict) or set(dedup) != {"near"} or not isinstance(dedup["near"], dict):
        raise CampaignError("split.dedup: expected a mapping with one key, near")
    for key in dedup["near"]:
        if key not in NEAR_KEYS:
            raise CampaignError(
                f"split.dedup.near.{key}: unknown key; expected {', '.join(NEAR_KEYS)}"
            )
    for key in NEAR_KEYS:
        if key not in dedup["near"]:
            raise CampaignError(f"split.dedup.near.{key}: missing")
    check_near_params(**dedup["near"])
    check_policy(cfg["audit"])


def check_policy(policy: Any) -> None:
    """Raise CampaignError naming the ``split.audit.<key>`` unless policy is well formed."""
    if not isinstance(policy, dict):
        raise CampaignError(f"split.audit: expected a mapping with {', '.join(POLICY_KEYS)}")
    for key in policy:
        if key not in POLICY_KEYS:
            raise CampaignError(
                f"split.audit.{key}: unknown key; expected {', '.join(POLICY_KEYS)}"
            )
    for key in POLICY_KEYS:
        if key not in policy:
            raise CampaignError(f"split.audit.{key}: missing")
    for key in ("max_group_overlap", "max_cross_split_duplicates"):
        value = policy[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CampaignError(f"split.audit.{key}: expected an integer >= 0, got {value!r}")
    if not isinstance(policy["allow_label_conflicts"], bool):
        raise CampaignError(
            "split.audit.allow_label_conflicts: expected true or false, "
            f"got {policy['allow_label_conflicts']!r}"
        )


# ---------------------------------------------------------------------------------------------
# Leak units


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


def _check_records(records: pd.DataFrame) -> None:
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


# ---------------------------------------------------------------------------------------------
# Assignment


def unit_position(salt: str, key: str) -> float:
    """The unit's place in [0, 1): first 8 bytes of BLAKE3(salt 0x1f key) / 2^64."""
    digest = hash_bytes(f"{salt}\x1f{key}".encode())
    return int(digest[:16], 16) / 2.0**64


def _pick(position: float, fractions: dict[str, float]) -> str:
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


def assign_units(
    keys: Iterable[str],
    fractions: dict[str, float],
    salt: str,
    latest: dict[str, datetime] | None = None,
    cutoff: datetime | None = None,
) -> dict[str, str]:
    """unit key -> split. Group hash: by the salted position alone. Temporal (latest and cutoff
    given): train when the unit's latest timestamp < cutoff, else an evaluation split by
    position among the non-train fractions."""
    eval_fractions = {k: v for k, v in fractions.items() if k != TRAIN}
    out = {}
    for key in keys:
        if cutoff is not None and latest is not None:
            if latest[key] < cutoff:
                out[key] = TRAIN
            else:
                out[key] = _pick(unit_position(salt, key), eval_fractions)
        else:
            out[key] = _pick(unit_position(salt, key), fractions)
    return out


def _timestamps(records: pd.DataFrame) -> list[datetime]:
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


def _time_text(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _assign_keys(
    units: LeakUnits, keys: list[str], cfg: dict, stamps: list[datetime] | None
) -> list[str]:
    """(n_units,) split of each unit key in ``keys``."""
    if cfg["method"] != "temporal":
        split_of = assign_units(keys, cfg["fractions"], cfg["salt"])
        return [split_of[k] for k in keys]
    assert stamps is not None
    cutoff = _parse_cutoff(cfg["temporal_cutoff"])
    latest: dict[str, datetime] = {}
    for key, t in zip(units.unit, stamps, strict=True):
        latest[key] = max(latest.get(key, t), t)
    if min(stamps) >= cutoff:
        raise CampaignError(
            f"split.temporal_cutoff: no record is before {_time_text(cutoff)} (the "
            f"earliest is {_time_text(min(stamps))}); move the cutoff later"
        )
    if max(stamps) < cutoff:
        raise CampaignError(
            f"split.temporal_cutoff: no record is at or after {_time_text(cutoff)} (the "
            f"latest is {_time_text(max(stamps))}); move the cutoff earlier"
        )
    if all(t >= cutoff for t in latest.values()):
        raise CampaignError(
            f"split.temporal_cutoff: every unit with records before {_time_text(cutoff)} "
            "also has records at or after it, so train would be empty; move the cutoff later"
        )
    split_of = assign_units(keys, cfg["fractions"], cfg["salt"], latest, cutoff)
    return [split_of[k] for k in keys]


def _assign(units: LeakUnits, cfg: dict, stamps: list[datetime] | None) -> list[str]:
    """(n,) split of each record."""
    keys = sorted(set(units.unit))
    split_of = dict(zip(keys, _assign_keys(units, keys, cfg, stamps), strict=True))
    return [split_of[k] for k in units.unit]


def _check_nonempty(split: list[str], units: LeakUnits, cfg: dict) -> None:
    present = Counter(split)
    for name in sorted(cfg["fractions"]):
        if not present[name]:
            what = f"{len(set(units.unit))} units, {len(split)} records in all"
            if cfg["method"] == "temporal" and name == TRAIN:
                hint = "move split.temporal_cutoff later"
            else:
                hint = f"raise split.fractions.{name} or try another split.salt"
            raise CampaignError(f"split.fractions: split {name!r} got no records ({what}); {hint}")


# ---------------------------------------------------------------------------------------------
# Audit


def _cross_pairs(counts: Counter) -> int:
    """Pairs of items in different splits, from per-split counts."""
    total = sum(counts.values())
    return (total * total - sum(c * c for c in counts.values())) // 2


def _leaks(units: LeakUnits, split: Sequence[str], examples: bool) -> dict:
    """Leaking pairs of one assignment: records in different splits that share a group, are
    exact duplicates, or are near duplicates (near pairs expanded to the exact copies of both
    ends); and evaluation records with such a partner in train."""
    split_of = dict(zip(units.ids, split, strict=True))
    partners_in: dict[str, set[str]] = defaultdict(set)  # id -> splits of its leak partners

    by_group: dict[str, list[str]] = defaultdict(list)
    for record_id, group in zip(units.ids, units.groups, strict=True):
        if group is not None:
            by_group[group].append(record_id)
    group_examples, groups_shared, group_pairs = [], 0, 0
    for group, members in by_group.items():
        counts = Counter(split_of[m] for m in members)
        for m in members:
            partners_in[m].update(s for s, c in counts.items() if c > (split_of[m] == s))
        if len(counts) > 1:
            groups_shared += 1
            group_pairs += _cross_pairs(counts)
            if len(group_examples) < _EXAMPLES:
                group_examples.append({"group": group, "splits": dict(sorted(counts.items()))})

    copies = {c[0]: c for c in units.exact}  # representative (smallest id) -> cluster
    exact_examples, exact_pairs = [], 0
    for cluster in units.exact:
        counts = Counter(split_of[m] for m in cluster)
        for m in cluster:
            partners_in[m].update(s for s, c in counts.items() if c > (split_of[m] == s))
        if len(counts) > 1:
            exact_pairs += _cross_pairs(counts)
            if len(exact_examples) < _EXAMPLES:
                a = cluster[0]
                b = next(m for m in cluster if split_of[m] != split_of[a])
                exact_examples.append({"ids": [a, b], "splits": [split_of[a], split_of[b]]})

    near_examples, near_pairs = [], 0
    for a, b, score in units.near_pairs:
        side_a, side_b = copies.get(a, [a]), copies.get(b, [b])
        for x in side_a:
            partners_in[x].update(split_of[y] for y in side_b)
        for y in side_b:
            partners_in[y].update(split_of[x] for x in side_a)
        crossing = sum(split_of[x] != split_of[y] for x in side_a for y in side_b)
        if crossing:
            near_pairs += crossing
            if len(near_examples) < _EXAMPLES:
                near_examples.append(
                    {"ids": [a, b], "splits": [split_of[a], split_of[b]], "jaccard": score}
                )

    n_eval = sum(s != TRAIN for s in split)
    eval_leaking = sum(
        1 for i, s in zip(units.ids, split, strict=True) if s != TRAIN and TRAIN in partners_in[i]
    )
    out = {
        "groups_in_several_splits": groups_shared,
        "cross_split_group_pairs": group_pairs,
        "cross_split_exact_pairs": exact_pairs,
        "cross_split_near_pairs": near_pairs,
        "leaking_pairs": group_pairs + exact_pairs + near_pairs,
        "eval_records_with_train_partner": eval_leaking,
        "eval_records": n_eval,
    }
    if examples:
        out["examples"] = {"groups": group_examples, "exact": exact_examples, "near": near_examples}
    return out


def _label_shares(labels: Sequence[str], split: Sequence[str], names: list[str]) -> dict:
    classes = sorted(set(labels))
    overall = Counter(labels)
    n = len(labels)
    per_split: dict[str, Counter] = {name: Counter() for name in names}
    for label, s in zip(labels, split, strict=True):
        per_split[s][label] += 1
    shares = {}
    worst = {"value": 0.0, "split": None, "label": None}
    for name in names:
        size = sum(per_split[name].values())
        shares[name] = {c: (per_split[name][c] / size if size else 0.0) for c in classes}
        for c in classes:
            deviation = abs(shares[name][c] - overall[c] / n)
            if deviation > worst["value"]:
                worst = {"value": deviation, "split": name, "label": c}
    return {
        "classes": classes,
        "overall": {c: overall[c] / n for c in classes},
        "per_split": shares,
        "counts": {name: dict(sorted(per_split[name].items())) for name in names},
        "missing": {name: [c for c in classes if not per_split[name][c]] for name in names},
        "max_deviation": worst,
    }


def _naive_split(ids: Sequence[str], fractions: dict[str, float], seed: int) -> list[str]:
    """Per-record uniform split (the usual random split), over ids in sorted order."""
    order = sorted(range(len(ids)), key=ids.__getitem__)
    draws = np.random.default_rng([seed, _NAIVE_STREAM]).random(len(ids))
    split = [""] * len(ids)
    for i, u in zip(order, draws.tolist(), strict=True):
        split[i] = _pick(u, fractions)
    return split


def _moved(units: LeakUnits, split: Sequence[str], previous: dict[str, str], cfg: dict) -> dict:
    """Records whose split differs from ``previous``, with a reason for each moved unit."""
    prev_splits_of_unit: dict[str, set[str]] = defaultdict(set)
    old_anchor_of_unit: dict[str, set[str]] = defaultdict(set)
    for record_id, group, key in zip(units.ids, units.groups, units.unit, strict=True):
        if record_id in previous:
            prev_splits_of_unit[key].add(previous[record_id])
            old_anchor_of_unit[key].add(f"g:{group}" if group is not None else f"i:{record_id}")
    compared, moved, reasons = 0, [], Counter()
    unit_reason: dict[str, str] = {}
    for record_id, key, s in zip(units.ids, units.unit, split, strict=True):
        if record_id not in previous:
            continue
        compared += 1
        if previous[record_id] == s:
            continue
        if key not in unit_reason:
            if len(prev_splits_of_unit[key]) > 1:
                unit_reason[key] = "bridged"
            elif key not in old_anchor_of_unit[key]:
                unit_reason[key] = "new_anchor"
            elif cfg["method"] == "temporal" and previous[record_id] == TRAIN:
                unit_reason[key] = "crossed_cutoff"
            else:
                unit_reason[key] = "params"
        reasons[unit_reason[key]] += 1
        moved.append({"id": record_id, "from": previous[record_id], "to": s, "unit": key})
    bridged = sorted(k for k, r in unit_reason.items() if r == "bridged")
    return {
        "compared": compared,
        "count": len(moved),
        "by_reason": dict(sorted(reasons.items())),
        "bridged_units": bridged[:_EXAMPLES],
        "examples": moved[:_EXAMPLES],
        "ids": sorted(m["id"] for m in moved),
    }


def audit(
    units: LeakUnits,
    split: Sequence[str],
    cfg: dict,
    *,
    seed: int,
    timestamps: Sequence[datetime] | None = None,
    previous: dict[str, str] | None = None,
) -> dict:
    """The split audit, a JSON-able dict (see ``audit_table`` for what it holds).

    units: from ``leak_units``; split: (n,) split of each record; timestamps: (n,) UTC times,
    needed for the temporal section; previous: id -> split of an earlier assignment. Leaks are
    counted from the groups and duplicate pairs themselves, not from the units, so the audit
    checks the construction rather than restating it."""
    names = sorted(cfg["fractions"])
    n = len(split)
    records_in = Counter(split)
    units_in: dict[str, set[str]] = defaultdict(set)
    for key, s in zip(units.unit, split, strict=True):
        units_in[s].add(key)
    unit_sizes = Counter(units.unit)
    largest_key, largest_size = min(unit_sizes.items(), key=lambda kv: (-kv[1], kv[0]))
    conflicting = [c for c in units.clusters if c.conflicting]
    labels = _label_shares(units.labels, split, names)
    deviation = labels["max_deviation"]["value"]

    out: dict[str, Any] = {
        "method": cfg["method"],
        "salt": cfg["salt"],
        "seed": seed,
        "fractions": {k: cfg["fractions"][k] for k in names},
        "records": n,
        "units": len(unit_sizes),
        "largest_unit": {"unit": largest_key, "records": largest_size},
        "splits": {
            name: {
                "records": records_in[name],
                "units": len(units_in[name]),
                "share": records_in[name] / n,
                "target": cfg["fractions"][name],
            }
            for name in names
        },
        "dedup": {
            "near": dict(cfg["dedup"]["near"]),
            "exact_clusters": len(units.exact),
            "records_in_exact_clusters": sum(len(c) for c in units.exact),
            "near_pairs": len(units.near_pairs),
            "near_clusters": sum(c.kind == "near" for c in units.clusters),
        },
        "leaks": _leaks(units, split, examples=True),
        "label_conflicts": {
            "clusters": len(conflicting),
            "exact": sum(c.kind == "exact" for c in conflicting),
            "near": sum(c.kind == "near" for c in conflicting),
            "records": len({i for c in conflicting for i in c.ids}),
            "examples": [c.to_json() for c in conflicting[:_EXAMPLES]],
        },
        "labels": {
            **labels,
            "tolerance": cfg["stratify_tolerance"],
            "within_tolerance": deviation <= cfg["stratify_tolerance"],
        },
        "naive_split": {
            "what": "per-record uniform split with the same fractions",
            "rng": f"numpy.random.default_rng([{seed}, {_NAIVE_STREAM}])",
            "leaks": _leaks(units, _naive_split(units.ids, cfg["fractions"], seed), False),
        },
        "temporal": None,
        "moved": None if previous is None else _moved(units, split, previous, cfg),
    }
    if cfg["method"] == "temporal" and timestamps is not None:
        cutoff = _parse_cutoff(cfg["temporal_cutoff"])
        train_times = [t for t, s in zip(timestamps, split, strict=True) if s == TRAIN]
        eval_times = [t for t, s in zip(timestamps, split, strict=True) if s != TRAIN]
        out["temporal"] = {
            "cutoff": _time_text(cutoff),
            "train_latest": _time_text(max(train_times)) if train_times else None,
            "eval_earliest": _time_text(min(eval_times)) if eval_times else None,
            "train_records_at_or_after_cutoff": sum(t >= cutoff for t in train_times),
            "eval_records_before_cutoff": sum(t < cutoff for t in eval_times),
        }
    return out


def check_audit(audit: dict, policy: dict) -> None:
    """Raise CampaignError, one line listing every violation, when the audit breaks the policy
    (``split.audit``) or its label deviation exceeds ``split.stratify_tolerance``."""
    check_policy(policy)
    leaks = audit["leaks"]
    problems = []
    if leaks["groups_in_several_splits"] > policy["max_group_overlap"]:
        ex = leaks["examples"]["groups"][:1]
        eg = f", e.g. {ex[0]['group']!r} in {', '.join(ex[0]['splits'])}" if ex else ""
        problems.append(
            f"{leaks['groups_in_several_splits']} groups are in more than one split "
            f"(split.audit.max_group_overlap is {policy['max_group_overlap']}){eg}"
        )
    duplicates = leaks["cross_split_exact_pairs"] + leaks["cross_split_near_pairs"]
    if duplicates > policy["max_cross_split_duplicates"]:
        ex = (leaks["examples"]["exact"] + leaks["examples"]["near"])[:1]
        eg = (
            f", e.g. {ex[0]['ids'][0]} ({ex[0]['splits'][0]}) ~ {ex[0]['ids'][1]} "
            f"({ex[0]['splits'][1]})"
            if ex
            else ""
        )
        problems.append(
            f"{duplicates} duplicate pairs cross splits (exact "
            f"{leaks['cross_split_exact_pairs']}, near {leaks['cross_split_near_pairs']}; "
            f"split.audit.max_cross_split_duplicates is {policy['max_cross_split_duplicates']})"
            f"{eg}"
        )
    labels = audit["labels"]
    if not labels["within_tolerance"]:
        worst = labels["max_deviation"]
        split, label = worst["split"], worst["label"]
        problems.append(
            f"label {label!r} is {labels['per_split'][split][label]:.1%} of {split} but "
            f"{labels['overall'][label]:.1%} overall, off by {worst['value']:.3f} > "
            f"split.stratify_tolerance {labels['tolerance']} (try another split.salt)"
        )
    conflicts = audit["label_conflicts"]
    if conflicts["clusters"] and not policy["allow_label_conflicts"]:
        ex = conflicts["examples"][0]
        eg = ", ".join(f"{i} {lab!r}" for i, lab in zip(ex["ids"], ex["labels"], strict=True))
        problems.append(
            f"{conflicts['clusters']} duplicate clusters carry conflicting labels "
            f"(split.audit.allow_label_conflicts is false), e.g. {eg}"
        )
    if problems:
        raise CampaignError("split audit failed: " + "; ".join(problems))


def _fmt(value: float) -> str:
    return f"{value:.3f}"


def audit_table(audit: dict) -> str:
    """The audit as a readable text table (fixed-width columns)."""
    names = list(audit["splits"])
    lines = [
        f"Split audit: method {audit['method']}, salt {audit['salt']!r}, seed {audit['seed']}, "
        f"{audit['records']} records in {audit['units']} units (largest "
        f"{audit['largest_unit']['unit']!r}, {audit['largest_unit']['records']} records)",
        "",
        f"  {'split':<14}{'records':>9}{'units':>8}{'share':>8}{'target':>8}",
    ]
    for name in names:
        s = audit["splits"][name]
        lines.append(
            f"  {name:<14}{s['records']:>9}{s['units']:>8}{_fmt(s['share']):>8}"
            f"{_fmt(s['target']):>8}"
        )
    ours, naive = audit["leaks"], audit["naive_split"]["leaks"]
    rows = [
        ("groups in more than one split", "groups_in_several_splits"),
        ("same-group pairs across splits", "cross_split_group_pairs"),
        ("exact duplicate pairs across", "cross_split_exact_pairs"),
        ("near duplicate pairs across", "cross_split_near_pairs"),
        ("leaking pairs, total", "leaking_pairs"),
        ("eval records with a train partner", "eval_records_with_train_partner"),
    ]
    lines += ["", f"  {'leaks':<36}{'this split':>12}{'naive split':>13}"]
    for title, key in rows:
        lines.append(f"  {title:<36}{ours[key]:>12}{naive[key]:>13}")
    lines.append(f"  (naive: {audit['naive_split']['what']}, {audit['naive_split']['rng']})")
    d = audit["dedup"]
    lines += [
        "",
        f"Duplicates: {d['exact_clusters']} exact clusters ({d['records_in_exact_clusters']} "
        f"records), {d['near_pairs']} near pairs in {d['near_clusters']} near clusters "
        f"(threshold {d['near']['threshold']}, {d['near']['shingle_size']}-word shingles, "
        f"{d['near']['num_perm']} hashes)",
    ]
    c = audit["label_conflicts"]
    lines.append(
        f"Label conflicts inside duplicate clusters: {c['clusters']} clusters (exact "
        f"{c['exact']}, near {c['near']}), {c['records']} records"
    )
    for ex in c["examples"][:3]:
        pairs = ", ".join(f"{i}={lab}" for i, lab in zip(ex["ids"], ex["labels"], strict=True))
        lines.append(f"    {ex['kind']}: {pairs}")

    labels = audit["labels"]
    lines += ["", f"  {'label':<16}{'overall':>9}" + "".join(f"{n:>12}" for n in names)]
    for label in labels["classes"]:
        shares = "".join(f"{_fmt(labels['per_split'][n][label]):>12}" for n in names)
        lines.append(f"  {label:<16}{_fmt(labels['overall'][label]):>9}{shares}")
    worst = labels["max_deviation"]
    verdict = "within" if labels["within_tolerance"] else "OUTSIDE"
    lines.append(
        f"  max |share - overall| = {_fmt(worst['value'])} ({worst['split']}, {worst['label']}),"
        f" {verdict} tolerance {labels['tolerance']}"
    )
    missing = {n: m for n, m in labels["missing"].items() if m}
    lines.append(
        "  class coverage: every class in every split"
        if not missing
        else "  classes missing: " + "; ".join(f"{n}: {', '.join(m)}" for n, m in missing.items())
    )
    if audit["temporal"]:
        t = audit["temporal"]
        lines += [
            "",
            f"Temporal: cutoff {t['cutoff']}, train latest {t['train_latest']}, eval earliest "
            f"{t['eval_earliest']}; {t['eval_records_before_cutoff']} pre-cutoff records went to "
            f"evaluation with their unit, {t['train_records_at_or_after_cutoff']} train records at "
            "or after the cutoff",
        ]
    if audit["moved"] is not None:
        m = audit["moved"]
        reasons = ", ".join(f"{k} {v}" for k, v in m["by_reason"].items()) or "none"
        lines += [
            "",
            f"Moved since the previous assignment: {m['count']} of {m['compared']} records "
            f"({reasons})",
        ]
        for ex in m["examples"][:3]:
            lines.append(f"    {ex['id']}: {ex['from']} -> {ex['to']} (unit {ex['unit']!r})")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Entry points


def _prepare(records: pd.DataFrame, cfg: dict, seed: int) -> tuple[LeakUnits, list | None]:
    check_cfg(cfg)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise CampaignError(f"seed: expected an integer, got {seed!r}")
    _check_records(records)
    if cfg["method"] == "group_hash" and records["group"].isna().all():
        raise CampaignError(
            "data.fields.group: split.method 'group_hash' needs a group field (author, source "
            "document, ...) but the records have none; map data.fields.group"
        )
    stamps = _timestamps(records) if cfg["method"] == "temporal" else None
    return leak_units(records, cfg["dedup"]["near"], int(seed)), stamps


def make_splits(
    records: pd.DataFrame,
    cfg: dict,
    *,
    seed: int,
    previous: dict[str, str] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Split the records of ``manifest.load_records`` without leaks, and audit the result.

    cfg (params ``split``)::

        method: group_hash | temporal
        fractions: {train: 0.8, validation: 0.1, test: 0.1}   # > 0 each, sum 1 (+-1e-9)
        salt: "demo-1"                 # the split's identity; change it to redraw
        stratify_tolerance: 0.05       # max |label share in split - overall|, checked
        temporal_cutoff: null          # ISO 8601 time, required by (only by) temporal
        dedup: {near: {threshold: 0.5, num_perm: 128, shingle_size: 3}}
        audit: {max_group_overlap: 0, max_cross_split_duplicates: 0,
                allow_label_conflicts: true}

    seed: draws the MinHash functions and the audit's naive contrast split; previous: id ->
    split of an earlier run, to report moved records. Returns (assignments, audit):
    assignments has columns id, text, label, group, unit, split in the records' row order;
    audit as from ``audit``. Raises CampaignError on bad params or records and when a split
    is left empty; does NOT apply the audit policy (call ``check_audit``)."""
    import pandas as pd

    units, stamps = _prepare(records, cfg, seed)
    split = _assign(units, cfg, stamps)
    _check_nonempty(split, units, cfg)
    result = audit(units, split, cfg, seed=int(seed), timestamps=stamps, previous=previous)
    assignments = pd.DataFrame(
        {
            "id": pd.array(units.ids, dtype="str"),
            "text": pd.array(records["text"].tolist(), dtype="str"),
            "label": pd.array(units.labels, dtype="str"),
            "group": pd.array(units.groups, dtype="str"),
            "unit": pd.array(units.unit, dtype="str"),
            "split": pd.array(split, dtype="str"),
        }
    )
    return assignments, result


def find_salt(
    records: pd.DataFrame, cfg: dict, *, seed: int, tries: int = 2000
) -> tuple[str, float]:
    """(salt, max label deviation) of the best of the salts ``<split.salt>-0`` ...
    ``-<tries - 1>``: among those that leave no split empty and keep the maximum label
    deviation within ``split.stratify_tolerance``, the one with the smallest
    ``max(label deviation, max_s |share of split s - fractions[s]|)`` (ties: the first), so
    split sizes stay near their targets too. Raises CampaignError when no salt is within the
    tolerance.

    Re-drawing a random assignment until it is balanced on a criterion fixed in advance is
    rerandomization (Morgan & Rubin 2012): it looks at labels and sizes only, never at a model,
    so it leaks nothing. The units are computed once; each try costs one hash per unit. Run it
    once when the campaign's split is set up and write the salt into params: taking the best
    rather than the first passing salt leaves a margin for the data to grow."""
    units, stamps = _prepare(records, cfg, seed)
    names = sorted(cfg["fractions"])
    target = np.array([cfg["fractions"][n] for n in names])  # (n_splits,)
    keys = sorted(set(units.unit))
    row = {k: i for i, k in enumerate(keys)}
    classes = sorted(set(units.labels))
    col = {c: j for j, c in enumerate(classes)}
    counts = np.zeros((len(keys), len(classes)))  # (n_units, n_classes) records per label
    np.add.at(counts, ([row[k] for k in units.unit], [col[c] for c in units.labels]), 1.0)
    overall = counts.sum(axis=0) / counts.sum()  # (n_classes,)

    best_salt, best_score, best_deviation, closest = None, math.inf, math.inf, math.inf
    for i in range(tries):
        salt = f"{cfg['salt']}-{i}"
        split_of_unit = _assign_keys(units, keys, {**cfg, "salt": salt}, stamps)
        member = np.array([[s == n for n in names] for s in split_of_unit], dtype=float)
        per_split = member.T @ counts  # (n_splits, n_classes)
        sizes = per_split.sum(axis=1)  # (n_splits,)
        if (sizes == 0).any():
            continue
        deviation = float(np.abs(per_split / sizes[:, None] - overall).max())
        closest = min(closest, deviation)
        if deviation > cfg["stratify_tolerance"]:
            continue
        score = max(deviation, float(np.abs(sizes / sizes.sum() - target).max()))
        if score < best_score:
            best_salt, best_score, best_deviation = salt, score, deviation
    if best_salt is None:
        shown = f"closest {closest:.3f}" if closest < math.inf else "every try left a split empty"
        raise CampaignError(
            f"split.stratify_tolerance: none of {tries} salts {cfg['salt']}-0..{tries - 1} keeps "
            f"every label within {cfg['stratify_tolerance']} ({shown}); the units are too few or "
            "too large for this tolerance: raise it or the evaluation fractions"
        )
    return best_salt, best_deviation


# ---------------------------------------------------------------------------------------------
# The stage (run by campaign.runner)


def stage(ctx) -> None:
    """Privacy scan, leak-free split and audit of the data sources.

    spec: {"sources", "fields", "privacy" (params data.*), "split" (params split), "seed"
    (params campaign.seed)}. Outputs: train / validation / test Parquet (id, text, label, group,
    unit), the audit as JSON and as a readable table, and the privacy report (counts and record
    ids, never a secret). The audit table is printed before the policy is checked, so a failed
    audit leaves its evidence in the stage log.
    """
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from campaign.fsutil import atomic_write_bytes
    from campaign.manifest import load_records
    from campaign.privacy import apply_policy, scan_records

    spec = ctx.spec
    records = load_records(spec["sources"], spec["fields"], ctx.root)
    report = scan_records(records["id"].tolist(), records["text"].tolist())
    print(
        f"privacy: {report.n_flagged} of {report.n_records} records flagged "
        f"(policy {spec['privacy']})"
    )
    texts = apply_policy(spec["privacy"], records["text"].tolist(), report)

    assignments, result = make_splits(records, spec["split"], seed=spec["seed"])
    table = audit_table(result)
    print(table)
    check_audit(result, spec["split"]["audit"])

    assignments["text"] = texts  # same row order as records; redacted when the policy says so
    names = sorted(spec["split"]["fractions"])
    columns = ["id", "text", "label", "group", "unit"]
    for name in names:
        part = assignments[assignments["split"] == name][columns].reset_index(drop=True)
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), sink, compression="zstd")
        atomic_write_bytes(ctx.outputs[name], sink.getvalue().to_pybytes())
    dump = json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"
    atomic_write_bytes(ctx.outputs["audit"], dump.encode("utf-8"))
    atomic_write_bytes(ctx.outputs["audit_table"], (table + "\n").encode("utf-8"))
    atomic_write_bytes(ctx.outputs["privacy"], report.to_json().encode("utf-8"))
