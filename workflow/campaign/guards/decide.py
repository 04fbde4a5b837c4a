"""The guards' decisions: does each trained cell lose more than the margin against the base on
each guard task? Per task, every run against the base on the same items is a compressed
variant against its reference (campaign.evaluate.quantized_row: Tango's score test on
0/1 scores, the guarded paired t on scores in [0, 1]), Holm across the task's runs
(decide_family), typed records (campaign.evaluate.records.Decision).

A cell holds a guard when every one of its runs (seeds) is shown within the margin (an
intersection-union test: no further adjustment); it loses the guard when any run is shown to
lose more; otherwise the question is open, with the items that would decide it.

items: the scored-items table (ITEM_COLUMNS), the base as variant BASE.
"""

from __future__ import annotations

import math

import numpy as np

from campaign.core.errors import CampaignError
from campaign.evaluate import (
    ADOPT,
    REJECT,
    Decision,
    decide_family,
    loss_exceeds_p,
    noninferiority_p,
    quantized_row,
    record_dict,
)

BASE = "base"
HOLDS, LOSES, OPEN = "holds", "loses", "open"
MAX_ITEMS = 1_000_000  # beyond this, no count is said


def _aligned(items, task: str, run: str):
    """(base scores, run scores) of `task` on the same items in the base's order, `(n_items,)`;
    refused in one line when the items differ (never dropped silently)."""
    frame = items[items["task"] == task]
    base = frame[frame["variant"] == BASE].set_index("item")["score"]
    got = frame[frame["variant"] == run].set_index("item")["score"]
    missing, extra = base.index.difference(got.index), got.index.difference(base.index)
    if len(missing) or len(extra):
        raise CampaignError(
            f"guard {task}: run {run} scored {len(got)} items, the base {len(base)} "
            f"({len(missing)} of the base's missing, {len(extra)} not the base's)"
        )
    return base.to_numpy(np.float64), got.reindex(base.index).to_numpy(np.float64)


def task_rows(items, task: str, margin: float, level: float, power: float) -> list[dict]:
    """One decided row per run on `task` (decide_family in place: Holm across the runs)."""
    runs = [v for v in dict.fromkeys(items.loc[items["task"] == task, "variant"]) if v != BASE]
    cells = items.drop_duplicates("variant").set_index("variant")["cell"]
    rows = []
    for run in runs:
        ref, var = _aligned(items, task, run)
        row = quantized_row(ref, var, level, margin)
        row.update(kind="quantized", subject=run, reference=BASE, cell=cells[run], task=task)
        rows.append(row)
    decide_family(rows, level, power, {"min_useful_effect": 0.0, "max_quality_loss": margin})
    for row in rows:
        row["items_needed"] = items_needed(row, margin, len(rows), (1 - level) / 2)
    return rows


def cell_outcome(rows: list[dict]) -> str:
    """A cell's outcome on one task from its runs' decisions."""
    decisions = [r["decision"] for r in rows]
    if any(d == REJECT for d in decisions):
        return LOSES
    if decisions and all(d == ADOPT for d in decisions):
        return HOLDS
    return OPEN


def _points(x: float) -> str:
    return f"{100 * x:+.1f}"


def cell_words(task: str, cell: str, margin: float, rows: list[dict]) -> str:
    """The guard line of one cell on one task (summary.txt's verdict block)."""
    outcome = cell_outcome(rows)
    worst = min(rows, key=lambda r: r["estimate"])
    where = (
        f"{len(rows)} run(s), {worst['n_items']} items; worst run {worst['subject']}: "
        f"{_points(worst['estimate'])} points [{_points(worst['adj_low'])}, "
        f"{_points(worst['adj_high'])}]"
    )
    m = f"{100 * margin:g} points"
    if outcome == HOLDS:
        return f"guards: {task}: {cell} not worse than the base by more than {m} ({where})"
    if outcome == LOSES:
        return f"guards: {task}: {cell} loses more than {m} against the base ({where})"
    return f"guards: {task}: {cell} open at {m} ({where}); {advice(rows, margin)}"


def items_needed(r: dict, margin: float, family: int, alpha_one: float) -> int | None:
    """The guard items that would decide an open run, were its estimate the truth. On 0/1
    scores: the fewest items at which the same exact test (no loss beyond the margin, or a loss
    beyond it, on the estimate's side), with the items lost and gained in today's proportions,
    passes at the family's Bonferroni level (`family` runs). On scores in [0, 1]: where the
    family-adjusted interval, narrowing as 1/sqrt(items), clears -margin. None when decided or
    when no count decides (an estimate on the margin, beyond MAX_ITEMS)."""
    if r["decision"] in (ADOPT, REJECT):
        return None
    n, estimate = r["n_items"], r["estimate"]
    if estimate == -margin:
        return None
    if "_paired" not in r:
        half = (r["adj_high"] - r["adj_low"]) / 2
        needed = math.ceil(n * (half / abs(estimate + margin)) ** 2) if math.isfinite(half) else 0
        return max(needed, n + 1) if needed <= MAX_ITEMS else None
    losses, gains = r["_paired"]
    test = loss_exceeds_p if estimate < -margin else noninferiority_p

    def decides(size: int) -> bool:
        lost, gained = round(losses * size / n), round(gains * size / n)
        return test(lost, gained, size, margin) * family < alpha_one

    low, high = n, n + 1
    while not decides(high):
        if high > MAX_ITEMS:
            return None
        low, high = high, high * 2
    while high - low > 1:  # the fewest that decide (the proportions make it nearly monotone)
        mid = (low + high) // 2
        low, high = (low, mid) if decides(mid) else (mid, high)
    return high


def advice(rows: list[dict], margin: float) -> str:
    """What would decide an open guard: the most items any of its open runs needs."""
    needed = [n for r in rows if (n := r.get("items_needed")) is not None]
    if needed:
        return f"about {max(needed)} guard items would decide, were the estimates the truth"
    return "more guard items would narrow it (no count decides an estimate on the margin)"


def run_record(r: dict, words: str) -> Decision:
    keep = {"kind", "subject", "decision", "reference", "estimate", "ci_low", "ci_high",
            "p_holm", "n_seeds", "adj_low", "adj_high"}  # fmt: skip
    return Decision(
        **{k: r.get(k) for k in keep},
        items_needed=r["items_needed"],
        words=words,
        cell_id=r["cell"],
    )


def decide_guards(items, guards: list[dict], level: float, power: float) -> dict:
    """guards.json: per task its margin and metric, per cell its outcome and words, per run its
    decision record; `lines`, the guard lines in order. guards: [{task, margin}]."""
    tasks, lines = [], []
    for g in guards:
        task, margin = g["task"], g["margin"]
        rows = task_rows(items, task, margin, level, power)
        frame = items[items["task"] == task]
        base = frame[frame["variant"] == BASE]
        cells = []
        for cell in dict.fromkeys(r["cell"] for r in rows):
            mine = [r for r in rows if r["cell"] == cell]
            words = cell_words(task, cell, margin, mine)
            lines.append(words)
            cells.append(
                {
                    "cell": cell,
                    "outcome": cell_outcome(mine),
                    "words": words,
                    "runs": [record_dict(run_record(r, words)) for r in mine],
                }
            )
        tasks.append(
            {
                "task": task,
                "margin": margin,
                "metric": str(base["metric"].iloc[0]) if len(base) else None,
                "n_items": int(len(base)),
                "base_score": float(base["score"].mean()) if len(base) else None,
                "cells": cells,
            }
        )
    return {"guards": tasks, "lines": lines}
