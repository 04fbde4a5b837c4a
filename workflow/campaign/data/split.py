"""Leak-free train/validation/test split of the manifest records, and the audit that proves it.

Leak units. Records are joined (union-find) when they share a group value (author, document,
...) and, under ``split.dedup.policy: unite``, when their normalized texts are equal (exact
duplicates) or when their word-shingle Jaccard reaches ``split.dedup.near.threshold`` (near
duplicates; see ``campaign.data.dedup``). Joins are transitive: a chain A~B~C is one unit. A
unit is assigned as a whole, so no group and no duplicate pair found by ``campaign.data.dedup``
can straddle two splits.

Giant units, and ``split.dedup.policy: drop``. On real corpora duplicate chains can join most
groups into one unit (boilerplate such as "New upstream release." in package changelogs joins
every package that wrote it: 83% of the 9,708 entries of the 365 source packages
whose changelogs one Debian machine holds, in one unit of 234 packages). No salt can
then balance anything, and a looser tolerance only hides a split with a fifth of the data in
train. ``unite`` therefore refuses, in one line, a unit that no split can hold within
``split.size_tolerance`` (``units.check_unit_sizes``: its size, largest groups, and what would
resolve it). ``drop`` forms units from groups alone and resolves duplicates after the
assignment: in each duplicate component (chains too) that falls in several splits, the train
members stay and the copies in evaluation splits are dropped; without a train member, the
members in the split of the component's smallest id stay (``units.drop_copies``). Train never
loses a record, no duplicate pair crosses splits, and every dropped id is listed in the audit
(``dedup.dropped``). A new record can drop an existing evaluation record this way (its copy
landed in train): the moved-record report lists it as ``dropped``.

Unit key. A record's anchor is ``"g:" + group`` when it has a group, else ``"i:" + id``; the
unit key is the smallest anchor of its members (group anchors sort first). New records by an
author already in the data carry that author's anchor, so they join the unit without changing
its key.

Assignment (``method: group_hash``). A unit's position is ``x = SplitMix64(K ^ S) / 2^64`` in
[0, 1), where K and S are the first 8 bytes of BLAKE3 of the unit key and of the salt
(``units.positions``): a function of the key and the salt alone, so the salt search can score
thousands of salts in one array operation. The splits, in name order, own consecutive intervals of
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
split: ``salt.find_salt`` keeps the current salt when it passes and otherwise tries
``<salt>-0``, ``<salt>-1``, ... and returns the best one within the tolerances
(rerandomization, see there). Sizes are audited too: each split's share of the records within
``split.size_tolerance`` of its fraction, and every label present in train. Once it is in
params, growth keeps every record in place; if growth pushes a deviation over its tolerance
the audit fails and says so.
On the demo corpus (3,000 records, 254 units, up to 66 records each) the median deviation over
salts is ~0.13 and only ~0.1-1% of salts reach 0.05; on 3,000 records with a 90/8/2 label mix
and authors of 1-4 records, nearly every salt does.

Few, large units (``split.assign: solve``, or ``auto``: the hash when the current salt's
split passes the balance checks, else solve). The strict promise above is traded for balance:
``campaign.data.solve`` places the units by an integer program that meets both tolerances
and keeps every label in train whenever any split can, and otherwise fails with the proved
best deviations. Stability comes from ``previous`` instead of the key: a unit whose earlier
records were all in one split stays there (it is a constant in the program) unless the
tolerances cannot be met so; then the fewest earlier records move and the audit lists each
moved unit (``assign.moved_units``; moved records count as ``rebalanced``). Without
``previous`` a re-solve of grown data may move any unit. Under ``dedup.policy: drop`` the
program balances the records before copies are dropped; the audit checks after. Above
``split.solve.max_units`` units the hash places them (the stage log says so).

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

from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from campaign.core.errors import CampaignError
from campaign.data.audit import audit, audit_table, check_audit
from campaign.data.settings import TRAIN, assign_mode, parse_cutoff, solve_cfg
from campaign.data.units import (
    LeakUnits,
    drop_copies,
    key_hashes,
    latest_times,
    positions,
    prepare,
    restrict,
    salt_hash,
    split_edges,
)

if TYPE_CHECKING:
    import pandas as pd


# The columns of the split files: per-record slices for evaluation too. duplicate_cluster: the
# smallest id of the record's duplicate component (exact and near pairs, chains too, over all
# records, before ``drop`` removes copies), or null when the record has no duplicate.
SPLIT_FILE_COLUMNS = ["id", "text", "label", "group", "source", "unit", "duplicate_cluster"]
# A conversational dataset's split files add its conversations (the generation task reads them).
CONVERSATION_COLUMNS = ["messages"]
ASSIGNMENT_COLUMNS = (*SPLIT_FILE_COLUMNS, "split")


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
    keys = list(keys)
    place = positions(np.array([salt_hash(salt)]), key_hashes(keys))[0]  # (n_units,)
    if cutoff is None or latest is None:
        names, edges = split_edges(fractions)
        chosen = np.searchsorted(edges, place, "right")
        return {k: names[i] for k, i in zip(keys, chosen, strict=True)}
    names, edges = split_edges({k: v for k, v in fractions.items() if k != TRAIN})
    chosen = np.searchsorted(edges, place, "right")
    return {k: TRAIN if latest[k] < cutoff else names[i] for k, i in zip(keys, chosen, strict=True)}


def _assign_keys(
    units: LeakUnits, keys: list[str], cfg: dict, stamps: list[datetime] | None
) -> list[str]:
    """(n_units,) split of each unit key in ``keys``."""
    if cfg["method"] != "temporal":
        split_of = assign_units(keys, cfg["fractions"], cfg["salt"])
        return [split_of[k] for k in keys]
    assert stamps is not None
    latest = latest_times(units, cfg, stamps)
    cutoff = parse_cutoff(cfg["temporal_cutoff"])
    split_of = assign_units(keys, cfg["fractions"], cfg["salt"], latest, cutoff)
    return [split_of[k] for k in keys]


def _assign(units: LeakUnits, cfg: dict, stamps: list[datetime] | None) -> list[str]:
    """(n,) split of each record."""
    keys = sorted(set(units.unit))
    split_of = dict(zip(keys, _assign_keys(units, keys, cfg, stamps), strict=True))
    return [split_of[k] for k in units.unit]


def _previous_of_units(
    units: LeakUnits, keys: list[str], names: list[str], previous: dict[str, str] | None
) -> np.ndarray:
    """(n_units,) index of the split that held all of a unit's earlier records, or -1 (a new
    unit, or one whose earlier records were in several splits: bridged)."""
    out = np.full(len(keys), -1, dtype=np.int64)
    if not previous:
        return out
    row = {k: i for i, k in enumerate(keys)}
    seen: dict[int, set[str]] = {}
    for record_id, key in zip(units.ids, units.unit, strict=True):
        if record_id in previous:
            seen.setdefault(row[key], set()).add(previous[record_id])
    for u, splits in seen.items():
        if len(splits) == 1 and next(iter(splits)) in names:
            out[u] = names.index(next(iter(splits)))
    return out


def _solve_assign(
    units: LeakUnits, cfg: dict, previous: dict[str, str] | None
) -> tuple[list[str], dict]:
    """(n,) split of each record under ``split.assign`` solve or auto, and the audit's
    ``assign`` section (see ``campaign.data.solve``)."""
    from campaign.data.salt import SaltScorer, closest_salt
    from campaign.data.solve import GUIDE_SALTS, Problem, SolveSettings, solve

    mode = assign_mode(cfg)
    keys = sorted(set(units.unit))
    names = sorted(cfg["fractions"])
    info: dict = {"requested": mode, "used": "hash", "units": len(keys)}
    scorer = SaltScorer(units, cfg)
    if mode == "auto" and scorer.score([cfg["salt"]]).passes[0]:
        info["note"] = f"split.assign auto: the hash of salt {cfg['salt']!r} passes; kept"
        return _assign(units, cfg, None), info
    settings = SolveSettings(**solve_cfg(cfg))
    if len(keys) > settings.max_units:
        info["note"] = (
            f"split.assign {mode}: {len(keys):,} units are more than split.solve.max_units "
            f"{settings.max_units:,}; the units are placed by the salted hash instead"
        )
        return _assign(units, cfg, None), info
    counts, classes = _unit_label_counts(units, keys)
    before = _previous_of_units(units, keys, names, previous)
    guide_salt = closest_salt(scorer, cfg["salt"], GUIDE_SALTS)
    hashed = assign_units(keys, cfg["fractions"], guide_salt)
    problem = Problem(
        counts,
        np.array([cfg["fractions"][n] for n in names]),
        names.index(TRAIN),
        cfg["stratify_tolerance"],
        cfg["size_tolerance"],
        before,
        guide=np.array([names.index(hashed[k]) for k in keys]),
    )
    solution = solve(problem, settings, names, classes)
    sizes = counts.sum(axis=1)
    moved = [
        {
            "unit": keys[u],
            "records": int(sizes[u]),
            "from": names[before[u]],
            "to": names[solution.split[u]],
            "reason": "rebalanced: the tolerances cannot be met with every earlier unit in place",
        }
        for u in np.flatnonzero(solution.moved)
    ]
    info.update(
        used="solve",
        guide_salt=guide_salt,
        label_deviation=solution.label_deviation,
        size_deviation=solution.size_deviation,
        proved_lower=solution.proved_lower,
        proved_for=solution.proved_for or "any split",
        fewest_moves_proved=solution.fewest_moves_proved,
        earlier_units=int((before >= 0).sum()),
        new_units=int((before < 0).sum()),
        moved_units=moved,
        node_limit=settings.node_limit,
        note=_solve_note(mode, len(keys), units, previous, solution, settings, len(moved)),
    )
    split_of = {keys[u]: names[s] for u, s in enumerate(solution.split)}
    return [split_of[k] for k in units.unit], info


def _unit_label_counts(units: LeakUnits, keys: list[str]) -> tuple[np.ndarray, list[str]]:
    """(counts: (n_units, n_classes) records of each label in each unit, in `keys` order;
    the classes, sorted)."""
    row = {k: i for i, k in enumerate(keys)}
    classes = sorted(set(units.labels))
    col = {c: j for j, c in enumerate(classes)}
    counts = np.zeros((len(keys), len(classes)))  # (n_units, n_classes)
    np.add.at(
        counts,
        (np.array([row[k] for k in units.unit]), np.array([col[c] for c in units.labels])),
        1.0,
    )
    return counts, classes


def _solve_note(
    mode: str, n_units: int, units: LeakUnits, previous, solution, settings, n_moved: int
) -> str:
    """The audit's one line on what the integer program did: deviations, what is proved, the
    earlier units it moved, and why none of split.previous matched."""
    given = f" with {solution.proved_for}" if solution.proved_for else ""
    unmatched = (
        f"; split.previous holds none of these {len(units.ids):,} records (an earlier split "
        "of other data?), so every unit was placed afresh"
        if previous and not any(i in previous for i in units.ids)
        else ""
    )
    fewest = (
        f" (not proved the fewest: the search stopped at split.solve.node_limit "
        f"{settings.node_limit:,})"
        if solution.fewest_moves_proved is False
        else ""
    )
    proved = (
        f" (no split within the tolerances{given} has both below "
        f"{solution.proved_lower:.4f}, proved)"
        if solution.proved_lower > 0
        else ""
    )
    return (
        f"split.assign {mode}: HiGHS placed {n_units:,} units ({solution.nodes:,} nodes, "
        f"{solution.solves} program(s)): label deviation {solution.label_deviation:.4f}, "
        f"size deviation {solution.size_deviation:.4f}{proved}; {n_moved} earlier "
        f"unit(s) moved{fewest}{unmatched}"
    )


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


def _dropped(units: LeakUnits, split: list[str], keep: list[bool], names: list[str]) -> dict:
    """The audit's record of what ``drop`` removed: counts per split, components, ids."""
    gone = [i for i, k in enumerate(keep) if not k]
    return {
        "records": len(gone),
        "by_split": {n: sum(split[i] == n for i in gone) for n in names},
        "components": len({units.duplicate_of[i] for i in gone}),
        "ids": sorted(units.ids[i] for i in gone),
    }


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
        size_tolerance: 0.05           # max |share of records in split - fraction|, checked
        temporal_cutoff: null          # ISO 8601 time, required by (only by) temporal
        dedup: {policy: unite,         # unite | drop (see the module docstring)
                near: {threshold: 0.5, num_perm: 128, shingle_size: 3}}
        audit: {max_group_overlap: 0, max_cross_split_duplicates: 0,
                allow_label_conflicts: true}
        previous: null                 # the stage reads it; here ``previous`` is an argument
        assign: hash                   # hash | solve | auto (optional; see campaign.data.solve)
        solve: {time_limit_s: 120, node_limit: 500, max_units: 1000, improve_steps: 1}

    seed: draws the MinHash functions and the audit's naive contrast split; previous: id ->
    split of an earlier run, to report moved records (and, under solve/auto, the units that
    stay in place). Returns (assignments, audit):
    assignments has ``ASSIGNMENT_COLUMNS`` in the records' row order
    (under ``drop``, without the dropped records); audit as from ``audit``. Raises
    CampaignError on bad params or records, on a unit too large to place, when a split is
    left empty, and under solve when no split meets the tolerances (with the proved best
    deviations); does NOT apply the audit policy (call ``check_audit``)."""
    import pandas as pd

    units, stamps = prepare(records, cfg, seed)
    solved = None
    if assign_mode(cfg) == "hash":
        split = _assign(units, cfg, stamps)
    else:
        split, solved = _solve_assign(units, cfg, previous)
    names = sorted(cfg["fractions"])
    dropped = None
    kept_units, kept_split, kept_stamps, rows = units, split, stamps, list(range(len(split)))
    if cfg["dedup"]["policy"] == "drop":
        keep = drop_copies(units, split)
        dropped = _dropped(units, split, keep, names)
        rows = [i for i, k in enumerate(keep) if k]
        kept_units = restrict(units, keep)
        kept_split = [split[i] for i in rows]
        kept_stamps = None if stamps is None else [stamps[i] for i in rows]
    _check_nonempty(kept_split, kept_units, cfg)
    result = audit(
        kept_units,
        kept_split,
        cfg,
        seed=int(seed),
        timestamps=kept_stamps,
        previous=previous,
        dropped=dropped,
        naive_units=units,
        assignment=solved,
    )
    texts = records["text"].tolist()
    sources = records["source"].tolist() if "source" in records else [None] * len(texts)
    cluster = [units.ids[j] if j >= 0 else None for j in units.duplicate_of]
    conversations = {}
    if "messages" in records:  # a conversational dataset's records keep their conversation
        messages = records["messages"].tolist()
        conversations = {"messages": pd.array([messages[i] for i in rows], dtype="str")}
    assignments = pd.DataFrame(
        {
            "id": pd.array(kept_units.ids, dtype="str"),
            "text": pd.array([texts[i] for i in rows], dtype="str"),
            "label": pd.array(kept_units.labels, dtype="str"),
            "group": pd.array(kept_units.groups, dtype="str"),
            "source": pd.array([sources[i] for i in rows], dtype="str"),
            "unit": pd.array(kept_units.unit, dtype="str"),
            "duplicate_cluster": pd.array([cluster[i] for i in rows], dtype="str"),
            "split": pd.array(kept_split, dtype="str"),
            **conversations,
        }
    )
    return assignments, result


def redact_messages(policy: dict, records) -> list[str]:
    """The conversations under the privacy policy: each message's content scanned and masked as
    the record's text is, so what `redact` hides from the text is hidden from the training
    conversation too (the split file's `messages` is what the model is trained on)."""
    from campaign.data import conversations
    from campaign.data.privacy import apply_policy, policies, scan_records

    if "redact" not in policies(policy).values():
        return records["messages"].tolist()  # report and fail change no text
    out = []
    for record_id, cell in zip(records["id"], records["messages"], strict=True):
        messages = conversations.parse_messages(cell, f"record {record_id}")
        contents = [m["content"] for m in messages]
        found = scan_records([record_id] * len(contents), contents)
        masked = apply_policy(policy, contents, found) if found.n_flagged else contents
        out.append(
            conversations.dump_messages(
                [{**m, "content": c} for m, c in zip(messages, masked, strict=True)]
            )
        )
    return out


def read_previous(folder: Path, names: list[str]) -> dict[str, str]:
    """id -> split of an earlier run's split files (``<folder>/<split>.parquet``), for the
    moved-record report. Raises CampaignError naming the file when one is missing or has no
    ``id`` column, or when an id is in two of them."""
    import pyarrow.parquet as pq

    previous: dict[str, str] = {}
    for name in names:
        path = folder / f"{name}.parquet"
        if not path.is_file():
            raise CampaignError(
                f"split.previous: {path} is missing (expected the split files of an earlier run: "
                f"{', '.join(n + '.parquet' for n in names)})"
            )
        try:
            table = pq.read_table(path, columns=["id"])
        except Exception as e:  # pyarrow raises several types for a bad file
            raise CampaignError(f"split.previous: {path}: not a split file ({e})") from None
        for record_id in table.column("id").to_pylist():
            if record_id in previous:
                raise CampaignError(
                    f"split.previous: record {record_id!r} is in both "
                    f"{previous[record_id]}.parquet and {name}.parquet"
                )
            previous[record_id] = name
    return previous


def derive_inputs(spec: dict, root: Path) -> dict[str, list[Path]]:
    """The files the split's params name (Stage.derive_inputs): the sources, and the folder of
    an earlier split (``split.previous``) when it is set."""
    from campaign.data.sources import expand_sources

    root = Path(root)
    previous = spec["split"]["previous"]
    return {
        "sources": expand_sources(spec["sources"], root),
        "previous": [root / previous] if previous else [],
    }


def stage(ctx) -> None:
    """Privacy scan, leak-free split and audit of the data sources.

    spec: {"sources", "fields", "privacy", "privacy_by_kind" (params data.*), "split" (params
    split), "seed" (params campaign.seed)}. Inputs: the sources, and ``previous`` (the folder
    of an earlier run's split files, or none) for the moved-record report. Outputs: train /
    validation / test Parquet (``SPLIT_FILE_COLUMNS``), the audit as JSON and as a
    readable table, and the privacy report (counts and record ids, never a secret). The audit
    table is printed before the policy is checked, so a failed audit leaves its evidence in
    the stage log.
    """
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from campaign.core.fsutil import atomic_write_bytes
    from campaign.data.privacy import apply_policy, scan_records
    from campaign.data.readers import load_records
    from campaign.data.sources import assign_files

    spec = ctx.spec
    names = sorted(spec["split"]["fractions"])
    # Exactly the files the runner hashed, never the sources' patterns listed again.
    files = assign_files(spec["sources"], ctx.inputs["sources"])
    records = load_records(spec["sources"], spec["fields"], ctx.root, files)
    previous = None
    if ctx.inputs.get("previous"):
        previous = read_previous(Path(ctx.inputs["previous"][0]), names)
    policy = {"default": spec["privacy"], **(spec.get("privacy_by_kind") or {})}
    report = scan_records(records["id"].tolist(), records["text"].tolist())
    print(
        f"privacy: {report.n_flagged} of {report.n_records} records flagged "
        f"(policy {spec['privacy']})"
    )
    # Dedup, leak units and the audit see the text that is written: with `redact`, two records
    # that differ only by a masked secret are the same text, so they join one unit.
    records = records.assign(text=apply_policy(policy, records["text"].tolist(), report))
    if "messages" in records:
        records = records.assign(messages=redact_messages(policy, records))

    assignments, result = make_splits(records, spec["split"], seed=spec["seed"], previous=previous)
    table = audit_table(result)
    print(table)  # under split.assign solve/auto it says what placed the units
    check_audit(result, spec["split"]["audit"])
    columns = SPLIT_FILE_COLUMNS + [c for c in CONVERSATION_COLUMNS if c in assignments]
    for name in names:
        part = assignments[assignments["split"] == name][columns].reset_index(drop=True)
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), sink, compression="zstd")
        atomic_write_bytes(ctx.outputs[name], sink.getvalue().to_pybytes())
    dump = json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"
    atomic_write_bytes(ctx.outputs["audit"], dump.encode("utf-8"))
    atomic_write_bytes(ctx.outputs["audit_table"], (table + "\n").encode("utf-8"))
    atomic_write_bytes(ctx.outputs["privacy"], report.to_json().encode("utf-8"))
