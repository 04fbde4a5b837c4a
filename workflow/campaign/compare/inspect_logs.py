"""Inspect evaluation logs (.eval or .json) as the scored-items table.

Read with Inspect's own readers: `inspect_ai.log.read_eval_log` (header: the task, the model)
and `read_eval_log_samples` (one sample at a time). An item is a sample's id; a sample scored
over several epochs is matched by id and epoch across models, and its item score is the mean
over its epochs (Inspect's `mean` reducer): epochs are one item's repeated answers from the same
weights, not seeds (a model's runs are its logs), and models scored over different epochs are
refused. A score becomes a number in [0, 1] the way Inspect
converts it, `inspect_ai.scorer.value_to_float` (C/I/P/N -> 1/0/0.5/0, yes/no, booleans,
numbers); a value it cannot convert, or a number outside [0, 1], is refused in one line naming
the file and the sample. The scorer is `--metric NAME` (a scorer's name) or the log's only one.
Nothing here decides.
"""

from __future__ import annotations

import math
from pathlib import Path

from campaign.compare.table import (
    CELL,
    COLUMNS,
    ITEM,
    METRIC,
    PREDICTION,
    SCORE,
    SEED,
    SOURCE,
    SPLIT,
    TASK,
    VARIANT,
    numbered_runs,
)
from campaign.core.errors import CampaignError

SUFFIXES = (".eval", ".json")


