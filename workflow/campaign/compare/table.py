"""The scored-items table `campaign compare` decides on, and its checks.

One row per (run, task, item): `variant` the run's name, `cell` the model (several runs of one
cell: seeds, or fine-tunes of one recipe), `seed` (int or null), `split`, `task`, `item` (the
item's id), `score` in [0, 1], `prediction` (text or null), `metric` (what the score is). The
evaluate stage writes the same columns (results/evaluation/items.parquet); every importer
(lm-evaluation-harness, Inspect, a plain table) produces this table and decides nothing.
`source` (the file a row was read from) is kept beside them so a refusal names the file.

Every check here ends in one line naming the file (and the item), never a silent drop.
"""

from __future__ import annotations

from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.evaluate import ITEM_COLUMNS as COLUMNS  # the shared scored-items table

VARIANT, CELL, SEED, SPLIT, TASK, ITEM, SCORE, PREDICTION, METRIC = COLUMNS
SOURCE = "source"  # the file each row came from (not one of the shared columns)

# A plain table's columns (CSV, Parquet, JSON Lines): these are required ...
PLAIN_REQUIRED = ("model", "task", "item", "score")
# ... and these optional (seed: runs of one model; split, metric, prediction: as above).
PLAIN_OPTIONAL = ("seed", "split", "metric", "prediction")


def run_name(cell: str, seed) -> str:
    """A run's name: the model, and its seed where it has one."""
    import pandas as pd

    return cell if seed is None or pd.isna(seed) else f"{cell}@{int(seed)}"


def numbered_runs(frames: list, key):
    """One table of the frames, each one run's rows (a tool's log or output folder), the runs of
    one `key(frame)` (a model, or a model and task) numbered in the order given: seed 0, 1, ...,
    and no seed (NA) where the key has one run, whose seed spread cannot be measured; `variant`
    each run's name (run_name)."""
    import pandas as pd

    keys = [key(f) for f in frames]
    runs = {k: keys.count(k) for k in keys}
    seen: dict = {}
    for frame, k in zip(frames, keys, strict=True):
        seed = seen.setdefault(k, [0])[0]
        seen[k][0] += 1
        frame[SEED] = pd.array([seed if runs[k] > 1 else pd.NA] * len(frame), dtype="Int64")
    table = pd.concat(frames, ignore_index=True)
    table[VARIANT] = [run_name(c, s) for c, s in zip(table[CELL], table[SEED], strict=True)]
    return table


def read_plain(path: Path, name: str | None = None):
    """A plain per-item table (columns model, task, item, score in [0, 1]; optional seed,
    split, metric, prediction) as the scored-items table. `name`: the model of every row
    (the table then needs no model column)."""
    import pandas as pd

    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            frame = pd.read_parquet(path)
        elif suffix == ".csv":
            frame = pd.read_csv(path, dtype={"item": str, "model": str, "task": str})
        elif suffix in (".jsonl", ".json"):
            frame = pd.read_json(path, lines=True, dtype={"item": str, "model": str})
        else:
            raise CampaignError(f"{path}: not a table (.csv, .parquet or .jsonl)")
    except (OSError, ValueError) as e:
        raise CampaignError(f"{path}: not a readable table ({' '.join(str(e).split())})") from None
    if name is not None:
        frame["model"] = name
    elif "model" not in frame.columns and CELL in frame.columns:
        frame["model"] = frame[CELL]  # the evaluate stage's scored items (its cells are models)
    missing = [c for c in PLAIN_REQUIRED if c not in frame.columns]
    if missing:
        raise CampaignError(
            f"{path}: missing column(s) {', '.join(missing)} (a per-item table: model, task, "
            "item, score in [0, 1]; optional seed, split, metric, prediction)"
        )
    seed = frame["seed"] if "seed" in frame.columns else None
    if seed is not None and seed.notna().any():
        bad = seed[seed.notna() & (pd.to_numeric(seed, errors="coerce") % 1 != 0)]
        if len(bad):
            raise CampaignError(f"{path}: seed {bad.iloc[0]!r} is not a whole number")
    out = pd.DataFrame(
        {
            CELL: frame["model"].astype(str),
            SEED: pd.array(
                pd.to_numeric(seed, errors="coerce") if seed is not None else [None] * len(frame),
                dtype="Int64",
            ),
            SPLIT: frame["split"].astype(str) if "split" in frame.columns else "test",
            TASK: frame["task"].astype(str),
            ITEM: frame["item"].astype(str),
            SCORE: pd.to_numeric(frame["score"], errors="coerce"),
            PREDICTION: frame["prediction"] if "prediction" in frame.columns else None,
            METRIC: frame["metric"].astype(str) if "metric" in frame.columns else "score",
        }
    )
    out.insert(0, VARIANT, [run_name(c, s) for c, s in zip(out[CELL], out[SEED], strict=True)])
    out[SOURCE] = str(path)
    _check_scores(out, frame["score"])
    return out[[*COLUMNS, SOURCE]]


