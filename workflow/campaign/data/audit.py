"""The leakage audit: what crosses the splits (groups, exact and near duplicates), label
conflicts, class coverage and label shares per split, moved records, and for contrast what a
naive per-record split of the same data would have leaked; the policy check and the table."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from campaign.core.errors import CampaignError
from campaign.data.settings import TRAIN, check_policy, parse_cutoff
from campaign.data.units import LeakUnits, pick_split, time_text

if TYPE_CHECKING:
    pass


_EXAMPLES = 5  # examples kept in the audit per finding


_NAIVE_STREAM = 1  # default_rng([seed, _NAIVE_STREAM]) draws the naive contrast split


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
        split[i] = pick_split(u, fractions)
    return split


def _moved(
    units: LeakUnits,
    split: Sequence[str],
    previous: dict[str, str],
    cfg: dict,
    dropped: Sequence[str] = (),
    rebalanced: set[str] = frozenset(),
) -> dict:
    """Records whose split differs from ``previous``, with a reason for each moved unit;
    records ``drop`` removed this time (``dropped`` ids) count as moved to "dropped";
    ``rebalanced``: units ``split.assign: solve`` had to move to meet the tolerances."""
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
            elif key in rebalanced:
                unit_reason[key] = "rebalanced"
            elif key not in old_anchor_of_unit[key]:
                unit_reason[key] = "new_anchor"
            elif cfg["method"] == "temporal" and previous[record_id] == TRAIN:
                unit_reason[key] = "crossed_cutoff"
            else:
                unit_reason[key] = "params"
        reasons[unit_reason[key]] += 1
        moved.append({"id": record_id, "from": previous[record_id], "to": s, "unit": key})
    for record_id in dropped:
        if record_id in previous:
            compared += 1
            reasons["dropped"] += 1
            moved.append({"id": record_id, "from": previous[record_id], "to": "dropped"})
    moved.sort(key=lambda m: m["id"])
    bridged = sorted(k for k, r in unit_reason.items() if r == "bridged")
    return {
        "compared": compared,
        "count": len(moved),
        "by_reason": dict(sorted(reasons.items())),
        "bridged_units": bridged[:_EXAMPLES],
        "examples": moved[:_EXAMPLES],
        "ids": sorted(m["id"] for m in moved),
    }


def _sizes(records_in: Counter, n: int, cfg: dict) -> dict:
    """Each split's share of the records against its fraction, within split.size_tolerance.
    Temporal splits are not held to it: the cutoff decides how much is train."""
    deviations = {
        name: abs(records_in[name] / n - cfg["fractions"][name]) for name in cfg["fractions"]
    }
    worst = min(deviations, key=lambda name: (-deviations[name], name))
    checked = cfg["method"] != "temporal"
    return {
        "tolerance": cfg["size_tolerance"],
        "checked": checked,
        "max_deviation": {"value": deviations[worst], "split": worst},
        "within_tolerance": not checked or deviations[worst] <= cfg["size_tolerance"],
    }


def audit(
    units: LeakUnits,
    split: Sequence[str],
    cfg: dict,
    *,
    seed: int,
    timestamps: Sequence[datetime] | None = None,
    previous: dict[str, str] | None = None,
    dropped: dict | None = None,
    naive_units: LeakUnits | None = None,
    assignment: dict | None = None,
) -> dict:
    """The split audit, a JSON-able dict (see ``audit_table`` for what it holds).

    units: from ``leak_units`` (under ``drop``: restricted to the kept records); split: (n,)
    split of each record; timestamps: (n,) UTC times, needed for the temporal section;
    previous: id -> split of an earlier assignment; dropped: what ``drop`` removed;
    naive_units: the records the naive contrast splits (default: units); assignment: what
    ``split.assign`` solve or auto did (its ``assign`` section; absent for hash). Leaks are counted
    from the groups and duplicate pairs themselves, not from the units, so the audit checks
    the construction rather than restating it."""
    names = sorted(cfg["fractions"])
    contrast = units if naive_units is None else naive_units
    out: dict[str, Any] = {
        "method": cfg["method"],
        "salt": cfg["salt"],
        "seed": seed,
        "fractions": {k: cfg["fractions"][k] for k in names},
        **_split_sections(units, split, cfg, names),
        "dedup": _dedup_section(units, cfg, dropped),
        "leaks": _leaks(units, split, examples=True),
        "label_conflicts": _conflicts_section(units),
        "labels": _labels_section(units, split, cfg, names),
        "naive_split": {
            "what": "per-record uniform split with the same fractions",
            "rng": f"numpy.random.default_rng([{seed}, {_NAIVE_STREAM}])",
            "records": len(contrast.ids),
            "leaks": _leaks(contrast, _naive_split(contrast.ids, cfg["fractions"], seed), False),
        },
        "temporal": None,
        "moved": None
        if previous is None
        else _moved(
            units,
            split,
            previous,
            cfg,
            dropped["ids"] if dropped else (),
            {m["unit"] for m in (assignment or {}).get("moved_units", [])},
        ),
    }
    if assignment is not None:
        out["assign"] = assignment
    if cfg["method"] == "temporal" and timestamps is not None:
        out["temporal"] = _temporal_section(timestamps, split, cfg)
    return out


def _split_sections(units: LeakUnits, split: Sequence[str], cfg: dict, names: list[str]) -> dict:
    """The audit's records, units, largest unit, splits and sizes sections."""
    n = len(split)
    records_in = Counter(split)
    units_in: dict[str, set[str]] = defaultdict(set)
    for key, s in zip(units.unit, split, strict=True):
        units_in[s].add(key)
    unit_sizes = Counter(units.unit)
    largest_key, largest_size = min(unit_sizes.items(), key=lambda kv: (-kv[1], kv[0]))
    return {
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
        "sizes": _sizes(records_in, n, cfg),
    }


