"""The wording layer: decisions.json and summary.txt from the decided comparison rows. No
statistics and no policy here: numbers and decisions come from questions / decide; this module
chooses what to say, in which order (the verdict first), and how."""

from __future__ import annotations

import math

from campaign.evaluate import decide


def points(value: float) -> str:
    """A metric difference in points, signed: +4.1."""
    return f"{value * 100:+.1f}"


def interval_words(row: dict) -> str:
    low, high = row["ci_low"], row["ci_high"]
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{points(row['estimate'])} points (no interval)"
    return f"{points(row['estimate'])} points [{low * 100:.1f}, {high * 100:.1f}]"


def _value(row: dict | None) -> str:
    if not row:
        return "not measured"
    return f"{row['value']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


def _needs(r: dict) -> str:
    """What would decide an open effect, in one clause."""
    if r["n_seeds"] < 2:
        return "one seed: the seed-to-seed spread is not measured; run a second seed"
    seeds, items = r.get("seeds_needed"), r.get("items_needed")
    dominant = r.get("dominant")
    if dominant is None:
        return "no variance parts measured"
    ways = []
    if seeds:
        low, high = r.get("seeds_needed_low"), r.get("seeds_needed_high")
        spread = f" (95 % range {low}-{high})" if low and high else ""
        ways.append(f"{seeds} seeds per cell{spread}")
    if items:
        ways.append(f"{items} evaluation items")
    what = " or ".join(ways) or "neither more seeds nor more items (the estimate sits at the bar)"
    return (
        f"{dominant} dominate its variance; to decide at the estimate: {what} "
        "(the price of the seeds: budget phase)"
    )


def _effect_line(r: dict, split: str, metric: str, s: dict) -> str:
    words = f"{r['subject']}: {interval_words(r)} {split} {metric}, {r['decision']}"
    if r["n_seeds"] < 2:
        return words + " (one seed: the seed-to-seed spread is not measured; run more seeds)"
    words += (
        f" ({r['n_seeds']} seeds, Holm p {r['p_holm']:.3g}, adjusted interval "
        f"[{r['adj_low'] * 100:.1f}, {r['adj_high'] * 100:.1f}], useful from "
        f"{s['min_useful_effect'] * 100:.1f} points; detectable from {r['mde'] * 100:.1f} points"
    )
    if r["decision"] in (decide.INCONCLUSIVE, decide.ADOPT_SMALL):
        words += "; " + _needs(r)
    return words + ")"


def _quantized_line(r: dict, split: str, metric: str, s: dict) -> str:
    limit = s["max_quality_loss"] * 100
    head = f"{r['subject']}: {interval_words(r)} {split} {metric} against {r['reference']}"
    if r["decision"] == decide.CONSISTENCY:
        return (
            f"{head}: consistency check of the same weights ({r['items_changed']} items differ), "
            "not a decision"
        )
    words = f"{head} (loss limit {limit:.1f} points), {r['decision']}"
    if r["decision"] == decide.TOO_FEW_ITEMS:
        return words + (
            f" (with {r['n_items']} items the smallest provable loss is "
            f"{r['smallest_provable_loss'] * 100:.2f} points; needs >= {r['items_to_prove']} items)"
        )
    return words + f" (non-inferiority, Tango score over the same items, Holm p {r['p_holm']:.3g})"


