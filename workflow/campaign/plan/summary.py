"""The plan in words: the design as written, the ordered table with each run's projected hours,
the cut, and what the plan can estimate as written and after the cut, with what the cut costs.
The plan table writes it to results/plan/report.txt; `campaign plan` prints it
(campaign.plan.planner.plan_report)."""

from __future__ import annotations

from typing import Any

from campaign.core.defaults import train_key
from campaign.plan.columns import format_table
from campaign.plan.estimability import analyse, cut_costs, sentence
from campaign.plan.guard_jobs import guard_lines
from campaign.plan.words import plural, short_names


def plan_cells(rows: list[dict], keys: list[str], kept_only: bool) -> list[tuple[tuple, int]]:
    """(levels in keys order, seeds) per distinct cell of the rows, in their order."""
    seeds: dict[tuple, int] = {}
    for row in rows:
        levels = tuple(row[k] for k in keys)
        if levels not in seeds:
            seeds[levels] = 0
        if row.get("kept", True) or not kept_only:
            seeds[levels] += 1
    return [(levels, n) for levels, n in seeds.items() if n]


def _display(rows: list[dict]) -> list[dict]:
    out = []
    for row in rows:
        shown: dict[str, Any] = {}
        for key, value in row.items():
            if key in ("projected_hours", "cumulative_hours"):
                value = f"{value:.4g}"
            elif key == "projected_bytes":
                value = f"{value / 2**20:.1f} MiB"
            shown[key] = value
        out.append(shown)
    return out


def report_lines(
    spec: dict, rows: list[dict], note: str = "", guards: list[dict] = ()
) -> list[str]:
    """The report of a plan table (spec: campaign.plan.planner.table_spec; rows: the projected
    rows, or the spec's own rows when nothing is measured yet; guards: the guard jobs' rows,
    campaign.plan.guard_jobs.plan_guards)."""
    adaptive = [r for r in rows if r.get("tier") == "adaptive"]
    rows = [r for r in rows if r.get("tier") != "adaptive"]
    design = spec["design"]
    keys, control = design["factors"], tuple(design["control"])
    names = short_names(keys)
    planned = plan_cells(rows, keys, kept_only=False)
    control_text = ", ".join(f"{names[k]} {_level(v)}" for k, v in zip(keys, control, strict=True))
    lines = [
        f"design {design['name']}: {plural(len(planned), 'cell')} × "
        f"{plural(len(design['seeds']), 'seed')} = {plural(len(rows), 'run')}; the control "
        f"({control_text or 'the baseline recipe'}) is shared by every contrast",
        *design["lines"],
        "order: the control, then the cells that complete main-effect contrasts, then "
        "interactions, then higher orders, then extra seeds; cheaper first within a tier",
        "",
        format_table(_display(rows)),
        "",
    ]
    kept = [r for r in rows if r.get("kept", True)]
    by_max_runs = [r for i, r in enumerate(rows) if i >= spec["max_runs"]]
    by_budget = [r for i, r in enumerate(rows) if i < spec["max_runs"] and not r["kept"]]
    line = f"kept {len(kept)} of {plural(len(rows), 'run')}"
    if "projected_hours" in (rows[0] if rows else {}):
        hours = sum(r["projected_hours"] for r in kept)
        line += f", projected at {hours:.4g} h on the preflight's device"
        cards = {r: train_key(recipe, "devices") for r, recipe in spec.get("recipes", {}).items()}
        if any(cards.get(r["run"], 1) > 1 for r in kept):
            held = sum(r["projected_hours"] * cards.get(r["run"], 1) for r in kept)
            line += f" ({held:.4g} card-hours: a run with train.devices N holds N cards)"
    cuts = []
    if by_max_runs:
        cuts.append(f"{len(by_max_runs)} by max_runs ({spec['max_runs']})")
    if by_budget:
        cuts.append(f"{len(by_budget)} by budget_hours ({spec['budget_hours']:g} h)")
    lines.append(line + (f"; cut {', '.join(cuts)}" if cuts else ""))
    if adaptive:
        seeds = sorted({r["seed"] for r in adaptive})
        line = (
            f"adaptive: a look may append {plural(len(adaptive), 'run')} (seeds {seeds[0]}"
            f"-{seeds[-1]} of any cell), where a question stays open and the caps allow"
        )
        if "projected_hours" in adaptive[0]:
            line += f"; {sum(r['projected_hours'] for r in adaptive):.4g} h if all were"
        lines.append(line)
    lines += guard_lines(list(guards))
    if note:
        lines.append(note)

    levels = [[] for _ in keys]
    for cell, _ in planned:
        for i, level in enumerate(cell):
            if level not in levels[i]:
                levels[i].append(level)
    as_written = analyse(planned, keys, control, levels)
    lines += ["", "what the plan can estimate, as written:"]
    lines += [f"  {sentence(v, names)}" for v in as_written]
    if len(kept) < len(rows):
        after = analyse(plan_cells(rows, keys, kept_only=True), keys, control, levels)
        costs = cut_costs(as_written, after, names)
        lines += ["", "what the cut costs:"]
        lines += [f"  {c}" for c in costs] or ["  nothing: every effect keeps its verdict"]
    return lines


def _level(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
