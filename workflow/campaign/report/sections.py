"""The report's sections, from a finished campaign's files: each section is a title, sentences,
tables and (for most) the data of one figure. Reading is strict: a missing file, a garbled one or
a missing column is one CampaignError naming the file and what was expected.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from campaign.budget import format_money
from campaign.core.errors import CampaignError
from campaign.core.io import get
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


def read_json(path: Path, keys: tuple[str, ...] = ()) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CampaignError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CampaignError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise CampaignError(f"{path}: expected a JSON object")
    for key in keys:
        if key not in data:
            raise CampaignError(f"{path}: expected a key '{key}'")
    return data


def read_table(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """A Parquet (or .csv) table with at least these columns."""
    path = Path(path)
    try:
        frame = pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
    except FileNotFoundError:
        raise CampaignError(f"{path}: file not found") from None
    except Exception as e:  # pyarrow and the csv parser raise many kinds
        kind = "CSV" if path.suffix == ".csv" else "Parquet"
        raise CampaignError(f"{path}: not a readable {kind} table ({type(e).__name__})") from None
    for column in columns:
        if column not in frame.columns:
            raise CampaignError(f"{path}: expected a column '{column}'")
    return frame


def read_text(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CampaignError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise CampaignError(f"{path}: not UTF-8 text") from None


def data_section(
    manifest_path: Path, privacy_path: Path, artifacts_path: Path | None = None
) -> Section:
    """Records, licences, the privacy scan of the text and, given the artifact scan's findings
    (results/data/artifact_findings.json), of what the campaign produced from it."""
    manifest = read_table(manifest_path, ("id", "source", "licence", "label"))
    privacy = read_json(privacy_path, ("kinds", "n_flagged", "n_records"))
    sources = (
        manifest.groupby("source", sort=True)
        .agg(
            records=("id", "size"),
            licence=("licence", lambda s: ", ".join(sorted(set(map(str, s))))),
            labels=("label", "nunique"),
        )
        .reset_index()
    )
    per_label = manifest.groupby(["source", "label"]).size().rename("records").reset_index()
    kinds = pd.DataFrame(
        [
            {
                "kind": kind,
                "records": int(v.get("records", 0)),
                "findings": int(v.get("findings", 0)),
            }
            for kind, v in sorted(get(privacy, "kinds", privacy_path).items())
        ],
        columns=["kind", "records", "findings"],
    )
    found = kinds[kinds["records"] > 0]
    lines = [
        f"{len(manifest):,} records from {len(sources)} source(s), "
        f"{manifest['label'].nunique()} labels.",
        "Licence per source: "
        + "; ".join(f"{r.source}: {r.licence}" for r in sources.itertuples())
        + ".",
        f"Privacy scan: {privacy['n_flagged']} of {privacy['n_records']:,} records flagged"
        + (
            " (" + ", ".join(f"{r.kind} {r.records}" for r in found.itertuples()) + ")."
            if len(found)
            else "."
        ),
    ]
    tables = [("Records per source", sources), ("Privacy findings per kind", kinds)]
    if artifacts_path is not None:
        scan = read_json(artifacts_path, ("artifacts", "scanned", "flagged", "findings_by_kind"))
        flagged = pd.DataFrame(
            [
                {
                    "artifact": row.get("artifact", ""),
                    "path": row["path"],
                    "findings": ", ".join(f"{k} {n}" for k, n in sorted(row["findings"].items())),
                }
                for row in get(scan, "artifacts", artifacts_path)
                if row.get("findings")
            ],
            columns=["artifact", "path", "findings"],
        )
        by_kind = ", ".join(f"{k} {n}" for k, n in sorted(scan["findings_by_kind"].items()))
        lines.append(
            f"Artifact scan (tokenizer vocabularies, predictions, reports): {scan['flagged']} of "
            f"{scan['scanned']} artifacts hold findings" + (f" ({by_kind})." if by_kind else ".")
        )
        if len(flagged):
            tables.append(("Findings in the campaign's artifacts", flagged))
    return Section(lines, tables, ("data_figure", (per_label, kinds)))


LEAKS = (
    ("groups_in_several_splits", "groups in several splits"),
    ("cross_split_group_pairs", "same-group pairs across splits"),
    ("cross_split_exact_pairs", "exact duplicate pairs across"),
    ("cross_split_near_pairs", "near duplicate pairs across"),
    ("eval_records_with_train_partner", "eval records with a train partner"),
    ("leaking_pairs", "leaking pairs, total"),
)


def leakage_section(audit_path: Path) -> Section:
    audit = read_json(audit_path, ("leaks", "splits", "method", "records"))
    naive = (audit.get("naive_split") or {}).get("leaks") or {}
    leaks = pd.DataFrame(
        [
            {
                "what": label,
                "this_split": int(get(audit, ("leaks", key), audit_path)),
                "naive_split": int(naive.get(key, 0)),
            }
            for key, label in LEAKS
        ]
    )
    splits = pd.DataFrame(
        [
            {"split": name, **{k: s.get(k) for k in ("records", "units", "share", "target")}}
            for name, s in sorted(audit["splits"].items())
        ]
    )
    total = leaks.set_index("what").loc["leaking pairs, total"]
    lines = [
        f"Split method {audit['method']}: {audit['records']:,} records in "
        f"{audit.get('units', '?')} units.",
        f"Leaking pairs across splits: {total['this_split']:,} with this split"
        + (
            f"; a naive split ({audit['naive_split'].get('what', 'per-record')}) would have "
            f"leaked {total['naive_split']:,} pairs, and "
            f"{int(naive.get('eval_records_with_train_partner', 0)):,} evaluation records would "
            f"have had a partner in train."
            if naive
            else "; no naive split was recorded."
        ),
    ]
    return Section(
        lines,
        [("Leaks: this split vs a naive split", leaks), ("Split sizes", splits)],
        ("leakage_figure", (leaks,)),
    )


def preflight_section(report_path: Path) -> Section:
    report = read_json(report_path, ("passed",))
    checks = pd.DataFrame(
        [
            {"check": name, "passed": bool(c.get("passed")), "blocking": bool(c.get("blocking"))}
            for name, c in report.items()
            if isinstance(c, dict) and "passed" in c
        ],
        columns=["check", "passed", "blocking"],
    )
    memory = (report.get("memory") or {}).get("details") or {}
    fit = pd.DataFrame(
        memory.get("fit_table") or [],
        columns=[
            "card",
            "memory_bytes",
            "need_bytes",
            "usable_bytes",
            "margin_pct",
            "fits",
            "micro_batch",
            "max_micro_batch",
            "phase",
            "source",
        ],
    )
    components = pd.DataFrame(
        memory.get("comparison") or [], columns=["component", "estimated", "measured", "ratio"]
    )
    failed = checks[~checks["passed"]]["check"].tolist()
    lines = [
        f"Preflight {'passed' if report['passed'] else 'FAILED'}: {int(checks['passed'].sum())} "
        f"of {len(checks)} checks passed" + (f"; failed: {', '.join(failed)}." if failed else "."),
        f"Memory fit: the run fits {int(fit['fits'].sum())} of {len(fit)} target card(s)"
        + (f" ({', '.join(fit[~fit['fits']]['card'])} too small)." if (~fit["fits"]).any() else ".")
        if len(fit)
        else "Memory fit: no target cards.",
    ]
    return Section(
        lines,
        [
            ("Checks", checks),
            ("Memory fit table", fit),
            ("Memory: estimate vs measured", components),
        ],
        ("memory_figure", (components, fit)),
    )


def read_curves(paths: list[Path]) -> pd.DataFrame:
    """Every run's training log in one table: run, step, split, loss, accuracy."""
    frames = []
    for path in sorted(paths, key=lambda p: p.parent.name):
        frame = read_table(path, ("step", "split", "loss", "accuracy"))
        frame = frame[["step", "split", "loss", "accuracy"]].copy()
        frame.insert(0, "run", path.parent.name)
        frames.append(frame)
    columns = ["run", "step", "split", "loss", "accuracy"]
    if not frames:
        return pd.DataFrame(columns=columns)
    curves = pd.concat(frames, ignore_index=True)[columns]
    curves["step"] = curves["step"].astype("int64")
    return curves.astype({"loss": "float64", "accuracy": "float64"})


