"""What deciding each open question would cost: the evaluation says how many seeds per cell (or
evaluation items) would decide an undecided effect (decisions.json: seeds_needed, items_needed,
dominant); the budget prices the seeds as runs at the calibrated forecast, on the reference
offer. Items are not priced: labelling them is outside the campaign's compute, and scoring them
costs a pass over them."""

from __future__ import annotations

import math
import statistics

from campaign.evaluate import NOT_SHOWN, floor_question

OPEN = (
    "inconclusive",
    "adopt (smaller than useful)",
    "inconclusive (one seed)",
    NOT_SHOWN,
)


def price_to_decide(
    decisions: dict, forecast: list[dict], cells: dict[str, str], price: float, b: dict
) -> list[dict]:
    """One row per open main effect on the decision split, and first one for a best cell not
    shown above the floor (the verdict keeps the floor until it is: more seeds of that one cell).

    forecast: the budget's forecast rows (forecast_hours per planned run, kept flag); cells:
    {run id: cell id} of the planned runs (the plan table's cell_id); price: the reference
    offer's price per card-hour.
    A seed more per cell is one run per cell of the kept plan, each at the median calibrated
    card-hours of the kept runs (forecast hours x cards), plus `b["margin"]`; cost_low/cost_high
    price the seeds needed at the ends of the seed variance's interval (seeds_needed_low/high).
    With one seed, the price of a second one (it measures the seed spread; whether it decides
    is not known yet).
    """
    kept = [r for r in forecast if r["kept"]]
    hours = [
        r["forecast_hours"] * r.get("cards", 1) for r in kept if math.isfinite(r["forecast_hours"])
    ]
    per_run = statistics.median(hours) * (1 + b["margin"]) if hours else math.nan
    n_main_cells = len({cells[r["run"]] for r in kept if r["run"] in cells})
    rows = []
    asked = [d for d in decisions.get("decisions", []) if d.get("kind") == "main"]
    floor = floor_question(decisions)  # the best cell against the floor: its seeds only
    for d in ([floor] if floor is not None else []) + asked:
        if d.get("decision") not in OPEN or d.get("stopped_by_look"):
            continue  # decided, or an adaptive look stopped a cell of it: no seeds to price
        n_cells = 1 if d["kind"] == "floor" else n_main_cells
        n_seeds, need = int(d.get("n_seeds") or 0), d.get("seeds_needed")
        if n_seeds < 2:
            need = 2  # a second seed measures the seed spread; what would decide is unknown
        extra = max(int(need) - n_seeds, 0) * n_cells if need else None
        extra_hours = extra * per_run if extra is not None else math.nan
        # The seeds needed at the ends of the seed variance's interval (its uncertainty).
        ends = [d.get("seeds_needed_low"), d.get("seeds_needed_high")] if n_seeds >= 2 else []
        costs = [
            max(int(k) - n_seeds, 0) * n_cells * per_run * price if k else math.nan for k in ends
        ] or [math.nan, math.nan]
        rows.append(
            {
                "subject": d["subject"],
                "decision": d["decision"],
                "dominant": d.get("dominant"),
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
                "items_needed": d.get("items_needed"),
            }
        )
    return rows
