"""The wording layer: decisions.json and summary.txt from the decided comparison rows. No
statistics and no policy here: numbers and decisions come from questions / decide; this module
chooses what to say, in which order (the verdict first), and how."""

from __future__ import annotations

import math

from campaign.core.wording import level_words, percent, points  # noqa: F401 (public here)
from campaign.evaluate import decide
from campaign.evaluate.look_words import verdict_look_lines


def interval_words(row: dict) -> str:
    low, high = row["ci_low"], row["ci_high"]
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{points(row['estimate'])} points (no interval)"
    return f"{points(row['estimate'])} points [{low * 100:.1f}, {high * 100:.1f}]"


def _value(row: dict | None) -> str:
    if not row:
        return "not measured"
    return level_words(row["value"], row["ci_low"], row["ci_high"])


def _needs(r: dict) -> str:
    """What would decide an open effect, in one clause."""
    if r.get("stopped_by_look"):
        return f"not pursued: the looks stopped a cell of it ({r['stopped_by_look']})"
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
    if r.get("items_note"):
        what += f"; {r['items_note']}"
    return (
        f"{dominant} dominate its variance; to decide at the estimate: {what} "
        "(the price of the seeds: budget phase)"
    )


def _effect_line(r: dict, split: str, metric: str, s: dict) -> str:
    words = f"{r['subject']}: {interval_words(r)} {split} {metric}, {r['decision']}"
    if r["n_seeds"] < 2:
        return words + " (one seed: the seed-to-seed spread is not measured; run more seeds)"
    adjusted = f"[{r['adj_low'] * 100:.1f}, {r['adj_high'] * 100:.1f}]"
    useful = f"useful from {s['min_useful_effect'] * 100:.1f} points"
    if r.get("look") is not None:  # an adaptive campaign: decided on the looks (looks.py)
        words += (
            f" ({r['n_seeds']} seeds, repeated interval to look {r['look']} {adjusted}, {useful}"
        )
    else:
        # One statement: the decision reads the family-adjusted interval against the useful
        # size, so the line gives that interval and that size (a Holm p against 0 beside it
        # would say "shown" where the decision says "inconclusive").
        words += (
            f" ({r['n_seeds']} seeds, family-adjusted interval {adjusted} against {useful}; "
            f"detectable from {r['mde'] * 100:.1f} points"
        )
    if r.get("interval_note"):  # the looks' repeated intervals do not overlap (looks.py)
        words += "; " + r["interval_note"]
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
    if r["decision"] == decide.REJECT and math.isfinite(r.get("p_reject", math.nan)):
        return words + (
            f" (loses more than the limit: exact test over the same items, family-adjusted "
            f"p {r['p_reject']:.3g})"
        )
    return words + f" (non-inferiority, Tango score over the same items, Holm p {r['p_holm']:.3g})"


# What decisions.json keeps of each main effect's and quantized variant's comparison row.
DECISION_KEYS = (
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
    "items_note",
    "stopped_by_look",
    "intervals_disagree",
    "interval_note",
)


def _kept(
    metric_rows: list, on: list, split: str, control: str | None
) -> tuple[dict | None, str | None]:
    """The kept cell's metric row on `split` and why it is kept (decide.kept_cell's policy on
    the cells against the control)."""
    cells = {r["cell"]: r for r in metric_rows if r["kind"] == "cell" and r["split"] == split}
    names = {r["cell_id"]: name for name, r in cells.items()}
    against = {
        names[r["cell_id"]]: (r["decision"], r["estimate"])
        for r in on
        if r["kind"] == "cell" and r.get("cell_id") in names
    }
    kept = decide.kept_cell(control, against, {c: r["value"] for c, r in cells.items()})
    return (None, None) if kept is None else (cells[kept[0]], kept[1])


def decisions(
    spec: dict,
    comparison_rows: list,
    metric_rows: list,
    variants: list,
    best_floor: str | None,
    control: str | None = None,
) -> dict:
    """decisions.json (its keys: campaign.evaluate.decide's docstring), lines in summary order.
    control: the control cell's name (the recipe kept unless a cell is shown better)."""
    s = spec["evaluation"]
    split, metric = s["decide_on"], s["metric"]
    other = next(x for x in ("validation", "test") if x != split)
    on = [r for r in comparison_rows if r["split"] == split]
    best, how = _kept(metric_rows, on, split, control)
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
    lines, listed = [], []
    for r in on:
        if r["kind"] not in ("main", "quantized"):
            continue
        words = (_effect_line if r["kind"] == "main" else _quantized_line)(r, split, metric, s)
        listed.append({k: r.get(k) for k in DECISION_KEYS} | {"words": words})
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
    verdict = _verdict(best, by_split, vs_floor, floor_of, best_floor, split, other, metric, how)
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
            "kept_as": how,
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