def curves_section(curves: pd.DataFrame) -> Section:
    rows = []
    for run, frame in curves.groupby("run", sort=True):
        train, val = frame[frame["split"] == "train"], frame[frame["split"] == "validation"]
        rows.append(
            {
                "run": run,
                "steps": int(train["step"].max()) if len(train) else 0,
                "first_loss": train["loss"].iloc[0] if len(train) else math.nan,
                "last_loss": train["loss"].iloc[-1] if len(train) else math.nan,
                "final_validation_accuracy": val["accuracy"].iloc[-1] if len(val) else math.nan,
            }
        )
    table = pd.DataFrame(
        rows, columns=["run", "steps", "first_loss", "last_loss", "final_validation_accuracy"]
    )
    lines = [f"{len(table)} run(s) trained."]
    if len(table):
        best = table.sort_values(["final_validation_accuracy", "run"], ascending=[False, True])
        lines.append(
            f"Highest final validation accuracy: {best['run'].iloc[0]} "
            f"({level_words(best['final_validation_accuracy'].iloc[0], None, None)})."
        )
    return Section(lines, [("Per run", table)], ("curves_figure", (curves,)))


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
            "effects_figure",
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
            "seeds_figure",
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
        ("quantize_figure", (points, metric)),
    )


def budget_section(plans_path: Path, jobs_path: Path, summary_path: Path) -> Section:
    plans = read_table(
        plans_path,
        (
            "scenario",
            "offer",
            "pricing",
            "runs",
            "cost",
            "currency",
            "wall_hours",
            "meets_deadline",
            "cheapest",
        ),
    )
    jobs = read_table(jobs_path, ("run", "wall_hours", "cost"))
    summary = read_text(summary_path)
    rest = plans[plans["scenario"] == "rest"]
    scenario = "rest" if len(rest) and rest["runs"].max() > 0 else "kept plan"
    chosen = plans[plans["scenario"] == scenario].copy()
    chosen["label"] = chosen["offer"] + ", " + chosen["pricing"]
    currency = str(plans["currency"].iloc[0]) if len(plans) else ""
    best = chosen[chosen["cheapest"].astype(bool)]
    if len(best):
        b = best.iloc[0]
        offer = (
            f"Recommended offer ({scenario}): {b['offer']}, {b['pricing']}: "
            f"{format_money(float(b['cost']), currency)}, done in {b['wall_hours']:.3g} h."
        )
    else:
        offer = f"No offer finishes the {scenario} before the deadline."
    lines = [
        f"{len(jobs)} finished job(s), {jobs['wall_hours'].sum():.3g} h, "
        f"{format_money(float(jobs['cost'].sum()), currency)} measured.",
        offer,
    ]
    shown = [
        "offer",
        "pricing",
        "runs",
        "card_hours",
        "wall_hours",
        "cost",
        "meets_deadline",
        "cheapest",
    ]
    section = Section(
        lines,
        [
            ("Finished jobs", jobs),
            (f"Ways to buy the {scenario}", chosen[[c for c in shown if c in chosen]]),
        ],
        (
            "budget_figure",
            (
                chosen[["label", "cost", "meets_deadline", "cheapest"]].reset_index(drop=True),
                currency,
            ),
        ),
    )
    section.pre = split_verdict(summary)[1]
    return section


