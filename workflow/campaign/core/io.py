"""One reader per artifact kind, shared by every phase: JSON objects with dotted access, tables
(Parquet, CSV, TSV) with required columns, the plan table (results/plan/runs.tsv) with its cell
ids, and "module:function" references. Each bad file is one CampaignError naming the file and
the key, column or line that was expected.

Named `io` inside the package (campaign.core.io): it reads and resolves, it writes nothing (the
atomic writers are campaign.core.fsutil).
"""

from __future__ import annotations

import csv
import importlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaign.core.errors import CampaignError
from campaign.core.hashing import hash_value

_REQUIRED = object()


# ------------------------------------------------------------------------------------ JSON
def read_json(path: str | Path, required: Iterable[str] = ()) -> dict:
    """The JSON object in `path`; every dotted key in `required` must be there."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CampaignError(f"{path}: file not found") from None
    except json.JSONDecodeError as e:
        raise CampaignError(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from None
    except UnicodeDecodeError:
        raise CampaignError(f"{path}: not valid JSON (not UTF-8 text)") from None
    if not isinstance(data, dict):
        raise CampaignError(f"{path}: expected a JSON object")
    for key in required:
        get(data, key, path)
    return data


def get(data: Any, key: str | tuple[str, ...], path: str | Path | None = None, default=_REQUIRED):
    """data["a"]["b"]["c"] for key "a.b.c" (or the tuple ("a", "b", "c"), for keys that hold a
    dot). Missing: `default` when given, else one error naming the file and the dotted key."""
    keys = tuple(key.split(".")) if isinstance(key, str) else tuple(key)
    node = data
    for i, k in enumerate(keys):
        if not isinstance(node, dict) or k not in node:
            if default is not _REQUIRED:
                return default
            where = f"{path}: " if path is not None else ""
            raise CampaignError(f"{where}expected a key '{'.'.join(keys[: i + 1])}'")
        node = node[k]
    return node


# ------------------------------------------------------------------------------------ text
def read_text(path: str | Path) -> str:
    """The UTF-8 text in `path` (a summary, a report's text form)."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CampaignError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise CampaignError(f"{path}: not UTF-8 text") from None


# ---------------------------------------------------------------------------------- tables
_KINDS = {".csv": "CSV", ".tsv": "TSV"}


def read_table(path: str | Path, required: Iterable[str] = (), columns: list[str] | None = None):
    """A pandas DataFrame from Parquet (any suffix but .csv/.tsv), CSV or TSV, with at least the
    `required` columns (`columns`: read only these, Parquet only)."""
    import pandas as pd

    path = Path(path)
    kind = _KINDS.get(path.suffix, "Parquet")
    try:
        if kind == "Parquet":
            frame = pd.read_parquet(path, columns=columns)
        else:
            frame = pd.read_csv(path, sep="\t" if kind == "TSV" else ",")
    except FileNotFoundError:
        raise CampaignError(f"{path}: file not found") from None
    except Exception as e:  # pyarrow and the csv parser raise many kinds
        raise CampaignError(f"{path}: not a readable {kind} table ({type(e).__name__})") from None
    for column in required:
        if column not in frame.columns:
            raise CampaignError(f"{path}: expected a column '{column}'")
    return frame


def number_or_none(value: Any) -> float | None:
    """A table cell as a float for a typed column: None for a missing, NaN or non-numeric one."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if x == x else None  # NaN -> null


# ------------------------------------------------------------------------------ plan table
PLAN_REQUIRED = ("run", "seed", "tier")
CELL_ID_PREFIX = "cell-"
CELL_ID_HEX = 10


def level_text(value: Any) -> str:
    """A factor level as the plan table writes it: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def cell_id(levels: Mapping[str, Any]) -> str:
    """The stable id of a design cell: a short hash of its {factor: level} (levels as the plan
    table writes them). The same cell has the same id at every seed and in every design with
    the same factors; it is not part of any run id."""
    text = {k: level_text(v) for k, v in levels.items()}
    return CELL_ID_PREFIX + hash_value({"cell": text})[:CELL_ID_HEX]


@dataclass(frozen=True)
class PlanTable:
    """The plan table as written: columns in order, the factors (the columns between `run` and
    `seed`), and one row per run in plan order, every value the text the table holds, each
    row's `cell_id` (from its column, or computed from the levels for a table written before
    the column existed) and `seed` parsed to an int."""

    path: Path
    columns: tuple[str, ...]
    factors: tuple[str, ...]
    rows: tuple[dict, ...]

    def by_run(self) -> dict[str, dict]:
        return {r["run"]: r for r in self.rows}

    def kept(self) -> list[str]:
        """The kept runs' ids in plan order (all of them in a table without a `kept` column)."""
        return [r["run"] for r in self.rows if r.get("kept", "true") == "true"]

    def levels(self, row: dict) -> dict[str, str]:
        return {f: row[f] for f in self.factors}

    def number(self, i: int, column: str) -> float:
        """Row i's value in a numeric column, or one error naming the file, line and column."""
        value = self.rows[i][column]
        try:
            return float(value)
        except ValueError:
            raise CampaignError(
                f"{self.path} line {i + 2}: {column} is not a number: {value!r}"
            ) from None


def read_plan(path: str | Path, required: Iterable[str] = PLAN_REQUIRED) -> PlanTable:
    """The plan table (results/plan/runs.tsv, written by campaign.plan.columns.tsv_text: tab
    separated, nothing quoted), with at least the `required` columns."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8", newline="") as f:
            lines = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    except FileNotFoundError:
        raise CampaignError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise CampaignError(f"{path}: not a readable plan table ({type(e).__name__})") from None
    if not lines:
        raise CampaignError(f"{path}: not a readable plan table (empty file)")
    columns = tuple(lines[0])
    for needed in ("run", "seed", *required):
        if needed not in columns:
            raise CampaignError(f"{path}: expected a column '{needed}'")
    factors = columns[columns.index("run") + 1 : columns.index("seed")]
    rows = []
    for n, values in enumerate(lines[1:], start=2):
        if len(values) != len(columns):
            raise CampaignError(
                f"{path}: not a readable plan table (line {n}: {len(values)} fields, "
                f"the header has {len(columns)})"
            )
        row: dict = dict(zip(columns, values, strict=True))
        try:
            row["seed"] = int(row["seed"])
        except ValueError:
            raise CampaignError(f"{path} line {n}: seed is not a whole number") from None
        row.setdefault("cell_id", cell_id({f: row[f] for f in factors}))
        rows.append(row)
    return PlanTable(path, columns, factors, tuple(rows))


# ------------------------------------------------------------------------------ references
def module_of(ref: str) -> str:
    """The module part of a "module:function" reference."""
    return ref.partition(":")[0]


def resolve(ref: str) -> Callable:
    """The object a "module:function" reference names (a stage entry, a derive or view
    function), or one error naming the reference."""
    module_name, colon, name = ref.partition(":")
    if not colon or not module_name or not name:
        raise CampaignError(f"{ref!r}: expected a reference 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise CampaignError(f"{ref!r}: no module {e.name!r}") from None
    try:
        return getattr(module, name)
    except AttributeError:
        raise CampaignError(f"{ref!r}: module {module_name} has no {name!r}") from None
