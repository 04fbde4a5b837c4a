"""The part of the plan table (results/plan/runs.tsv) the evaluation reads: each run's cell,
seed, tier and cell id. The table's cost columns (projected hours and bytes, kept, prices) come
from the preflight's timings, which differ between two identical campaigns; the evaluate stage's
content key hashes this view of the table (Stage.input_views), and the stage reads nothing else
of it.
"""

from __future__ import annotations

from pathlib import Path

from campaign.core.io import read_plan as plan_table


def design_view(path: Path) -> dict:
    """{factors: [key, ...], rows: [[run, level, ..., seed, tier, cell_id], ...]} in the
    table's order: the columns from `run` to `seed` (the factors lie between them), `tier` and
    `cell_id` (computed from the levels for a table written before that column)."""
    table = plan_table(path, ("run", "seed"))
    rows = [
        [r["run"], *(r[k] for k in table.factors), r["seed"], r.get("tier"), r["cell_id"]]
        for r in table.rows
    ]
    return {"factors": list(table.factors), "rows": rows}


def read_plan(
    path: Path,
) -> tuple[list[str], dict[str, tuple], dict[str, int], tuple | None, dict[tuple, str]]:
    """(factors, run -> cell, run -> seed, the control cell: the `control` tier's, else the
    first row's, cell -> cell id) from the plan table's design view."""
    view = design_view(path)
    factors, rows = view["factors"], view["rows"]
    n = len(factors)
    cells = {r[0]: tuple(r[1 : 1 + n]) for r in rows}
    seeds = {r[0]: r[1 + n] for r in rows}
    ids = {cells[r[0]]: r[3 + n] for r in rows}
    control = next((cells[r[0]] for r in rows if r[2 + n] == "control"), None)
    if control is None and rows:
        control = cells[rows[0][0]]
    return factors, cells, seeds, control, ids