def log_files(path: Path) -> list[Path]:
    """The Inspect logs a path names: the file, or the .eval/.json logs in a folder."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())


def is_inspect(path: Path) -> bool:
    if path.is_file():
        return path.suffix == ".eval" or (path.suffix == ".json" and _header(path) is not None)
    return path.is_dir() and any(p.suffix == ".eval" for p in path.iterdir())


def _header(path: Path):
    from inspect_ai.log import read_eval_log

    try:
        return read_eval_log(str(path), header_only=True)
    except Exception:  # not an Inspect log (a plain JSON table): the caller says what it is
        return None


def read_log(path: Path, metric: str | None, name: str | None) -> list[dict]:
    """Rows of one log: {cell, task, item, score, prediction, metric, epoch}."""
    from inspect_ai.log import read_eval_log_samples
    from inspect_ai.scorer import value_to_float

    header = _header(path)
    if header is None:
        raise CampaignError(f"{path}: not an Inspect evaluation log")
    if header.status != "success":
        raise CampaignError(f"{path}: the evaluation's status is {header.status}, not success")
    to_float = value_to_float()
    cell, task = name or header.eval.model, header.eval.task
    rows = []
    for sample in read_eval_log_samples(str(path), all_samples_required=False):
        scores = sample.scores or {}
        chosen = metric or (next(iter(scores)) if len(scores) == 1 else None)
        if chosen is None or chosen not in scores:
            raise CampaignError(
                f"{path}: sample {sample.id!r}: scorers {', '.join(scores) or 'none'}; choose one "
                "(--metric NAME)"
            )
        score = scores[chosen]
        try:
            value = to_float(score.value)
        except Exception:
            value = math.nan
        if not (isinstance(score.value, str | int | float | bool) and math.isfinite(value)):
            raise CampaignError(
                f"{path}: sample {sample.id!r} epoch {sample.epoch}: score {score.value!r} of "
                f"{chosen} is not one value Inspect converts to a number"
            )
        if not 0 <= value <= 1:
            raise CampaignError(
                f"{path}: sample {sample.id!r} epoch {sample.epoch}: score {score.value!r} of "
                f"{chosen} is not in [0, 1]"
            )
        rows.append(
            {
                CELL: cell,
                TASK: task,
                ITEM: str(sample.id),
                "epoch": int(sample.epoch),
                SCORE: value,
                PREDICTION: score.answer,
                METRIC: chosen,
            }
        )
    if not rows:
        raise CampaignError(f"{path}: no samples")
    return rows


def read(sources: list[tuple[str | None, Path]], metric: str | None):
    """(the scored-items table, the assumptions made, in words) of Inspect logs (`sources:
    [(name or None, log file or folder)]`). Logs of one model and task are its runs (seeds 0,
    1, ... in the order given). Items are matched by (id, epoch) across every run of a task
    before the epochs are averaged: a sample's epochs are one item's repeated answers from the
    same weights, not seeds (a seed is another training run; only logs are runs)."""
    import pandas as pd

    frames, reducers = [], {}
    for name, path in sources:
        for log in log_files(path):
            frames.append(pd.DataFrame(read_log(log, metric, name)).assign(**{SOURCE: str(log)}))
            reducers[str(log)] = _header(log).eval.config.epochs_reducer
    table = numbered_runs(frames, lambda frame: (frame[CELL].iloc[0], frame[TASK].iloc[0]))
    _check_epochs(table)
    notes = epoch_notes(table, reducers)
    keys = [VARIANT, CELL, SEED, TASK, ITEM, METRIC, SOURCE]
    table = (
        table.groupby(keys, dropna=False, sort=True)
        .agg({SCORE: "mean", PREDICTION: "first"})
        .reset_index()
    )
    table[SEED] = pd.array(table[SEED], dtype="Int64")
    table[SPLIT] = "test"
    return table[[*COLUMNS, SOURCE]], notes


def epoch_notes(table, reducers: dict[str, list[str] | None]) -> list[str]:
    """One line per task scored over several epochs: the item score is their mean, and the
    logs whose own epochs reducer is another (Inspect's headline metric then is not the mean)."""
    notes = []
    for task, rows in table.groupby(TASK, sort=True):
        n = rows.groupby(SOURCE)["epoch"].nunique().max()
        if n < 2:
            continue
        other = sorted({f"{Path(log).name} ({', '.join(r)})"
                        for log, r in reducers.items()
                        if log in set(rows[SOURCE]) and r and list(r) != ["mean"]})  # fmt: skip
        notes.append(
            f"{task}: {n} epochs per sample; a sample's score is the mean over its epochs "
            "(one item, its epochs repeated answers of the same weights, not seeds: a model's "
            "runs are its logs)"
            + (f"; the logs' own reducer differs: {'; '.join(other)}" if other else "")
        )
    return notes


def _epochs_per_sample(pairs: set) -> int | None:
    """How many epochs every sample of a log has, where each has the same epochs; else None."""
    by_item: dict = {}
    for item, epoch in pairs:
        by_item.setdefault(item, set()).add(epoch)
    sets = {frozenset(e) for e in by_item.values()}
    return len(next(iter(sets))) if len(sets) == 1 else None


def _check_epochs(table) -> None:
    """Every run of a task scored on the same (id, epoch) pairs, else one line naming the log:
    the epochs of each when only they differ, every sample of each log over the same epochs (an
    item's mean over 1 epoch and over 4 are not one measurement: the paired test would read the
    difference in their noise as the models'); else how many pairs differ, and one."""
    for task, rows in table.groupby(TASK):
        pairs = {}
        for source, r in rows.groupby(SOURCE):
            pairs[source] = set(zip(r[ITEM], r["epoch"], strict=True))
        first, *rest = sorted(pairs)
        for other in rest:
            a, b = pairs[first], pairs[other]
            n_a, n_b = _epochs_per_sample(a), _epochs_per_sample(b)
            same_items = {i for i, _ in a} == {i for i, _ in b}
            if a != b and same_items and None not in (n_a, n_b) and n_a != n_b:
                raise CampaignError(
                    f"{other}: task {task}: {n_b} epoch(s) per sample, {first} has {n_a}; "
                    "compare needs the same epochs for every model (run each with the same "
                    "--epochs)"
                )
            if a != b:
                diff = sorted((b - a) or (a - b))[0]
                raise CampaignError(
                    f"{other}: task {task}: {len(b - a)} (sample, epoch) pairs are not in {first} "
                    f"and {len(a - b)} of its are missing (e.g. sample {diff[0]!r} epoch "
                    f"{diff[1]}); compare needs the same samples and epochs for every model"
                )
