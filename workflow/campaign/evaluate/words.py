"""The wording layer: the lines of decisions.json and summary.txt, and the verdict block, from
the decided comparison rows and the records (campaign.evaluate.records). No statistics and no
policy here: numbers come from questions, choices from decide (records.build asks it); this
module chooses what to say, in which order (the verdict first), and how."""

from __future__ import annotations

import math

from campaign.core.wording import level_words, percent, points  # noqa: F401 (public here)
from campaign.evaluate import decide
from campaign.evaluate.decide import ADVICE_QUANTILE, SEEDS_QUANTILE
from campaign.evaluate.look_words import verdict_look_lines

# The records (campaign.evaluate.records: Decisions, KeptCell, FloorComparison, OpenQuestion,
# KeepOption, VerdictBlock) are not imported here, not even for type checking: records imports
# this module to word what it builds, and the layout test counts every import as an edge.


def _finite(x) -> bool:
    return x is not None and math.isfinite(x)


def interval_words(row) -> str:
    """An estimate and its interval in points (`row`: a comparison row, or a record with
    estimate, ci_low and ci_high)."""
    row = _interval_of(row)
    low, high = row["ci_low"], row["ci_high"]
    if not (_finite(low) and _finite(high)):
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
    what = (
        " or ".join(ways)
        or r.get("seeds_note")
        or "neither more seeds nor more items within reach decides it"
    )
    if r.get("items_note"):
        what += f"; {r['items_note']}"
    return (
        f"{dominant} dominate its variance; to decide with at least evaluation.power (seeds "
        f"sized for the gap's lower {SEEDS_QUANTILE:.0%} bound, items for its lower "
        f"{ADVICE_QUANTILE:.0%}): {what} (the price of the seeds: budget phase)"
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
        if r["items_changed"] == 0:  # no interval to give: nothing differs
            return (
                f"{r['subject']}: identical to {r['reference']} on all {r['n_items']} {split} "
                "items (consistency check of the same weights, not a decision)"
            )
        return (
            f"{head}: consistency check of the same weights ({r['items_changed']} items differ), "
            "not a decision"
        )
    words = f"{head} (loss limit {limit:.1f} points), {r['decision']}"
    if r["test"].startswith("paired t"):
        return words + _paired_t_words(r)
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
    words += f" (non-inferiority, Tango score over the same items, Holm p {r['p_holm']:.3g}"
    if r["decision"] == decide.ADOPT and r.get("collapsed") is not None:
        words += f"; {collapse_words(r)}"
    return words + ")"


def _paired_t_words(r: dict) -> str:
    """The reason beside a variant's decision on per-item scores in [0, 1] (the paired t)."""
    n = r["n_items"]
    if r["decision"] == decide.TOO_FEW_ITEMS:
        return f" ({n} items: too few for any outcome on them to show the limit)"
    if r.get("p_from") == "count bound":  # few moved items, or all alike: the bound decided
        return (
            f" ({r['items_changed']} of {n} items moved, too few or all alike for the paired t; "
            f"the count bound gives p {r['p_value']:.3g}, Holm p {r['p_holm']:.3g})"
        )
    if r["decision"] == decide.REJECT:
        return (
            f" (loses more than the limit: paired t over the same items, family-adjusted "
            f"p {r['p_reject']:.3g})"
        )
    words = f" (non-inferiority, paired t over the same items, Holm p {r['p_holm']:.3g}"
    share = r.get("unseen_share", math.nan)
    if r["decision"] != decide.ADOPT or not _finite(share):
        return words + ")"
    # The test weighs the mean: a loss carried by a few items the sample happened to miss
    # does not move it (the rare-collapse case), so an adoption says what it cannot see.
    return words + f"; {collapse_words(r)})"


def collapse_words(r) -> str:
    """A variant's tail guard in one clause (`r`: a comparison row or a Decision with
    collapsed, collapse_low, collapse_high, collapse_items, n_items): how many items lost
    more than half the run's own score, and the share of items that could collapse."""
    get = r.get if isinstance(r, dict) else lambda k, d=None: getattr(r, k, d)
    n, c, high = get("n_items"), get("collapsed"), get("collapse_high")
    if c is None or not _finite(high):
        return "no tail guard measured"
    bound = f"{get('collapse_items'):,} items with none collapsing would bound it at 0.5 %"
    if c == 0:
        return (
            f"no item of {n} lost more than half its score; up to {high * 100:.2g} % of items "
            f"could collapse unseen at this item count; {bound}"
        )
    return (
        f"{c} of {n} items lost more than half their score: "
        f"{get('collapse_low') * 100:.2g}-{high * 100:.2g} % of items may collapse so"
    )


def decision_line(r: dict, split: str, metric: str, s: dict) -> str:
    """A main effect's or quantized variant's line in summary.txt."""
    return (_effect_line if r["kind"] == "main" else _quantized_line)(r, split, metric, s)


def decide_note(split: str, other: str, metric: str) -> str:
    return (
        f"Decisions use the {split} split ({metric}); the chosen option's quality is reported on "
        f"{other}, which was not used to choose it (evaluation.decide_on)."
    )


def floor_line(r: dict) -> str:
    """A cell not shown above the floor (its floor comparison row), in one line."""
    return f"{r['subject']}: {interval_words(r)} against {r['reference']} — " + (
        "the fine-tune does not beat the floor (below it by the test)"
        if r["decision"] == decide.BELOW
        else "not shown to beat the floor, nor below it by the test over the cells "
        f"(Holm p {r['p_holm']:.3g}, adjusted interval [{r['adj_low'] * 100:.1f}, "
        f"{r['adj_high'] * 100:.1f}])"
    )


def _floor_needs(f) -> str:
    """What would decide a FloorComparison, in one clause."""
    ways = []
    if f.seeds_needed:
        ways.append(f"{f.seeds_needed} seeds per cell")
    if f.items_needed:
        ways.append(f"{f.items_needed:,} evaluation items")
    what = (
        " or ".join(ways)
        or f.seeds_note
        or "neither more seeds nor more items within reach decides it"
    )
    return what + (f"; {f.items_note}" if f.items_note else "")


KEPT_WORDS = {
    decide.KEPT_CONTROL: "the control recipe, no cell shown better than it",
    decide.KEPT_SHOWN: "shown better than the control",
    decide.KEPT_HIGHEST: "no control scored: the highest cell",
}


def _level_of(x) -> str:
    """A record's or a metric row's level in words (not measured without one)."""
    if x is None:
        return "not measured"
    if isinstance(x, dict):
        return _value(x)
    return level_words(x.value, x.ci_low, x.ci_high)


def verdict_lines(
    kept,
    against,
    best_floor: str | None,
    floor_other: dict | None,
    split: str,
    other: str,
    metric: str,
) -> list[str]:
    """The verdict's lines (the first is summary.txt's first line): the kept option as
    records.build chose it (kept cell; the floor when decide.keeps_floor), with its level on
    `other` (floor_other: the floor's metric row there). kept: a KeptCell or None; against:
    its FloorComparison or None."""
    if kept is None:
        return [f"Keep: {best_floor} (no trained cell was scored)" if best_floor else
                "Keep: nothing scored"]  # fmt: skip
    mine = _interval_of(against) if against is not None else None
    headline = kept.reported if kept.reported.value is not None else kept.by_split.get(other)
    cell_other = _level_of(headline)
    if kept.reported_cells:  # chosen among cells: the interval holds for every cell at once
        cell_other += (
            f" (interval for all {kept.reported_cells} cells at once: the keep chose among them)"
        )
    if against is not None and against.decision == decide.BELOW:
        return [
            f"Keep: {best_floor} — the kept trained cell ({kept.cell}) is below it by "
            f"{-against.estimate * 100:.1f} points on {split}; {other} {metric} "
            f"{_level_of(floor_other)}",
            f"Kept trained cell on {other}: {cell_other} (not kept)",
        ]
    if against is not None and decide.keeps_floor(against.decision):
        return [
            f"Keep: {best_floor} — the kept trained cell ({kept.cell}) is not shown above it "
            f"({interval_words(mine)} on {split}); {other} {metric} {_level_of(floor_other)}",
            f"Kept trained cell on {other}: {cell_other} (not kept until shown better; to "
            f"decide: {_floor_needs(against)})",
        ]
    why = KEPT_WORDS.get(kept.kept_as, "chosen")
    lines = [f"Keep: {kept.cell} — {why} on {split}; {other} {metric} {cell_other}"]
    if against is not None:
        lines.append(f"Against {best_floor}: {interval_words(mine)} on {split}, {against.decision}")
    elif best_floor is None:
        # Every floor skipped or none asked for: nothing said the fine-tune is worth its cost.
        lines.append(
            "Against a floor: none was scored (evaluation.floor; a skipped floor is listed "
            "with its reason), so nothing shows the fine-tune beats a cheaper answer"
        )
    return lines


def _interval_of(x) -> dict:
    """A record's estimate and interval as interval_words reads them."""
    if isinstance(x, dict):
        return x
    return {"estimate": x.estimate, "ci_low": x.ci_low, "ci_high": x.ci_high}


# The verdict block: the first lines of results/evaluation/summary.txt, results/budget/summary.txt
# and the report. `verdict_block` is its one writer; each caller gathers the values it knows.
VERDICT_TITLE = "Verdict"
MAX_LISTED = 3  # open questions and findings shown in the block; the rest are counted
OPEN_PREFIX, ACT_PREFIX = "Open: ", "Act on: "
NO_FINDINGS = "Findings to act on: none"


def _keep_words(keep) -> str:
    kind, name = keep.kind, keep.name
    if kind == "floor":
        return f"the reference floor {name}"
    if kind == "cell":
        return f"cell {name}"
    if kind == "run":
        return f"run {name} of cell {keep.cell}"
    run, _, variant = name.rpartition("/")
    return f"{name} (quantized {variant} of run {run}, cell {keep.cell})"


def _open_words(q, money, price_at: str | None) -> str:
    """An OpenQuestion (priced or not) in one line."""
    head = f"  {OPEN_PREFIX}{q.subject}, {q.decision}: "
    if q.stopped:
        return head + f"not pursued, the looks stopped a cell of it ({q.stopped})"
    ways = []
    if q.seeds_needed:
        seeds = f"{q.seeds_needed} seeds per cell"
        if q.extra_runs is not None:
            seeds += f" = {q.extra_runs:,} more run(s)"
        if money is not None and _finite(q.cost):
            seeds += f", {money(q.cost)}"
        elif price_at:
            seeds += f" (priced in {price_at})"
        ways.append(seeds)
    if q.items_needed:
        ways.append(f"{q.items_needed:,} evaluation items (labelling not priced)")
    if not ways and q.kind == "quantized":
        # The same weights: seeds do not apply; its interval narrows with items only.
        return (
            head + "more evaluation items would narrow it (seeds do not apply to one run's weights)"
        )
    if not ways and (q.seeds_note or q.items_note):
        return head + (q.seeds_note or q.items_note)
    if not ways:
        return head + "neither more seeds nor more items would decide it"
    return head + "; or ".join(ways)


def verdict_block(v, money=None) -> list[str]:
    """The verdict in at most ~12 lines, from the block's values (records.VerdictBlock: no
    reading, no policy). money: amount -> text (the budget's format_money); levels are in
    percent, differences in points."""
    lines = [
        f"{VERDICT_TITLE} (chosen on {v.decided_on}; quality on {v.split}, "
        f"{v.metric}; levels in %, differences in points)"
    ]
    keep = v.keep
    if keep is None:
        lines.append("  Keep: nothing (no trained cell and no floor was scored)")
    else:
        lines.append(
            f"  Keep: {_keep_words(keep)}: {v.split} {v.metric} "
            f"{level_words(keep.quality, keep.low, keep.high)}"
        )
    f = v.against_floor
    if f is not None:
        lines.append(
            f"  Kept cell against the floor {f.floor}: {interval_words(f)} on {f.split}, "
            f"{f.decision}"
        )
    lines += [f"  {line}" for line in verdict_look_lines(v.looks)]
    cost = v.cost
    if cost is not None and money is not None:
        lines.append(
            f"  Cost: {money(cost.train)} to train + {money(cost.serve)} to serve "
            f"{cost.predictions:,} predictions = {money(cost.total)} ({cost.offer})"
        )
    elif keep is not None:
        lines.append(f"  Cost to train and to serve: {v.costs_at or 'not measured'}")
    if v.also:
        lines.append(
            "  Also adopted (within the loss limit; serving costs in the budget): "
            + ", ".join(v.also)
        )
    if v.ship:
        lines.append(f"  Ship: {v.ship}")
    questions = v.open
    for q in questions[:MAX_LISTED]:
        lines.append(_open_words(q, money, v.price_at))
    if len(questions) > MAX_LISTED:
        lines.append(f"  ... and {len(questions) - MAX_LISTED} more open question(s)")
    if not questions:
        lines.append("  Open questions: none")
    lines += finding_lines(list(v.findings))
    return lines


def finding_lines(found: list[str]) -> list[str]:
    """The block's findings: the first MAX_LISTED, then how many more."""
    lines = [f"  {ACT_PREFIX}{line}" for line in found[:MAX_LISTED]]
    if len(found) > MAX_LISTED:
        lines.append(f"  ... and {len(found) - MAX_LISTED} more finding(s): campaign findings")
    return lines or [f"  {NO_FINDINGS}"]


def evaluation_flags(decisions) -> list[str]:
    """The evaluation's findings to act on (`decisions`: records.Decisions), worded here once
    for the verdict blocks and `campaign findings` (findings.evaluation_findings): cells not
    shown to beat the floor, canaries not rejected, variants skipped. (`campaign findings` and
    the report add the other phases' findings.)"""
    from campaign.core.registry import produced
    from campaign.core.stage import From

    out = [
        f"evaluation: {f.cell} {f.verdict} ({f.floor}: {interval_words(f)})"
        for f in decisions.below_floor
    ]
    out += [
        f"evaluation: the canary {row.subject} was not rejected: the scores cannot tell its "
        f"broken model from {row.reference}'s; do not trust their verdict on variants"
        for row in decisions.decisions
        if row.decision == decide.CANARY_MISSED
    ]
    if decisions.skipped_variants:
        n, where = len(decisions.skipped_variants), produced(From("evaluate", "decisions")).path
        out.append(f"evaluation: {n} quantized variant(s) skipped; see {where}")
    return out