def _dedup_section(units: LeakUnits, cfg: dict, dropped: dict | None) -> dict:
    """The duplicate policy, what it dropped, and the exact and near clusters found."""
    return {
        "policy": cfg["dedup"]["policy"],
        "dropped": dropped,
        "near": dict(cfg["dedup"]["near"]),
        "exact_clusters": len(units.exact),
        "records_in_exact_clusters": sum(len(c) for c in units.exact),
        "near_pairs": len(units.near_pairs),
        "near_clusters": sum(c.kind == "near" for c in units.clusters),
    }


def _conflicts_section(units: LeakUnits) -> dict:
    """Duplicate clusters whose records carry different labels."""
    conflicting = [c for c in units.clusters if c.conflicting]
    return {
        "clusters": len(conflicting),
        "exact": sum(c.kind == "exact" for c in conflicting),
        "near": sum(c.kind == "near" for c in conflicting),
        "records": len({i for c in conflicting for i in c.ids}),
        "examples": [c.to_json() for c in conflicting[:_EXAMPLES]],
    }


def _labels_section(units: LeakUnits, split: Sequence[str], cfg: dict, names: list[str]) -> dict:
    """Label shares per split against split.stratify_tolerance, and labels missing from train."""
    labels = _label_shares(units.labels, split, names)
    return {
        **labels,
        "tolerance": cfg["stratify_tolerance"],
        "within_tolerance": labels["max_deviation"]["value"] <= cfg["stratify_tolerance"],
        "missing_from_train": labels["missing"][TRAIN],
    }


def _temporal_section(timestamps: Sequence[datetime], split: Sequence[str], cfg: dict) -> dict:
    """The cutoff, and the records on the wrong side of it."""
    cutoff = parse_cutoff(cfg["temporal_cutoff"])
    train_times = [t for t, s in zip(timestamps, split, strict=True) if s == TRAIN]
    eval_times = [t for t, s in zip(timestamps, split, strict=True) if s != TRAIN]
    return {
        "cutoff": time_text(cutoff),
        "train_latest": time_text(max(train_times)) if train_times else None,
        "eval_earliest": time_text(min(eval_times)) if eval_times else None,
        "train_records_at_or_after_cutoff": sum(t >= cutoff for t in train_times),
        "eval_records_before_cutoff": sum(t < cutoff for t in eval_times),
    }