# What verdict.against_floor carries of the best cell's floor row: the test, and (while it is
# not shown above the floor) what would decide it.
FLOOR_KEYS = (
    "estimate",
    "ci_low",
    "ci_high",
    "decision",
    "n_seeds",
    "dominant",
    "seeds_needed",
    "items_needed",
    "items_note",
)


def _floor_needs(f: dict) -> str:
    ways = []
    if f.get("seeds_needed"):
        ways.append(f"{f['seeds_needed']} seeds per cell")
    if f.get("items_needed"):
        ways.append(f"{f['items_needed']:,} evaluation items")
    what = " or ".join(ways) or "neither more seeds nor more items (the estimate sits at zero)"
    return what + (f"; {f['items_note']}" if f.get("items_note") else "")


def floor_question(decisions: dict) -> dict | None:
    """The open question of a best cell not shown above the floor (the verdict then keeps the
    floor): {subject, kind "floor", decision, n_seeds, seeds_needed, items_needed}; else None."""
    f = (decisions.get("verdict") or {}).get("against_floor") or {}
    if f.get("decision") != decide.NOT_SHOWN:
        return None
    return {
        "subject": f"{f.get('cell')} against {f['floor']}",
        "kind": "floor",
        "decision": f["decision"],
        "n_seeds": f.get("n_seeds"),
        "seeds_needed": f.get("seeds_needed"),
        "extra_runs": None,
        "cost": None,
        "items_needed": f.get("items_needed"),
        "items_note": f.get("items_note"),
    }


KEPT_WORDS = {
    decide.KEPT_CONTROL: "the control recipe, no cell shown better than it",
    decide.KEPT_SHOWN: "shown better than the control",
    decide.KEPT_HIGHEST: "no control scored: the highest cell",
}


def _verdict(
    best, by_split, vs_floor, floor_of, best_floor, split, other, metric, how=None
) -> dict:
    """The option to keep: the kept cell (decide.kept_cell: the control unless a cell is shown
    better; chosen on `split`, reported on `other`), or the floor when that cell is below it
    or not shown above it by the test. `quality`: the kept option's level on `other`;
    `against_floor`: the best cell against the floor on `split` (None without a floor)."""
    levels = ("value", "ci_low", "ci_high")

    def quality(row: dict | None) -> dict:
        return {"split": other, "metric": metric} | {k: (row or {}).get(k) for k in levels}

    if best is None:
        keep = best_floor
        line = (
            f"Keep: {best_floor} (no trained cell was scored)" if keep else "Keep: nothing scored"
        )
        return {
            "keep": keep,
            "kind": "floor" if keep else None,
            "line": line,
            "lines": [line],
            "quality": quality(floor_of.get(other)) if keep else None,
            "against_floor": None,
        }
    mine = next((r for r in vs_floor if r["subject"] == best["cell"]), None)
    against = None
    if mine is not None:
        against = {"floor": best_floor, "split": split, "cell": best["cell"]} | {
            k: mine.get(k) for k in FLOOR_KEYS
        }
    if mine is not None and mine["decision"] == decide.BELOW:
        line = (
            f"Keep: {best_floor} — the kept trained cell ({best['cell']}) is below it by "
            f"{-mine['estimate'] * 100:.1f} points on {split}; {other} {metric} "
            f"{_value(floor_of.get(other))}"
        )
        extra = f"Kept trained cell on {other}: {_value(by_split.get(other))} (not kept)"
        return {
            "keep": best_floor,
            "kind": "floor",
            "line": line,
            "lines": [line, extra],
            "quality": quality(floor_of.get(other)),
            "against_floor": against,
        }
    if mine is not None and mine["decision"] == decide.NOT_SHOWN:
        # Not shown better than the floor, which costs next to nothing to train and serve: the
        # floor is kept until more seeds or items show the cell above it (or below).
        line = (
            f"Keep: {best_floor} — the kept trained cell ({best['cell']}) is not shown above it "
            f"({interval_words(mine)} on {split}); {other} {metric} {_value(floor_of.get(other))}"
        )
        extra = (
            f"Kept trained cell on {other}: {_value(by_split.get(other))} (not kept until shown "
            f"better; to decide: {_floor_needs(against)})"
        )
        return {
            "keep": best_floor,
            "kind": "floor",
            "line": line,
            "lines": [line, extra],
            "quality": quality(floor_of.get(other)),
            "against_floor": against,
        }
    why = KEPT_WORDS.get(how, "chosen")
    line = (
        f"Keep: {best['cell']} — {why} on {split}; {other} {metric} {_value(by_split.get(other))}"
    )
    lines = [line]
    if mine is not None:
        lines.append(f"Against {best_floor}: {interval_words(mine)} on {split}, {mine['decision']}")
    return {
        "keep": best["cell"],
        "kind": "cell",
        "line": line,
        "lines": lines,
        "quality": quality(by_split.get(other)),
        "against_floor": against,
    }