def _check_scores(frame, raw) -> None:
    """Every score a number in [0, 1]; else one line naming the file and the item."""
    import numpy as np

    score = frame[SCORE].to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(score) | (score < 0) | (score > 1))
    if bad.size:
        i = bad[0]
        value = raw.iloc[i]
        value = value.item() if hasattr(value, "item") else value  # a numpy scalar: as Python's
        raise CampaignError(
            f"{frame[SOURCE].iloc[i]}: item {frame[ITEM].iloc[i]!r} of task "
            f"{frame[TASK].iloc[i]} ({frame[VARIANT].iloc[i]}) has score {value!r}, not a "
            f"number in [0, 1] ({bad.size} such row(s)); compare decides on per-item scores in "
            "[0, 1]"
        )


def check_table(frame) -> None:
    """The checks every importer's table passes before any statistic: scores in [0, 1], one
    row per (run, task, item), one metric and one split per task, one source per run, and the
    same items for every run of a task (how many differ, and where; nothing is dropped)."""
    _check_scores(frame, frame[SCORE])
    dup = frame.duplicated([VARIANT, TASK, ITEM], keep=False)
    if dup.any():
        row = frame[dup].iloc[0]
        raise CampaignError(
            f"{row[SOURCE]}: item {row[ITEM]!r} of task {row[TASK]} appears more than once for "
            f"{row[VARIANT]} (or two sources give the same model and seed)"
        )
    for task, rows in frame.groupby(TASK, sort=True):
        for col, what in ((METRIC, "metric"), (SPLIT, "split")):
            values = sorted(rows[col].astype(str).unique())
            if len(values) > 1:
                raise CampaignError(
                    f"task {task}: scores of several {what}s ({', '.join(values)}) in "
                    f"{_files(rows)}; choose one ({'--metric' if col == METRIC else '--split'})"
                )
        _check_items_match(task, rows)


def _files(rows) -> str:
    names = sorted(rows[SOURCE].astype(str).unique())
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _check_items_match(task: str, rows) -> None:
    """Every run of the task scored on the same items, else one line: the run (and its file)
    whose items differ from the first run's, how many each way, and one item."""
    runs = sorted(rows[VARIANT].unique())
    items = {r: set(rows.loc[rows[VARIANT] == r, ITEM]) for r in runs}
    where = {r: rows.loc[rows[VARIANT] == r, SOURCE].iloc[0] for r in runs}
    first = runs[0]
    for r in runs[1:]:
        extra, lacking = items[r] - items[first], items[first] - items[r]
        if not extra and not lacking:
            continue
        example = sorted(extra)[0] if extra else sorted(lacking)[0]
        raise CampaignError(
            f"{where[r]}: task {task}: {r} has {len(items[r])} items and {first} "
            f"({where[first]}) {len(items[first])}; {len(extra)} of {r}'s are not {first}'s and "
            f"{len(lacking)} of {first}'s are missing (e.g. item {example!r}); compare needs the "
            "same items for every model and drops none"
        )