def split_verdict(summary: str) -> tuple[list[str], str]:
    """(the verdict block's lines, the rest) of the budget's summary.txt, which opens with the
    block (campaign.evaluate.verdict_block) and a blank line; ([], summary) without one."""
    head, blank, rest = summary.partition("\n\n")
    lines = head.splitlines()
    if not blank or not lines or not lines[0].startswith(VERDICT_TITLE + " ("):
        return [], summary
    return lines, rest


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


def forecast_section(forecast_path: Path) -> Section:
    forecast = read_table(
        forecast_path,
        (
            "run",
            "finished",
            "projected_hours",
            "actual_hours",
            "forecast_from_earlier_hours",
            "forecast_hours",
        ),
    )
    done = forecast[forecast["finished"].astype(bool)]
    lines = [f"{len(done)} of {len(forecast)} planned run(s) finished."]
    for column, what in (
        ("abs_error_projected", "as projected"),
        ("abs_error_calibrated", "calibrated"),
    ):
        if column in forecast and forecast[column].notna().any():
            lines.append(
                f"Median absolute forecast error, {what}: {forecast[column].median() * 100:.0f}% "
                f"(over {int(forecast[column].notna().sum())} run(s))."
            )
    shown = [
        "run",
        "tier",
        "finished",
        "projected_hours",
        "forecast_from_earlier_hours",
        "actual_hours",
        "forecast_hours",
    ]
    return Section(
        lines,
        [("Forecast per planned run", forecast[[c for c in shown if c in forecast]])],
        ("forecast_figure", (forecast,)),
    )


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