# The verdict block: the first lines of results/evaluation/summary.txt, results/budget/summary.txt
# and the report. `verdict_block` is its one writer; each caller gathers the values it knows.
VERDICT_TITLE = "Verdict"
MAX_LISTED = 3  # open questions and findings shown in the block; the rest are counted
OPEN = (decide.INCONCLUSIVE, decide.ADOPT_SMALL, decide.ONE_SEED, decide.TOO_FEW_ITEMS)
OPEN_PREFIX, ACT_PREFIX = "Open: ", "Act on: "
NO_FINDINGS = "Findings to act on: none"


def _keep_words(keep: dict) -> str:
    kind, name = keep["kind"], keep["name"]
    if kind == "floor":
        return f"the reference floor {name}"
    if kind == "cell":
        return f"cell {name}"
    if kind == "run":
        return f"run {name} of cell {keep['cell']}"
    run, _, variant = name.rpartition("/")
    return f"{name} (quantized {variant} of run {run}, cell {keep['cell']})"


def _open_words(q: dict, money, price_at: str | None) -> str:
    head = f"  {OPEN_PREFIX}{q['subject']}, {q['decision']}: "
    if q.get("stopped"):
        return head + f"not pursued, the looks stopped a cell of it ({q['stopped']})"
    ways = []
    if q.get("seeds_needed"):
        runs = q.get("extra_runs")
        seeds = f"{q['seeds_needed']} seeds per cell"
        if runs is not None:
            seeds += f" = {runs:,} more run(s)"
        cost = q.get("cost")
        if money is not None and cost is not None and math.isfinite(cost):
            seeds += f", {money(cost)}"
        elif price_at:
            seeds += f" (priced in {price_at})"
        ways.append(seeds)
    if q.get("items_needed"):
        ways.append(f"{q['items_needed']:,} evaluation items (labelling not priced)")
    if not ways and q.get("kind") == "quantized":
        # The same weights: seeds do not apply; its interval narrows with items only.
        return (
            head + "more evaluation items would narrow it (seeds do not apply to one run's weights)"
        )
    if not ways and q.get("items_note"):
        return head + q["items_note"]
    if not ways:
        return head + "neither more seeds nor more items would decide it"
    return head + "; or ".join(ways)


def verdict_block(v: dict, money=None) -> list[str]:
    """The verdict in at most ~12 lines, from the tables' values (no reading, no policy).

    v: split, metric (where the kept option's quality is measured), decided_on;
    keep: {kind: cell | run | quantized | floor, name, cell, quality, low, high} or None;
    against_floor: {floor, split, estimate, ci_low, ci_high, decision} or None;
    also: names of cheaper candidates not priced here (adopted quantized variants), or [];
    cost: {train, serve, total, predictions, offer} (money amounts) or None, then costs_at says
    where the costs are; ship: the file (or folder) a user would ship, or None;
    looks: an adaptive campaign's looks (look_words.look_summary: decisions.json `adaptive`) or
    None (a fixed campaign: no line);
    open: [{subject, decision, seeds_needed, extra_runs, cost, items_needed}], price_at: where
    their prices are when `cost` is None; findings: lines to act on.
    money: amount -> text (the budget's format_money); levels are in percent, differences in
    points.
    """
    lines = [
        f"{VERDICT_TITLE} (chosen on {v['decided_on']}; quality on {v['split']}, "
        f"{v['metric']}; levels in %, differences in points)"
    ]
    keep = v.get("keep")
    if keep is None:
        lines.append("  Keep: nothing (no trained cell and no floor was scored)")
    else:
        lines.append(
            f"  Keep: {_keep_words(keep)}: {v['split']} {v['metric']} "
            f"{level_words(keep['quality'], keep['low'], keep['high'])}"
        )
    f = v.get("against_floor")
    if f is not None:
        lines.append(
            f"  Kept cell against the floor {f['floor']}: {interval_words(f)} on {f['split']}, "
            f"{f['decision']}"
        )
    lines += [f"  {line}" for line in verdict_look_lines(v.get("looks"))]
    cost = v.get("cost")
    if cost is not None and money is not None:
        lines.append(
            f"  Cost: {money(cost['train'])} to train + {money(cost['serve'])} to serve "
            f"{cost['predictions']:,} predictions = {money(cost['total'])} ({cost['offer']})"
        )
    elif keep is not None:
        lines.append(f"  Cost to train and to serve: {v.get('costs_at') or 'not measured'}")
    if v.get("also"):
        lines.append(
            "  Also adopted (within the loss limit; serving costs in the budget): "
            + ", ".join(v["also"])
        )
    if v.get("ship"):
        lines.append(f"  Ship: {v['ship']}")
    questions = v.get("open") or []
    for q in questions[:MAX_LISTED]:
        lines.append(_open_words(q, money, v.get("price_at")))
    if len(questions) > MAX_LISTED:
        lines.append(f"  ... and {len(questions) - MAX_LISTED} more open question(s)")
    if not questions:
        lines.append("  Open questions: none")
    found = v.get("findings") or []
    lines += finding_lines(found)
    return lines


