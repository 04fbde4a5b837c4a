"""What deciding each open question would cost: the evaluation says how many seeds per cell (or
evaluation items) would decide an undecided effect (the verdict's open questions, records of
campaign.evaluate.records); the budget prices the seeds as runs at the calibrated forecast, on
the reference offer. Items are not priced: labelling them is outside the campaign's compute,
and scoring them costs a pass over them."""

from __future__ import annotations

import math
import statistics
from collections import Counter

from campaign.evaluate import Decisions


def price_to_decide(
    decisions: Decisions, forecast: list[dict], cells: dict[str, str], price: float, b: dict
) -> list[dict]:
    """One row per open main effect on the decision split, and first one for a best cell not
    shown above the floor (the verdict keeps the floor until it is: more seeds of that one cell).

    forecast: the budget's forecast rows (forecast_hours per planned run, kept flag); cells:
    {run id: cell id} of the planned runs (the plan table's cell_id); price: the reference
    offer's price per card-hour.
    The runs a question needs are each of its cells' own: from the cell's seeds now (its runs in
    the kept plan; an adaptive campaign's looks leave cells with uneven seeds) up to
    seeds_needed, summed over the cells of the kept plan (a main effect) or the best cell alone
    (the floor question); each run at the median calibrated card-hours of the kept runs
    (forecast hours x cards), plus `b["margin"]`. cost_low/cost_high price the seeds needed at
    the ends of the seed variance's interval (seeds_needed_low/high). With one seed, the price
    of a second one (it measures the seed spread; whether it decides is not known yet).
    """
    kept = [r for r in forecast if r["kept"]]
    hours = [
        r["forecast_hours"] * r.get("cards", 1) for r in kept if math.isfinite(r["forecast_hours"])
    ]
    per_run = statistics.median(hours) * (1 + b["margin"]) if hours else math.nan
    per_cell = Counter(cells[r["run"]] for r in kept if r["run"] in cells)  # {cell: seeds now}
    rows = []
    for d in decisions.open_questions:  # the kept cell against the floor first: its seeds only
        if d.kind not in ("floor", "main") or d.stopped:
            continue  # a quantized variant's seeds do not apply; a look stopped a cell of it
        n_seeds, need = int(d.n_seeds or 0), d.seeds_needed
        seeds = (
            _best_cell_seeds(decisions, per_cell, n_seeds)
            if d.kind == "floor"
            else list(per_cell.values())
        )
        if n_seeds < 2:
            need = 2  # a second seed measures the seed spread; what would decide is unknown
        extra = _runs_to(int(need), seeds) if need else None
        extra_hours = extra * per_run if extra is not None else math.nan
        # The seeds needed at the ends of the seed variance's interval (its uncertainty).
        ends = [d.seeds_needed_low, d.seeds_needed_high] if n_seeds >= 2 else []
        costs = [_runs_to(int(k), seeds) * per_run * price if k else math.nan for k in ends]
        costs = costs or [math.nan, math.nan]
        n_cells = len(seeds)
        rows.append(
            {
                "subject": d.subject,
                "decision": d.decision,
                "dominant": d.dominant,
                "n_seeds": n_seeds,
                "seeds_needed": need,
                "cells": n_cells,
                "extra_runs": extra,
                "hours_per_run": per_run,
                "extra_hours": extra_hours,
                "cost": extra_hours * price,
                "seeds_needed_low": ends[0] if ends else None,
                "seeds_needed_high": ends[1] if ends else None,
                "cost_low": costs[0],
                "cost_high": costs[1],
                "currency": b["currency"],
                "items_needed": d.items_needed,
                "items_note": d.items_note,
                "seeds_note": d.seeds_note,
            }
        )
    return rows


def _runs_to(seeds_needed: int, seeds: list[int]) -> int:
    """The runs that bring each cell from its seeds now (`seeds`: one count a cell) up to
    seeds_needed: a cell already there needs none."""
    return sum(max(seeds_needed - n, 0) for n in seeds)


def _best_cell_seeds(decisions: Decisions, per_cell: Counter, n_seeds: int) -> list[int]:
    """[the kept cell's seeds now]: its runs in the kept plan (by cell id), else the runs the
    evaluation names for it, else the floor row's n_seeds."""
    best = decisions.best_cell
    if best is not None and best.cell_id in per_cell:
        return [per_cell[best.cell_id]]
    return [len(best.runs) if best is not None and best.runs else n_seeds]
