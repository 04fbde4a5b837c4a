"""The table of scored items: one row per variant x split x task x item, each item's score in
[0, 1]. The evaluate stage writes it (results/evaluation/items.parquet) and `campaign compare`
reads it from other harnesses' outputs; both meet at these columns, so every analysis of the
items starts from one table (one writer, one reader: this module).

Columns, in this order and no other:
  variant     str, not null    the scored model: a run, "<run>/<quantized variant>", "floor/<name>"
  cell        str, not null    the ablation cell of the variant's run ("" for a floor)
  seed        int or null      the run's seed (null for a floor or a variant without one)
  split       str, not null    validation, test, ...
  task        str, not null    the benchmark task ("" for a single-task campaign)
  item        str, not null    the item's id in the split file
  score       float in [0, 1]  the item's score (0/1 for a label, the metric's for generated text)
  prediction  str or null      what the variant answered: the generated text, the predicted label
  metric      str, not null    what `score` is: accuracy (per item: right or wrong), token_f1, ...

(variant, split, task, item) is unique. A bad file or frame is one line naming the file, the
row (counted from 0, as pandas counts) and the column.
"""

from __future__ import annotations

import numbers
from pathlib import Path

from campaign.core.errors import CampaignError

COLUMNS = ("variant", "cell", "seed", "split", "task", "item", "score", "prediction", "metric")
ITEM_COLUMNS = COLUMNS  # the name other phases import (campaign.evaluate.ITEM_COLUMNS)
_TEXT = ("variant", "cell", "split", "task", "item", "metric")  # str, never null
KEY = ("variant", "split", "task", "item")


def _schema():
    import pyarrow as pa

    types = {c: pa.string() for c in COLUMNS}
    types |= {"seed": pa.int64(), "score": pa.float64()}
    return pa.schema([pa.field(c, types[c], nullable=c in ("seed", "prediction")) for c in COLUMNS])


def _bad(where: str, row: int, column: str, value, expected: str) -> CampaignError:
    shown = "null" if _is_missing(value) and column != "score" else repr(value)
    return CampaignError(f"{where}: row {row}: column {column}: {shown} is not {expected}")


def _is_missing(value) -> bool:
    """None, NaN or pandas' NA: a null cell."""
    return (
        value is None
        or (isinstance(value, numbers.Real) and value != value)
        or (type(value).__name__ == "NAType")
    )


def _check_row(where: str, i: int, row: dict) -> None:
    for column in _TEXT:
        if not isinstance(row[column], str):
            raise _bad(where, i, column, row[column], "a string")
    if not _seed_ok(row["seed"]):
        raise _bad(where, i, "seed", row["seed"], "a whole number or null")
    score = row["score"]
    if isinstance(score, bool) or not isinstance(score, numbers.Real) or not 0 <= score <= 1:
        raise _bad(where, i, "score", score, "a number in [0, 1]")
    if not _prediction_ok(row["prediction"]):
        raise _bad(where, i, "prediction", row["prediction"], "a string or null")


def _is_str(value) -> bool:
    return isinstance(value, str)


def _seed_ok(value) -> bool:
    if _is_missing(value):
        return True
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and (float(value).is_integer())
    )


def _prediction_ok(value) -> bool:
    return _is_missing(value) or isinstance(value, str)


def _all_text(column, nulls: bool) -> bool:
    """Every value a string (or null, where `nulls`), known from the column's type in C."""
    import pandas as pd

    kind = pd.api.types.infer_dtype(column, skipna=nulls)
    return kind in ("string", "empty") and (nulls or not column.isna().any())


def _bad_rows(frame):
    """(n_rows,) bool: the rows _check_row may refuse, found column by column from the types
    where they tell (a table of many variants and items is checked in a second)."""
    import numpy as np
    import pandas as pd

    bad = np.zeros(len(frame), dtype=bool)
    for column in _TEXT:
        if not _all_text(frame[column], nulls=False):
            bad |= ~frame[column].map(_is_str).to_numpy(dtype=bool)
    score = frame["score"]
    if pd.api.types.is_numeric_dtype(score) and not pd.api.types.is_bool_dtype(score):
        values = score.to_numpy(dtype=np.float64, na_value=np.nan)
        bad |= ~((values >= 0) & (values <= 1))
    else:
        bad[:] = True  # each row's own check names the first bad score
    seed = frame["seed"]
    if pd.api.types.is_float_dtype(seed):
        values = seed.to_numpy(dtype=np.float64, na_value=np.nan)
        bad |= ~(np.isnan(values) | (values == np.floor(values)))
    elif not pd.api.types.is_integer_dtype(seed) or pd.api.types.is_bool_dtype(seed):
        bad |= ~seed.map(_seed_ok).to_numpy(dtype=bool)
    if not _all_text(frame["prediction"], nulls=True):
        bad |= ~frame["prediction"].map(_prediction_ok).to_numpy(dtype=bool)
    return bad


def check(frame, where: str):
    """The frame as the table holds it (columns in order, seed Int64), or one CampaignError
    naming `where`, the row and the column."""
    import pandas as pd

    got = list(frame.columns)
    if got != list(COLUMNS):
        missing = [c for c in COLUMNS if c not in got]
        extra = [c for c in got if c not in COLUMNS]
        what = f"missing {', '.join(missing)}" if missing else f"unexpected {', '.join(extra)}"
        if not missing and not extra:
            what = "columns out of order"
        raise CampaignError(f"{where}: not a scored-items table ({what}; expected {COLUMNS})")
    frame = frame.reset_index(drop=True)
    bad = _bad_rows(frame)
    for i in bad.nonzero()[0]:
        _check_row(where, int(i), frame.iloc[int(i)].to_dict())  # raises, naming the column
    twice = frame.duplicated(list(KEY))
    if twice.any():
        i = int(twice.to_numpy().argmax())
        key = ", ".join(f"{c}={frame[c].iloc[i]!r}" for c in KEY)
        raise CampaignError(f"{where}: row {i}: a second score for {key}")
    out = frame.copy()
    seeds = frame["seed"]
    if not pd.api.types.is_integer_dtype(seeds):
        seeds = [None if _is_missing(s) else int(s) for s in seeds]
    out["seed"] = pd.array(seeds, dtype="Int64")
    out["score"] = frame["score"].astype("float64")
    return out


def write_items(path: Path, frame) -> None:
    """Check `frame` and write it to `path` (Parquet, the schema above; atomic: a reader never
    sees half a table, a bad frame leaves no file)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from campaign.core.fsutil import atomic_write_bytes

    table = pa.Table.from_pandas(check(frame, str(path)), schema=_schema(), preserve_index=False)
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    atomic_write_bytes(path, buffer.getvalue())


def read_items_table(path: Path):
    """The scored-items table at `path`, checked (a pandas DataFrame, COLUMNS in order)."""
    import pyarrow.parquet as pq

    try:
        frame = pq.read_table(path).to_pandas()
    except FileNotFoundError:
        raise CampaignError(f"{path}: file not found") from None
    except Exception as e:  # pyarrow raises several types for a file that is not Parquet
        raise CampaignError(f"{path}: not a readable Parquet table ({type(e).__name__})") from None
    return check(frame, str(path))