def decisions(
    spec: dict, comparison_rows: list, metric_rows: list, variants: list, best_floor: str | None
) -> dict:
    """decisions.json (its keys: campaign.evaluate.decide's docstring), lines in summary order."""
    s = spec["evaluation"]
    split, metric = s["decide_on"], s["metric"]
    other = next(x for x in ("validation", "test") if x != split)
    cells = [r for r in metric_rows if r["kind"] == "cell" and r["split"] == split]
    best = max(cells, key=lambda r: r["value"]) if cells else None
    by_split = {
        r["split"]: {k: r[k] for k in ("value", "ci_low", "ci_high", "interval_over")}
        for r in metric_rows
        if best is not None and r["kind"] == "cell" and r["cell"] == best["cell"]
    }
    run_values = {
        r["variant"]: r["value"]
        for r in metric_rows
        if best is not None
        and r["kind"] == "run"
        and r["split"] == split
        and r["metric"] == metric
        and r["cell"] == best["cell"]
    }
    floor_of = {
        r["split"]: r for r in metric_rows if r["variant"] == best_floor and r["metric"] == metric
    }
    on = [r for r in comparison_rows if r["split"] == split]
    lines, listed = [], []
    for r in on:
        if r["kind"] not in ("main", "quantized"):
            continue
        words = (_effect_line if r["kind"] == "main" else _quantized_line)(r, split, metric, s)
        keys = (
            "kind",
            "subject",
            "reference",
            "decision",
            "estimate",
            "ci_low",
            "ci_high",
            "p_holm",
            "n_seeds",
            "adj_low",
            "adj_high",
            "dominant",
            "seeds_needed",
            "items_needed",
            "seeds_needed_low",
            "seeds_needed_high",
        )
        listed.append({k: r.get(k) for k in keys} | {"words": words})
        lines.append(words)
    vs_floor = [r for r in on if r["kind"] == "floor"]
    flagged = [r for r in vs_floor if r["decision"] != decide.ABOVE]
    floor_lines = [
        f"{r['subject']}: {interval_words(r)} against {r['reference']} — "
        + (
            "the fine-tune does not beat the floor (below it by the test)"
            if r["decision"] == decide.BELOW
            else "not shown to beat the floor, nor below it by the test over the cells "
            f"(Holm p {r['p_holm']:.3g}, adjusted interval [{r['adj_low'] * 100:.1f}, "
            f"{r['adj_high'] * 100:.1f}])"
        )
        for r in flagged
    ]
    verdict = _verdict(best, by_split, vs_floor, floor_of, best_floor, split, other, metric)
    note = (
        f"Decisions use the {split} split ({metric}); the chosen option's quality is reported on "
        f"{other}, which was not used to choose it (evaluation.decide_on)."
    )
    unprovable = [
        {
            "subject": r["subject"],
            "smallest_provable_loss": r["smallest_provable_loss"],
            "items_needed": r["items_to_prove"],
        }
        for r in on
        if r["kind"] == "quantized" and r["decision"] == decide.TOO_FEW_ITEMS
    ]
    return {
        "decide_on": split,
        "metric": metric,
        "confidence": s["confidence"],
        "min_useful_effect": s["min_useful_effect"],
        "max_quality_loss": s["max_quality_loss"],
        "note": note,
        "best_cell": None
        if best is None
        else {
            "cell": best["cell"],
            "by_split": by_split,
            "value": best["value"],
            "ci_low": best["ci_low"],
            "ci_high": best["ci_high"],
            "interval_over": best["interval_over"],
            "chosen_on": split,
            "reported_on": other,
            "reported": {k: by_split.get(other, {}).get(k) for k in ("value", "ci_low", "ci_high")},
            "representative_run": decide.representative(run_values) if run_values else None,
            "runs": sorted(run_values),
        },
        "floor": None
        if best_floor is None
        else {
            "name": best_floor,
            **{k: floor_of[split][k] for k in ("value", "ci_low", "ci_high")},
        },
        "verdict": verdict,
        "decisions": listed,
        "no_decision_possible": unprovable,
        "below_floor": [
            {
                "cell": r["subject"],
                "floor": r["reference"],
                "verdict": r["decision"],
                "estimate": r["estimate"],
                "ci_low": r["ci_low"],
                "ci_high": r["ci_high"],
            }
            for r in flagged
        ],
        "lines": [*verdict["lines"], "", note, *lines, *floor_lines],
    }


def _verdict(best, by_split, vs_floor, floor_of, best_floor, split, other, metric) -> dict:
    """The option to keep: the best cell (chosen on `split`, reported on `other`), or the floor
    when that cell is below it by the test."""
    if best is None:
        keep = best_floor
        line = (
            f"Keep: {best_floor} (no trained cell was scored)" if keep else "Keep: nothing scored"
        )
        return {"keep": keep, "kind": "floor" if keep else None, "line": line, "lines": [line]}
    mine = next((r for r in vs_floor if r["subject"] == best["cell"]), None)
    if mine is not None and mine["decision"] == decide.BELOW:
        line = (
            f"Keep: {best_floor} — the best trained cell ({best['cell']}) is below it by "
            f"{-mine['estimate'] * 100:.1f} points on {split}; {other} {metric} "
            f"{_value(floor_of.get(other))}"
        )
        extra = f"Best trained cell on {other}: {_value(by_split.get(other))} (not kept)"
        return {"keep": best_floor, "kind": "floor", "line": line, "lines": [line, extra]}
    line = (
        f"Keep: {best['cell']} — chosen on {split}; {other} {metric} {_value(by_split.get(other))}"
    )
    lines = [line]
    if mine is not None:
        lines.append(f"Against {best_floor}: {interval_words(mine)} on {split}, {mine['decision']}")
    return {"keep": best["cell"], "kind": "cell", "line": line, "lines": lines}