def check_audit(audit: dict, policy: dict) -> None:
    """Raise CampaignError, one line listing every violation, when the audit breaks the policy
    (``split.audit``), its label deviation exceeds ``split.stratify_tolerance``, a split's size
    is off its fraction by more than ``split.size_tolerance``, or a label is absent from
    train."""
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
    sizes = audit["sizes"]
    if not sizes["within_tolerance"]:
        name = sizes["max_deviation"]["split"]
        s = audit["splits"][name]
        problems.append(
            f"split {name!r} holds {s['share']:.1%} of the records, target {s['target']:.1%}, "
            f"off by {sizes['max_deviation']['value']:.3f} > split.size_tolerance "
            f"{sizes['tolerance']} (try another split.salt: campaign split-salt)"
        )
    if labels["missing_from_train"]:
        missing = labels["missing_from_train"]
        where = {c: [n for n, counts in labels["counts"].items() if counts.get(c)] for c in missing}
        shown = ", ".join(f"{c!r} (in {', '.join(where[c]) or 'no split'})" for c in missing[:3])
        problems.append(
            f"{len(missing)} label(s) absent from train: {shown} (try another split.salt: "
            "campaign split-salt)"
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
    """The audit as a readable text table (fixed-width columns): its sections in order."""
    sections = (
        _split_lines,
        _leak_lines,
        _dedup_lines,
        _label_lines,
        _temporal_lines,
        _assign_lines,
        _moved_lines,
    )
    return "\n".join(line for section in sections for line in section(audit)) + "\n"


def _split_lines(audit: dict) -> list[str]:
    """The header, each split's records, units and share, and the size check."""
    lines = [
        f"Split audit: method {audit['method']}, salt {audit['salt']!r}, seed {audit['seed']}, "
        f"{audit['records']} records in {audit['units']} units (largest "
        f"{audit['largest_unit']['unit']!r}, {audit['largest_unit']['records']} records)",
        "",
        f"  {'split':<14}{'records':>9}{'units':>8}{'share':>8}{'target':>8}",
    ]
    for name in audit["splits"]:
        s = audit["splits"][name]
        lines.append(
            f"  {name:<14}{s['records']:>9}{s['units']:>8}{_fmt(s['share']):>8}"
            f"{_fmt(s['target']):>8}"
        )
    sizes = audit["sizes"]
    verdict = (
        ("within" if sizes["within_tolerance"] else "OUTSIDE") + f" tolerance {sizes['tolerance']}"
        if sizes["checked"]
        else "not checked (temporal: the cutoff decides)"
    )
    lines.append(
        f"  max |share - target| = {_fmt(sizes['max_deviation']['value'])} "
        f"({sizes['max_deviation']['split']}), {verdict}"
    )
    return lines


# The leak counts the audit's table and the report's leakage section show, this split beside
# the naive one: (title, key).
LEAK_ROWS = (
    ("groups in more than one split", "groups_in_several_splits"),
    ("same-group pairs across splits", "cross_split_group_pairs"),
    ("exact duplicate pairs across", "cross_split_exact_pairs"),
    ("near duplicate pairs across", "cross_split_near_pairs"),
    ("leaking pairs, total", "leaking_pairs"),
    ("eval records with a train partner", "eval_records_with_train_partner"),
)


def _leak_lines(audit: dict) -> list[str]:
    """The leaks of this split beside the naive split's."""
    ours, naive = audit["leaks"], audit["naive_split"]["leaks"]
    lines = ["", f"  {'leaks':<36}{'this split':>12}{'naive split':>13}"]
    for title, key in LEAK_ROWS:
        lines.append(f"  {title:<36}{ours[key]:>12}{naive[key]:>13}")
    lines.append(f"  (naive: {audit['naive_split']['what']}, {audit['naive_split']['rng']})")
    return lines


def _dedup_lines(audit: dict) -> list[str]:
    """Duplicate clusters, the duplicate policy, what it dropped, and label conflicts."""
    d = audit["dedup"]
    lines = [
        "",
        f"Duplicates: {d['exact_clusters']} exact clusters ({d['records_in_exact_clusters']} "
        f"records), {d['near_pairs']} near pairs in {d['near_clusters']} near clusters "
        f"(threshold {d['near']['threshold']}, {d['near']['shingle_size']}-word shingles, "
        f"{d['near']['num_perm']} hashes)",
    ]
    lines.append(f"Duplicate policy: {d['policy']}")
    if d["dropped"] is not None:
        x = d["dropped"]
        per = ", ".join(f"{k} {v}" for k, v in x["by_split"].items() if v) or "none"
        lines.append(
            f"  dropped {x['records']} evaluation copies of records in other splits "
            f"({x['components']} duplicate components; {per}); their ids are in the JSON audit"
        )
    c = audit["label_conflicts"]
    lines.append(
        f"Label conflicts inside duplicate clusters: {c['clusters']} clusters (exact "
        f"{c['exact']}, near {c['near']}), {c['records']} records"
    )
    for ex in c["examples"][:3]:
        pairs = ", ".join(f"{i}={lab}" for i, lab in zip(ex["ids"], ex["labels"], strict=True))
        lines.append(f"    {ex['kind']}: {pairs}")
    return lines


def _label_lines(audit: dict) -> list[str]:
    """Each label's share overall and per split, the stratification check, and coverage."""
    names = list(audit["splits"])
    labels = audit["labels"]
    lines = ["", f"  {'label':<16}{'overall':>9}" + "".join(f"{n:>12}" for n in names)]
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
    if labels["missing_from_train"]:
        lines.append(f"  ABSENT FROM TRAIN: {', '.join(labels['missing_from_train'])}")
    lines.append(
        "  class coverage: every class in every split"
        if not missing
        else "  classes missing: " + "; ".join(f"{n}: {', '.join(m)}" for n, m in missing.items())
    )
    return lines


def _temporal_lines(audit: dict) -> list[str]:
    """The temporal cutoff and what crossed it (a temporal split only)."""
    if not audit["temporal"]:
        return []
    t = audit["temporal"]
    return [
        "",
        f"Temporal: cutoff {t['cutoff']}, train latest {t['train_latest']}, eval earliest "
        f"{t['eval_earliest']}; {t['eval_records_before_cutoff']} pre-cutoff records went to "
        f"evaluation with their unit, {t['train_records_at_or_after_cutoff']} train records at "
        "or after the cutoff",
    ]


def _assign_lines(audit: dict) -> list[str]:
    """What split.assign solve or auto did, and the units it moved (the first 5)."""
    if not audit.get("assign"):
        return []
    a = audit["assign"]
    lines = ["", f"Assignment: {a['note']}"]
    for mv in a.get("moved_units", [])[:5]:
        lines.append(
            f"    unit {mv['unit']!r} ({mv['records']} records): {mv['from']} -> {mv['to']}"
            f" ({mv['reason']})"
        )
    return lines


def _moved_lines(audit: dict) -> list[str]:
    """The records that moved since the previous assignment, by reason, with examples."""
    if audit["moved"] is None:
        return []
    m = audit["moved"]
    reasons = ", ".join(f"{k} {v}" for k, v in m["by_reason"].items()) or "none"
    lines = [
        "",
        f"Moved since the previous assignment: {m['count']} of {m['compared']} records ({reasons})",
    ]
    for ex in m["examples"][:3]:
        unit = f" (unit {ex['unit']!r})" if "unit" in ex else ""
        lines.append(f"    {ex['id']}: {ex['from']} -> {ex['to']}{unit}")
    return lines
