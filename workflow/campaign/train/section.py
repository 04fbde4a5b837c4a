"""What training shows: the runs' curves (report section and figure), read from each run's
metrics table.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from campaign.core.figures import empty_axes, figure_axes
from campaign.core.io import read_table
from campaign.core.stage import Section
from campaign.core.wording import level_words


def read_curves(paths: list[Path]) -> pd.DataFrame:
    """Every run's training log in one table: run, step, split, loss, accuracy."""
    frames = []
    for path in sorted(paths, key=lambda p: p.parent.name):
        frame = read_table(path, ("step", "split", "loss", "accuracy"))
        frame = frame[["step", "split", "loss", "accuracy"]].copy()
        frame.insert(0, "run", path.parent.name)
        frames.append(frame)
    columns = ["run", "step", "split", "loss", "accuracy"]
    if not frames:
        return pd.DataFrame(columns=columns)
    curves = pd.concat(frames, ignore_index=True)[columns]
    curves["step"] = curves["step"].astype("int64")
    return curves.astype({"loss": "float64", "accuracy": "float64"})


def curves_section(curves: pd.DataFrame) -> Section:
    rows = []
    for run, frame in curves.groupby("run", sort=True):
        train, val = frame[frame["split"] == "train"], frame[frame["split"] == "validation"]
        rows.append(
            {
                "run": run,
                "steps": int(train["step"].max()) if len(train) else 0,
                "first_loss": train["loss"].iloc[0] if len(train) else math.nan,
                "last_loss": train["loss"].iloc[-1] if len(train) else math.nan,
                "final_validation_accuracy": val["accuracy"].iloc[-1] if len(val) else math.nan,
            }
        )
    table = pd.DataFrame(
        rows, columns=["run", "steps", "first_loss", "last_loss", "final_validation_accuracy"]
    )
    lines = [f"{len(table)} run(s) trained."]
    if len(table):
        best = table.sort_values(["final_validation_accuracy", "run"], ascending=[False, True])
        lines.append(
            f"Highest final validation accuracy: {best['run'].iloc[0]} "
            f"({level_words(best['final_validation_accuracy'].iloc[0], None, None)})."
        )
    return Section(lines, [("Per run", table)], (curves_figure, (curves,)))


def render_curves(inputs) -> Section:
    return curves_section(read_curves(inputs.paths("run_metrics")))


def curves_figure(curves: pd.DataFrame):
    """Left: training loss per run. Right: validation accuracy per run.

    curves: columns run, step, split ('train' or 'validation'), loss, accuracy.
    """
    fig, (left, right) = figure_axes(2)
    if curves.empty:
        empty_axes(left, "no run finished")
        empty_axes(right, "no run finished")
    markers = ("o", "s", "^", "D", "v", "P", "X", "*")
    for i, (run, rows) in enumerate(curves.groupby("run", sort=True)):
        train = rows[rows["split"] == "train"].sort_values("step")
        val = rows[rows["split"] == "validation"].sort_values("step")
        (line,) = left.plot(train["step"], train["loss"], linewidth=1.2, label=run)
        # Runs that score alike overlap: a marker of its own (and shrinking) keeps each visible.
        right.plot(
            val["step"],
            val["accuracy"],
            marker=markers[i % len(markers)],
            markersize=max(9 - i, 4),
            color=line.get_color(),
            label=run,
        )
    if not curves.empty:
        left.set_xlabel("step")
        left.set_ylabel("training loss")
        left.set_title("Training loss")
        right.set_xlabel("step")
        right.set_ylabel("validation accuracy")
        right.set_title("Validation accuracy")
        left.legend(fontsize="x-small")
    fig.tight_layout()
    return fig
