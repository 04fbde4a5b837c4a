"""Leak-free train/validation/test split of the manifest records, and the audit that proves it.

Leak units. Records are joined (union-find) when they share a group value (author, document,
...), when their normalized texts are equal (exact duplicates) or when their word-shingle
Jaccard reaches ``split.dedup.near.threshold`` (near duplicates; see ``campaign.data.dedup``).
Joins are transitive: a chain A~B~C is one unit. A unit is assigned as a whole, so no group and
no duplicate pair found by ``campaign.data.dedup`` can straddle two splits.

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
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np

from campaign.core.errors import CampaignError
from campaign.data.audit import audit, audit_table, check_audit
from campaign.data.settings import TRAIN, check_cfg, parse_cutoff
from campaign.data.units import (
    LeakUnits,
    check_records,
    leak_units,
    pick_split,
    time_text,
    unit_position,
)

if TYPE_CHECKING:
    import pandas as pd


ASSIGNMENT_COLUMNS = ("id", "text", "label", "group", "unit", "split")


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
                out[key] = pick_split(unit_position(salt, key), eval_fractions)
        else:
            out[key] = pick_split(unit_position(salt, key), fractions)
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


def _assign_keys(
    units: LeakUnits, keys: list[str], cfg: dict, stamps: list[datetime] | None
) -> list[str]:
    """(n_units,) split of each unit key in ``keys``."""
    if cfg["method"] != "temporal":
        split_of = assign_units(keys, cfg["fractions"], cfg["salt"])
        return [split_of[k] for k in keys]
    assert stamps is not None
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


def _prepare(records: pd.DataFrame, cfg: dict, seed: int) -> tuple[LeakUnits, list | None]:
    check_cfg(cfg)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise CampaignError(f"seed: expected an integer, got {seed!r}")
    check_records(records)
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

    from campaign.core.fsutil import atomic_write_bytes
    from campaign.data.privacy import apply_policy, scan_records
    from campaign.data.readers import load_records
    from campaign.data.sources import assign_files

    spec = ctx.spec
    # Exactly the files the runner hashed, never the sources' patterns listed again.
    files = assign_files(spec["sources"], ctx.inputs["sources"])
    records = load_records(spec["sources"], spec["fields"], ctx.root, files)
    report = scan_records(records["id"].tolist(), records["text"].tolist())
    print(
        f"privacy: {report.n_flagged} of {report.n_records} records flagged "
        f"(policy {spec['privacy']})"
    )
    # Dedup, leak units and the audit see the text that is written: with `redact`, two records
    # that differ only by a masked secret are the same text, so they join one unit.
    records = records.assign(text=apply_policy(spec["privacy"], records["text"].tolist(), report))

    assignments, result = make_splits(records, spec["split"], seed=spec["seed"])
    table = audit_table(result)
    print(table)
    check_audit(result, spec["split"]["audit"])
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
