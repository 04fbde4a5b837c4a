"""A trained run's curves from its metrics.parquet (the train stage's table: one row per train
step and per validation pass), as {name: [(step, value), ...]} for MLflow and TensorBoard."""

from __future__ import annotations

from pathlib import Path

from campaign.core.io import read_table

NEEDED = ("step", "split", "loss", "lr")


def read_curves(path: Path, metric: str) -> dict[str, list[tuple[int, float]]]:
    """train/loss and train/lr per train step; validation/loss, validation/<metric> and
    validation/generated (the mean generated score on the judged validation items,
    model.generation.eval_items) per validation pass. Steps in the table's order; a missing
    value (NaN), or a column the table lacks, is left out."""
    table = read_table(path, NEEDED)
    wanted = {
        "train/loss": ("train", "loss"),
        "train/lr": ("train", "lr"),
        "validation/loss": ("validation", "loss"),
        f"validation/{metric}": ("validation", metric),
        "validation/generated": ("validation", "generated"),
    }
    curves = {}
    for name, (split, column) in wanted.items():
        if column not in table.columns:
            continue
        rows = table[(table["split"] == split) & table[column].notna()]
        curves[name] = [(int(s), float(v)) for s, v in zip(rows["step"], rows[column], strict=True)]
    return curves
