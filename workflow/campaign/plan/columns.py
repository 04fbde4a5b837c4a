"""The plan table's columns (results/plan/runs.tsv) and how it is written and read back.

One row per planned run, in the plan's order: run, one column per factor (its level), seed,
tier, cell_id (the cell's stable id, campaign.core.io.cell_id: the same at every seed, what
evaluate, index and budget join a run's cell on), then what the plan table adds from the
preflight's measurements: projected_hours, cumulative_hours (over the rows so far, cut ones
included: what going further would cost), projected_bytes, and kept (true for the runs
Snakemake trains, false for those cut by ablation.max_runs or ablation.budget_hours).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from campaign.core.io import read_plan

# Columns that are not factor levels.
ID_COLUMNS = ("run", "seed", "tier", "cell_id")
COST_COLUMNS = ("projected_hours", "cumulative_hours", "projected_bytes", "kept")


def table_columns(factors: list[str], extra: list[str] | tuple = ()) -> list[str]:
    """The columns in order: run, the factors' levels, seed, tier, cell_id, the cost columns,
    then any extra ones (the money columns, once there is a price)."""
    return ["run", *factors, "seed", "tier", "cell_id", *COST_COLUMNS, *extra]


def in_order(rows: list[dict], factors: list[str]) -> list[dict]:
    """The rows with their columns in table order (a spec passed as JSON has its keys sorted);
    columns a row lacks are left out (the cost ones, before anything is measured)."""
    out = []
    for row in rows:
        columns = table_columns(factors, [c for c in row if c not in table_columns(factors)])
        out.append({c: row[c] for c in columns if c in row})
    return out


def tsv_text(rows: list[dict]) -> str:
    """The table as TSV: strings as they are, everything else as JSON (true, 0.5, null)."""
    columns = list(rows[0]) if rows else [*ID_COLUMNS, *COST_COLUMNS]
    lines = ["\t".join(columns)]
    lines += [
        "\t".join(r[c] if isinstance(r[c], str) else json.dumps(r[c]) for c in columns)
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def format_table(rows: list[dict]) -> str:
    """A plain fixed-width text table."""
    if not rows:
        return "(no runs)"
    columns = list(rows[0])
    cells = [[_shown(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "kept" if value else "cut"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


_KEPT_CACHE: dict[tuple, list[str]] = {}


def kept_in_table(path: str | Path) -> list[str]:
    """The ids of the kept runs in a plan table, in its order (memoized on the file's identity:
    Snakemake asks once per consumer of the trained runs)."""
    st = Path(path).stat()
    stamp = (str(path), st.st_mtime_ns, st.st_size, st.st_ino)
    if stamp not in _KEPT_CACHE:
        _KEPT_CACHE[stamp] = read_plan(path, ("run", "kept")).kept()
    return _KEPT_CACHE[stamp]
