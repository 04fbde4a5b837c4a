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
from campaign.core.wording import level_words, percent

# metrics.parquet's columns the curves read; GENERATED and KEPT are absent from a table
# written before generated scores (read as missing and False).
CURVE_COLUMNS = ("step", "split", "loss", "accuracy")
GENERATED, KEPT = "generated", "kept"


def read_curves(paths: list[Path]) -> pd.DataFrame:
    """Every run's training log in one table: run, step, split, loss, accuracy, generated (the
    mean generated score on the judged validation items, model.generation.eval_items) and kept
    (the validation row of the step whose model the run kept, train.select)."""
    frames = []
    columns = ["run", *CURVE_COLUMNS, GENERATED, KEPT]
    for path in sorted(paths, key=lambda p: p.parent.name):
        frame = read_table(path, CURVE_COLUMNS)
        frame = frame.reindex(columns=[*CURVE_COLUMNS, GENERATED, KEPT]).copy()
        frame.insert(0, "run", path.parent.name)
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=columns)
    curves = pd.concat(frames, ignore_index=True)[columns]
    curves["step"] = curves["step"].astype("int64")
    curves[KEPT] = curves[KEPT].astype(object).eq(True)  # missing: not kept
    return curves.astype({"loss": "float64", "accuracy": "float64", GENERATED: "float64"})


def judged(curves: pd.DataFrame) -> bool:
    """Whether any run has generated scores (its curve is then the generated score's)."""
    return GENERATED in curves.columns and bool(curves[GENERATED].notna().any())


ROW_COLUMNS = [
    "run",
    "steps",
    "first_loss",
    "last_loss",
    "final_validation_accuracy",
    "kept_step",
    "kept_generated",
    "last_generated",
]


def _run_row(run: str, frame: pd.DataFrame) -> dict:
    train, val = frame[frame["split"] == "train"], frame[frame["split"] == "validation"]
    steps = int(train["step"].max()) if len(train) else 0
    kept = val[val[KEPT]] if KEPT in val.columns else val.iloc[0:0]
    kept_step = int(kept["step"].iloc[0]) if len(kept) else steps
    generated = val[GENERATED] if GENERATED in val.columns else pd.Series(dtype="float64")
    at_kept = generated[val["step"] == kept_step]
    return {
        "run": run,
        "steps": steps,
        "first_loss": train["loss"].iloc[0] if len(train) else math.nan,
        "last_loss": train["loss"].iloc[-1] if len(train) else math.nan,
        "final_validation_accuracy": val["accuracy"].iloc[-1] if len(val) else math.nan,
        "kept_step": kept_step,
        "kept_generated": float(at_kept.iloc[0]) if len(at_kept) else math.nan,
        "last_generated": float(generated.iloc[-1]) if len(generated) else math.nan,
    }


def curves_section(curves: pd.DataFrame) -> Section:
    rows = [_run_row(run, frame) for run, frame in curves.groupby("run", sort=True)]
    columns = ["run", "steps", "first_loss", "last_loss", "final_validation_accuracy"]
    if judged(curves):
        columns = [c for c in columns if c != "final_validation_accuracy"]
        columns += ["kept_step", "kept_generated", "last_generated"]
    table = pd.DataFrame(rows, columns=ROW_COLUMNS)[columns]
    lines = [f"{len(table)} run(s) trained."]
    if len(table) and judged(curves):
        lines += kept_lines(table)
    elif len(table):
        best = table.sort_values(["final_validation_accuracy", "run"], ascending=[False, True])
        lines.append(
            f"Highest final validation accuracy: {best['run'].iloc[0]} "
            f"({level_words(best['final_validation_accuracy'].iloc[0], None, None)})."
        )
    return Section(lines, [("Per run", table)], (curves_figure, (curves,)))


def kept_lines(table: pd.DataFrame) -> list[str]:
    """Which step each run kept, and its generated score on the judged validation items (a
    score the choice was made on: optimistic; the test split is the headline)."""
    lines = []
    for row in table.itertuples(index=False):
        score = percent(row.kept_generated)
        if row.kept_step < row.steps:
            last = percent(row.last_generated)
            lines.append(
                f"{row.run}: kept step {row.kept_step} of {row.steps}: best generated score on "
                f"validation ({score}; the last step's {last})."
            )
        else:
            lines.append(f"{row.run}: kept step {row.kept_step} of {row.steps} ({score}).")
    if len(table):
        lines.append(
            "A step chosen on the judged items scores optimistically on them: the evaluation "
            "leaves them out of its validation split, and the test split is the headline."
        )
    return lines


def render_curves(inputs) -> Section:
    return curves_section(read_curves(inputs.paths("run_metrics")))


def curves_figure(curves: pd.DataFrame):
    """Left: training loss per run. Right: validation accuracy per run, or for runs judged on
    generated text (model.generation.eval_items) their generated score, the kept step (train.select)
    ringed.

    curves: columns run, step, split ('train' or 'validation'), loss, accuracy, and optionally
    generated and kept.
    """
    fig, (left, right) = figure_axes(2)
    if curves.empty:
        empty_axes(left, "no run finished")
        empty_axes(right, "no run finished")
    column = GENERATED if judged(curves) else "accuracy"
    markers = ("o", "s", "^", "D", "v", "P", "X", "*")
    for i, (run, rows) in enumerate(curves.groupby("run", sort=True)):
        train = rows[rows["split"] == "train"].sort_values("step")
        val = rows[rows["split"] == "validation"].sort_values("step")
        val = val[val[column].notna()] if column == GENERATED else val
        (line,) = left.plot(train["step"], train["loss"], linewidth=1.2, label=run)
        # Runs that score alike overlap: a marker of its own (and shrinking) keeps each visible.
        right.plot(
            val["step"],
            val[column],
            marker=markers[i % len(markers)],
            markersize=max(9 - i, 4),
            color=line.get_color(),
            label=run,
        )
        if column == GENERATED and KEPT in val.columns:
            kept = val[val[KEPT]]
            right.scatter(kept["step"], kept[column], s=220, facecolors="none",
                          edgecolors=line.get_color(), linewidths=1.5, zorder=3)  # fmt: skip
    if not curves.empty:
        left.set_xlabel("step")
        left.set_ylabel("training loss")
        left.set_title("Training loss")
        right.set_xlabel("step")
        if column == GENERATED:
            right.set_ylabel("generated score (validation items)")
            right.set_title("Generated score (ringed: the kept step)")
        else:
            right.set_ylabel("validation accuracy")
            right.set_title("Validation accuracy")
        left.legend(fontsize="x-small")
    fig.tight_layout()
    return fig
