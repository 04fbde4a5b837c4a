"""What the rest of the plan costs, for `campaign status`: the kept runs not finished, at their
projected hours (corrected by the budget's calibration once it has one, a running run at its
own ETA), and the money at the reference offer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from campaign.core.errors import CampaignError
from campaign.core.io import read_plan


def read_plan_table(path: Path, runs: Sequence[str] | None = None) -> list[dict]:
    """The campaign's runs in runs.tsv: run id and projected hours (None when not measured).
    The plan's kept runs, or `runs` in their order (an adaptive campaign's: the latest look's,
    campaign.plan.look_runs)."""
    out = []
    rows = read_plan(path, ("run", "projected_hours")).rows
    if runs is not None:
        by_run = {row["run"]: row for row in rows}
        rows = tuple(by_run[r] for r in runs if r in by_run)
    for row in rows:
        if runs is None and str(row.get("kept", "true")).lower() != "true":
            continue
        try:
            hours = float(row["projected_hours"])
        except (TypeError, ValueError):
            hours = None
        out.append({"run": row["run"], "projected_hours": hours})
    return out


def read_calibration(path: Path) -> tuple[float, float] | None:
    """(step factor, overhead hours per job) from the budget's forecast table, when it exists."""
    if not path.exists():
        return None
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path, columns=["step_factor", "overhead_hours"]).to_pylist()
    except Exception as e:  # a forecast of another layout: no correction, say why
        raise CampaignError(f"{path}: cannot read step_factor/overhead_hours ({e})") from None
    for row in table:
        factor, overhead = row["step_factor"], row["overhead_hours"]
        if factor is not None and overhead is not None and factor == factor:
            return float(factor), float(overhead)
    return None


def remaining_hours(
    plan: list[dict],
    finished: set[str],
    calibration: tuple[float, float] | None,
    running_eta_s: Mapping[str, float | None] | None = None,
    cards: Mapping[str, int] | None = None,
) -> tuple[float | None, int]:
    """(hours left, runs left) for the plan's runs not finished: each run's projected hours,
    corrected (projected x step factor + overhead) when the budget has calibrated; a running
    run's own ETA where its progress file has one. None hours when a run has no projection.
    cards: {run: train.devices}: then card-hours, each run's hours x its cards (1 if absent)."""
    running_eta_s = running_eta_s or {}
    cards = cards or {}
    left = [r for r in plan if r["run"] not in finished]
    total = 0.0
    for r in left:
        if running_eta_s.get(r["run"]) is not None:
            hours = running_eta_s[r["run"]] / 3600
        elif r["projected_hours"] is None:
            return None, len(left)
        elif calibration is None:
            hours = r["projected_hours"]
        else:
            hours = r["projected_hours"] * calibration[0] + calibration[1]
        total += hours * cards.get(r["run"], 1)
    return total, len(left)


def remaining_line(
    plan: list[dict],
    finished: set[str],
    calibration: tuple[float, float] | None,
    budget: Mapping[str, Any],
    running_eta_s: Mapping[str, float | None] | None = None,
    cards: Mapping[str, int] | None = None,
) -> str:
    """`remaining: 2 of 4 planned runs, 12.5 min (calibrated ...), 0.01 EUR on workstation ...`;
    the money counts each run's cards ({run: train.devices}, 1 if absent)."""
    from campaign.budget import format_money
    from campaign.core.progress import format_seconds

    hours, n_left = remaining_hours(plan, finished, calibration, running_eta_s)
    if n_left == 0:
        return f"remaining: nothing: all {len(plan)} planned runs have finished"
    how = (
        f"calibrated: projected x{calibration[0]:.3g} + {calibration[1] * 3600:.3g} s a job"
        if calibration is not None
        else "as projected; not yet calibrated by the budget"
    )
    head = f"remaining: {n_left} of {len(plan)} planned runs"
    if hours is None:
        return f"{head}, hours unknown (the preflight has not measured throughput)"
    name = budget.get("reference_offer")
    offer = next((o for o in budget.get("offers", []) if o.get("name") == name), None)
    held, _ = remaining_hours(plan, finished, calibration, running_eta_s, cards)
    several = f", {held:.3g} card-hours" if held != hours else ""
    money = (
        f", {format_money(held * float(offer['hourly']), budget.get('currency', ''))} on "
        f"{name} ({offer['hourly']} {budget.get('currency', '')}/h{several})"
        if offer is not None
        else ""
    )
    return f"{head}, {format_seconds(hours * 3600)} ({how}){money}"
