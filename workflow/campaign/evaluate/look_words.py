"""The adaptive campaign's looks in words: what each look found open, what it added or stopped
and why, and the seeds and hours spent against the fixed design. Read by `campaign status`, the
evaluation's summary and the report; the records are campaign.evaluate.looks' look_<j>.json."""

from __future__ import annotations

from pathlib import Path

LOOKS_TITLE = "Adaptive looks"


def read_looks(folder: Path) -> list[dict]:
    """The look records in `folder` (results/adaptive), in look order (campaign.plan's
    look_files: the one list of them); [] when there are none. A record that is not JSON is
    one error naming the file."""
    from campaign.core.io import read_json
    from campaign.plan import look_files

    return [read_json(p) for p in look_files(folder)]


def _interval(row: dict) -> str:
    low, high = row.get("rci_low"), row.get("rci_high")
    if low is None or high is None:
        return ""
    return f" [{low * 100:+.1f}, {high * 100:+.1f}] points"


def look_lines(looks: list[dict]) -> list[str]:
    """One block per look, then the total against the fixed design; [] without looks."""
    if not looks:
        return []
    lines = []
    before: dict = {}
    for rec in looks:
        seeds = sorted(set(rec["history"][-1].values()))
        spread = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
        lines.append(
            f"look {rec['look']} of {rec['max_looks']}: {rec['spent']['runs']} runs "
            f"({spread} seeds per cell), {rec['spent']['hours']:.3g} h projected"
        )
        for row in rec["rows"]:
            what = f"{row['decision']}{_interval(row)}"
            lines.append(f"  {row['name']}: {what}; {row['status']} ({row['reason']})")
        for cell, why in sorted(rec["stopped"].items()):
            if cell not in before:  # a record lists the earlier looks' stops too
                lines.append(f"  stopped {cell}: {why}")
        before = rec["stopped"]
        if rec["appended"]:
            lines.append(
                f"  added {len(rec['appended'])} runs ({rec['add_hours']:.3g} h projected)"
            )
        for name, hours in sorted(rec["open_cost_hours"].items()):
            lines.append(f"  left open: {name} ({hours:.3g} h more would not fit the caps)")
    last = looks[-1]
    fixed = last["fixed"]
    lines.append(
        f"in all: {last['spent']['runs']} runs, {last['spent']['hours']:.3g} h projected, "
        f"against {fixed['runs']} runs, {fixed['hours']:.3g} h for every cell at the most seeds"
    )
    return lines


def look_summary(looks: list[dict]) -> dict | None:
    """The looks in the verdict block's numbers (decisions.json `adaptive`), None without looks:
    looks (taken), max_looks, seeds_added (runs appended over all looks: one seed of one cell
    each), cells_stopped (the cells any look stopped, sorted), runs (what the campaign has after
    the last look), fixed_runs (the fixed design: every cell at max_seeds)."""
    if not looks:
        return None
    last = looks[-1]
    stopped = sorted({cell for rec in looks for cell in rec["stopped"]})
    return {
        "looks": len(looks),
        "max_looks": last["max_looks"],
        "seeds_added": sum(len(rec["appended"]) for rec in looks),
        "cells_stopped": stopped,
        "runs": len(last["runs"]),
        "fixed_runs": last["fixed"]["runs"],
    }


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def verdict_look_lines(summary: dict | None) -> list[str]:
    """The verdict block's two lines on the looks (look_summary), [] for a fixed campaign: what
    the looks took, added, stopped and spent against the fixed design, and which intervals the
    decisions after them rest on (campaign.evaluate.looks.apply_last_look)."""
    if not summary:
        return []
    s = summary
    return [
        f"Looks: {s['looks']} of {s['max_looks']} taken; {_count(s['seeds_added'], 'seed')} "
        f"added, {_count(len(s['cells_stopped']), 'cell')} stopped; {s['runs']} runs against "
        f"the fixed design's {s['fixed_runs']} (every cell at the most seeds)",
        "After the looks: effects, interactions and cells against the control decided on "
        "repeated confidence intervals (O'Brien-Fleming), a cell against the floor tested "
        f"Bonferroni over the {s['max_looks']} planned looks",
    ]