def finding_lines(found: list[str]) -> list[str]:
    """The block's findings: the first MAX_LISTED, then how many more."""
    lines = [f"  {ACT_PREFIX}{line}" for line in found[:MAX_LISTED]]
    if len(found) > MAX_LISTED:
        lines.append(f"  ... and {len(found) - MAX_LISTED} more finding(s): campaign findings")
    return lines or [f"  {NO_FINDINGS}"]


def open_questions(decisions: dict) -> list[dict]:
    """The open questions of decisions.json (main effects and quantized variants not decided on
    the decision split, and first a best cell not shown above the floor: floor_question), with
    what would decide each; not priced (the budget prices seeds)."""
    out = []
    for d in decisions.get("decisions", []):
        if d.get("kind") not in ("main", "quantized") or d.get("decision") not in OPEN:
            continue
        out.append(
            {
                "subject": d["subject"],
                "kind": d["kind"],
                "decision": d["decision"],
                "seeds_needed": (
                    d.get("seeds_needed")
                    if d["kind"] == "main" and not d.get("stopped_by_look")
                    else None
                ),
                "stopped": d.get("stopped_by_look"),
                "extra_runs": None,
                "cost": None,
                "items_needed": d.get("items_needed"),
                "items_note": d.get("items_note"),
            }
        )
    floor = floor_question(decisions)
    if floor is not None:
        out.insert(0, floor)  # it decides what to keep: first
    items = {u["subject"]: u["items_needed"] for u in decisions.get("no_decision_possible", [])}
    for q in out:
        if q["subject"] in items:
            q["items_needed"] = items[q["subject"]]
    return out


def evaluation_flags(decisions: dict) -> list[str]:
    """The evaluation's findings to act on: cells not shown to beat the floor, variants skipped.
    (`campaign findings` and the report add the other phases' findings.)"""
    out = [
        f"evaluation: {f['cell']} {f['verdict']} ({f['floor']}: {interval_words(f)})"
        for f in decisions.get("below_floor", [])
    ]
    skipped = decisions.get("skipped_variants") or []
    if skipped:
        out.append(f"evaluation: {len(skipped)} quantized variant(s) skipped (decisions.json)")
    return out


def adopted_variants(decisions: dict) -> list[str]:
    """Quantized variants of the best cell's runs that the evaluation adopted."""
    runs = set((decisions.get("best_cell") or {}).get("runs", []))
    return [
        d["subject"]
        for d in decisions.get("decisions", [])
        if d.get("kind") == "quantized"
        and d.get("reference") in runs
        and d.get("decision") == decide.ADOPT
    ]


def evaluation_verdict(
    decisions: dict, findings: list[str], costs_at: str, price_at: str | None = None
) -> dict:
    """The verdict block's values as the evaluation knows them: the option to keep among the
    cells and the floor, no costs (the budget runs later: `costs_at` and `price_at` say where
    the costs and the open questions' prices are)."""
    verdict = decisions.get("verdict") or {}
    quality = verdict.get("quality") or {}
    keep = None
    if verdict.get("keep") is not None:
        keep = {
            "kind": verdict["kind"],
            "name": verdict["keep"],
            "cell": verdict["keep"],
            "quality": quality.get("value"),
            "low": quality.get("ci_low"),
            "high": quality.get("ci_high"),
        }
    cell = verdict.get("kind") == "cell"
    return {
        "decided_on": decisions["decide_on"],
        "split": quality.get("split") or decisions["decide_on"],
        "metric": decisions["metric"],
        "keep": keep,
        "against_floor": verdict.get("against_floor"),
        "looks": decisions.get("adaptive"),
        "also": adopted_variants(decisions) if cell else [],
        "cost": None,
        "costs_at": costs_at,
        "ship": None,
        "open": open_questions(decisions),
        "price_at": price_at,
        "findings": findings,
    }
