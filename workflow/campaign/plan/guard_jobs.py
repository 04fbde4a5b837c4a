"""The guard benchmarks' jobs in the plan (evaluation.guards): one per planned run and guard
task, and one per task for the base model (the guards phase's jobs), listed under the runs with
the forecast the budget gives them.

A guard job loads a model and scores the guard's items, as a run's own wrap-up does, so the
budget prices each at one job's overhead: the median over jobs of wall hours less step hours
(campaign.budget.stage.guard_jobs, from the finished jobs). Before anything ran the plan has the
same quantity projected: the median over the kept runs of a run's projected hours less its
training steps' (its validation passes, predictions and checkpoint writes, at the preflight's
measured rates). The guard jobs are not in results/plan/runs.tsv (a row there is a run to
train) and not in the budget_hours cut (it cuts runs); their hours are said beside the kept
runs'.
"""

from __future__ import annotations

import statistics

from campaign.plan.columns import format_table
from campaign.plan.projection import HOUR_S, run_costs
from campaign.plan.words import plural

GUARD = "guard"  # the tier of a guard job's row (the budget's plans name it the same)
BASE = "base"  # the run of the base model's guard jobs


def guard_tasks(params: dict) -> list[str]:
    """The guard task names of evaluation.guards, in order ([] without guards)."""
    return [g["task"] for g in params["evaluation"].get("guards") or []]


def guard_rows(spec: dict, rows: list[dict], costs: list[dict] | None = None) -> list[dict]:
    """One row per guard job: the base model's per task, then each planned run's (adaptive ones
    left out: a look appends them), kept with its run. spec: the plan table's (its "guards"
    key; none: no rows); rows: the table's rows (projected or not); costs: run_costs of the
    spec's rows, or None before the preflight measured (the rows then carry no hours)."""
    tasks = spec.get("guards") or []
    planned = [r for r in rows if r.get("tier") != "adaptive"]
    if not tasks or not planned:
        return []
    hours = None
    if costs is not None:
        by_run = {r["run"]: c for r, c in zip(spec["rows"], costs, strict=True)}
        kept = [by_run[r["run"]] for r in planned if r.get("kept", True)] or list(by_run.values())
        hours = statistics.median(c["seconds"] - c["parts"]["train"] for c in kept) / HOUR_S
    jobs = [(BASE, True)] + [(r["run"], bool(r.get("kept", True))) for r in planned]
    out = []
    for run, kept in jobs:
        for task in tasks:
            row = {"run": run, "guard": task, "tier": GUARD}
            row |= {"projected_hours": round(hours, 6)} if hours is not None else {}
            out.append(row | {"kept": kept})
    return out


def guard_lines(rows: list[dict]) -> list[str]:
    """The guard jobs under the plan table: one row per guard task (its kept jobs, and their
    projected hours once measured) and a line of the totals; [] without guards."""
    if not rows:
        return []
    kept = [r for r in rows if r["kept"]]
    tasks = list(dict.fromkeys(r["guard"] for r in rows))
    measured = "projected_hours" in rows[0]
    table = []
    for task in tasks:
        jobs = [r for r in kept if r["guard"] == task]
        row = {"guard": task, "tier": GUARD, "jobs": len(jobs)}
        if measured:
            hours = [r["projected_hours"] for r in jobs]
            row |= {"hours_each": f"{hours[0]:.4g}", "hours": f"{sum(hours):.4g}"}
        table.append(row)
    runs = len({r["run"] for r in kept}) - 1
    line = (
        f"guard jobs (evaluation.guards): {len(kept)} = {plural(len(tasks), 'task')} × "
        f"({plural(runs, 'kept run')} + the base model)"
    )
    if measured:
        line += (
            f", projected at {sum(r['projected_hours'] for r in kept):.4g} h beside the kept "
            "runs' (each a run's projected hours less its steps': loading a model and scoring "
            "items, as the budget prices it; not in the budget_hours cut)"
        )
    return ["", format_table(table), line]


def plan_guards(spec: dict, rows: list[dict], report=None, measurements=None) -> list[dict]:
    """guard_rows of a plan, projected when the preflight's report and measurements are given."""
    if not spec.get("guards"):
        return []
    costs = run_costs(spec, report, measurements) if report and measurements else None
    return guard_rows(spec, rows, costs)
