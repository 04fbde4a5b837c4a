"""The part of the plan table (results/plan/runs.tsv) the evaluation reads: each run's cell,
seed and tier. The table's cost columns (projected hours and bytes, kept, prices) come from the
preflight's timings, which differ between two identical campaigns; the evaluate stage's content
key hashes this view of the table (Stage.input_views), and the stage reads nothing else of it.
"""

from __future__ import annotations

import csv
from pathlib import Path

from campaign.core.errors import CampaignError


def design_view(path: Path) -> dict:
    """{factors: [key, ...], rows: [[run, level, ..., seed, tier], ...]} in the table's order:
    the columns from `run` to `seed` (the factors lie between them), and `tier`."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        columns = reader.fieldnames or []
        if "run" not in columns or "seed" not in columns:
            raise CampaignError(f"{path}: expected columns 'run' and 'seed'")
        factors = columns[columns.index("run") + 1 : columns.index("seed")]
        rows = [[r["run"], *(r[k] for k in factors), r["seed"], r.get("tier")] for r in reader]
    return {"factors": factors, "rows": rows}


def read_plan(path: Path) -> tuple[list[str], dict[str, tuple], dict[str, int], tuple | None]:
    """(factors, run -> cell, run -> seed, the control cell: the `control` tier's, else the
    first row's) from the plan table's design view."""
    view = design_view(path)
    factors, rows = view["factors"], view["rows"]
    n = len(factors)
    cells = {r[0]: tuple(r[1 : 1 + n]) for r in rows}
    try:
        seeds = {r[0]: int(r[1 + n]) for r in rows}
    except ValueError as e:
        raise CampaignError(f"{path}: a seed is not an integer ({e})") from None
    control = next((cells[r[0]] for r in rows if r[2 + n] == "control"), None)
    if control is None and rows:
        control = cells[rows[0][0]]
    return factors, cells, seeds, control
