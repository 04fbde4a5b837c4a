"""The report's sections, from a finished campaign's files: each section is a title, sentences,
tables and (for most) the data of one figure. Reading is strict: a missing file, a garbled one or
a missing column is one CampaignError naming the file and what was expected.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from campaign.budget import split_verdict
from campaign.core.io import get, read_table, read_text
from campaign.core.stage import Section
from campaign.evaluate import (
    ACT_PREFIX,
    NO_FINDINGS,
    VERDICT_TITLE,
    evaluation_verdict,
    finding_lines,
    level_words,
    verdict_block,
)
from campaign.report import plots


def effects_section(comparisons_path: Path, decisions: dict) -> Section:
    comparisons = read_table(
        comparisons_path,
        ("split", "kind", "subject", "reference", "estimate", "ci_low", "ci_high", "decision"),
    )
    on = comparisons[(comparisons["split"] == decisions["decide_on"])]
    effects = on[on["kind"] != "floor"].copy()
    effects["label"] = [
        subject if subject.endswith(f"({kind})") else f"{subject} ({kind})"
        for subject, kind in zip(effects["subject"], effects["kind"], strict=True)
    ]
    shown = ["kind", "subject", "reference", "n_seeds", "estimate", "ci_low", "ci_high"]
    shown += [c for c in ("p_holm", "seed_sd", "seeds_needed", "decision") if c in effects]
    lines = [
        f"Effects on {decisions['decide_on']} {decisions['metric']} against the reference, with "
        f"{decisions.get('confidence', 0.95):.0%} intervals; the minimum useful effect is "
        f"{decisions.get('min_useful_effect', 0) * 100:.1f} points.",
        f"{len(effects)} comparison(s): "
        + ", ".join(f"{n} {d}" for d, n in effects["decision"].value_counts().sort_index().items())
        + ".",
    ]
    return Section(
        lines,
        [(f"Comparisons ({decisions['decide_on']})", effects[[c for c in shown if c in effects]])],
        (
            plots.effects_figure,
            (
                effects[["label", "estimate", "ci_low", "ci_high", "decision"]],
                float(decisions.get("min_useful_effect", 0.0)),
                decisions["metric"],
            ),
        ),
    )


def seeds_section(metrics: pd.DataFrame, comparisons_path: Path, decisions: dict) -> Section:
    metric, split = decisions["metric"], decisions["decide_on"]
    rows = metrics[(metrics["metric"] == metric) & (metrics["split"] == split)]
    per_seed = rows[rows["kind"] == "run"][["cell", "seed", "value", "run"]].dropna(subset=["cell"])
    cells = rows[rows["kind"] == "cell"][["cell", "value", "ci_low", "ci_high"]]
    floors = rows[rows["kind"] == "floor"][["variant", "value", "ci_low", "ci_high"]]
    comparisons = read_table(comparisons_path, ("split", "kind", "subject", "decision"))
    vs_floor = comparisons[(comparisons["kind"] == "floor") & (comparisons["split"] == split)]
    spread = (
        per_seed.groupby("cell")["value"]
        .agg(seeds="size", mean="mean", sd="std", low="min", high="max")
        .reset_index()
    )
    lines = [
        f"{len(per_seed)} run(s) in {len(spread)} cell(s), {split} {metric}; each dot is one "
        f"seed, the bar the cell's mean and interval; the lines are the reference floors.",
        "Reference floor: "
        + "; ".join(
            f"{f.variant} {level_words(f.value, f.ci_low, f.ci_high)}" for f in floors.itertuples()
        )
        + ".",
    ]
    for c in vs_floor.itertuples():
        lines.append(f"{c.subject} vs {c.reference}: {c.decision}.")
    return Section(
        lines,
        [
            ("Seed spread per cell", spread),
            ("Reference floor", floors),
            (
                "Cells against the floor",
                vs_floor[["subject", "reference", "estimate", "ci_low", "ci_high", "decision"]],
            ),
        ],
        (
            plots.seeds_figure,
            (per_seed[["cell", "seed", "value"]], cells, floors[["variant", "value"]], metric),
        ),
    )


def quantize_section(variants_path: Path, metrics: pd.DataFrame, decisions: dict) -> Section:
    variants = read_table(
        variants_path, ("run", "variant", "status", "size_bytes", "latency_ms_p50")
    )
    metric, split = decisions["metric"], decisions["decide_on"]
    quality = metrics[(metrics["metric"] == metric) & (metrics["split"] == split)]
    quality = quality.set_index("variant")["value"]
    points = []
    for v in variants[variants["status"] == "ok"].itertuples():
        points.append(
            {
                "label": f"{v.run}/{v.variant}",
                "size_bytes": float(v.size_bytes),
                "latency_ms": float(v.latency_ms_p50),
                "value": quality.get(f"{v.run}/{v.variant}", math.nan),
            }
        )
        ratio = getattr(v, "size_ratio", math.nan)
        speedup = getattr(v, "speedup", math.nan)
        base = {"label": f"{v.run} (fp32)", "value": quality.get(v.run, math.nan)}
        if (
            pd.notna(ratio)
            and pd.notna(speedup)
            and base["label"] not in {p["label"] for p in points}
        ):
            points.append(
                base
                | {"size_bytes": v.size_bytes * ratio, "latency_ms": v.latency_ms_p50 * speedup}
            )
    points = pd.DataFrame(points, columns=["label", "size_bytes", "latency_ms", "value"])
    shown = [
        c
        for c in (
            "run",
            "variant",
            "status",
            "reason",
            "size_bytes",
            "latency_ms_p50",
            "size_ratio",
            "speedup",
            "agreement",
        )
        if c in variants
    ]
    table = variants[shown].copy()
    table[metric] = [
        quality.get(f"{r}/{v}", math.nan)
        for r, v in zip(table["run"], table["variant"], strict=True)
    ]
    skipped = variants[variants["status"] != "ok"]
    lines = [
        f"{int((variants['status'] == 'ok').sum())} quantized variant(s) measured; "
        f"{split} {metric} against size and latency."
    ]
    for s in skipped.itertuples():
        lines.append(
            f"{s.run}/{s.variant} {s.status}: {getattr(s, 'reason', '') or ''}".rstrip(": ")
        )
    for s in decisions.get("skipped_variants") or []:
        if isinstance(s, dict):
            lines.append(f"skipped: {s.get('variant')}: {s.get('reason') or 'no reason given'}")
        else:
            lines.append(f"skipped: {s}")
    return Section(
        lines,
        [("Variants", table)],
        (plots.quantize_figure, (points, metric)),
    )


def verdict_section(summary_path: Path, decisions: dict, findings: list[str]) -> Section:
    """The verdict block, first in the report: the budget's (with the costs), as its summary.txt
    opens with it (from a budget summary without one, the evaluation's: decisions.json), its
    findings replaced by `findings`, every finding the report's inputs hold (the budget's block
    knows the preflight's and the evaluation's; the data phase's privacy and leakage ones too)."""
    block = split_verdict(read_text(summary_path))[0]
    if not block:
        block = verdict_block(evaluation_verdict(decisions, [], "not measured"))
    cut = next(
        (i for i, line in enumerate(block) if line.strip().startswith((ACT_PREFIX, NO_FINDINGS))),
        len(block),
    )
    scope = block[0].removeprefix(VERDICT_TITLE).strip(" ()")
    lines = [scope[:1].upper() + scope[1:] + ".", *block[1:cut], *finding_lines(findings)]
    return Section([line.strip() for line in lines])


def decisions_section(decisions: dict, path: Path) -> Section:
    """The verdict first, then the best cell's held-out number (decisions.json
    best_cell.reported: the split it was not chosen on, free of the winner's curse), then the
    decisions in words."""
    lines = list(decisions.get("lines") or [])
    verdict = (decisions.get("verdict") or {}).get("line")
    if verdict:
        lines = [verdict, *(line for line in lines if line != verdict)]
    best = decisions.get("best_cell") or {}
    if best:
        chosen_on = best.get("chosen_on", decisions["decide_on"])
        reported = best.get("reported") or {}
        runs = ", ".join(best.get("runs", []))
        if reported.get("value") is not None:
            level = level_words(reported["value"], reported.get("ci_low"), reported.get("ci_high"))
            value = f"{best.get('reported_on')} {decisions['metric']} {level}; chosen on "
            value += chosen_on
        else:
            level = level_words(best.get("value"), best.get("ci_low"), best.get("ci_high"))
            value = f"{chosen_on} {decisions['metric']} {level}; chosen on it: optimistic"
        lines.insert(1 if lines else 0, f"Best cell: {best.get('cell')} ({value}; runs {runs}).")
    table = pd.DataFrame(
        [
            {k: d.get(k) for k in ("kind", "subject", "reference", "estimate", "decision")}
            for d in get(decisions, "decisions", path)
        ],
        columns=["kind", "subject", "reference", "estimate", "decision"],
    )
    return Section(lines, [("Decisions", table)], None)
