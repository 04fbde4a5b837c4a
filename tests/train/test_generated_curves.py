"""The generated-score curve outside the loop: the training-curves report section and figure of
a generation campaign (the kept step named and ringed), and the TensorBoard/MLflow curve
validation/generated, read from metrics.parquet files as the train stage writes them."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from campaign.track.curves import read_curves as track_curves
from campaign.train.loop import metrics_table
from campaign.train.section import curves_figure, curves_section, read_curves


def _metrics(folder, run: str, generated: list[float], kept: int):
    """A run's metrics.parquet: 24 train steps, validation every 4 with a generated score."""
    rows = [
        {"step": s, "split": "train", "loss": 3.0 - s / 10, "kept": False} for s in range(1, 25)
    ]
    rows += [
        {"step": s, "split": "validation", "loss": 2.0, "generated": g, "kept": s == kept}
        for s, g in zip(range(4, 25, 4), generated, strict=True)
    ]
    path = folder / run / "metrics.parquet"
    path.parent.mkdir(parents=True)
    metrics_table(rows).to_parquet(path, index=False)
    return path


@pytest.fixture
def paths(tmp_path):
    return [
        _metrics(tmp_path, "run-a", [0.1, 0.2, 0.3, 0.45, 0.4, 0.38], kept=16),
        _metrics(tmp_path, "run-b", [0.1, 0.2, 0.3, 0.35, 0.4, 0.41], kept=24),
    ]


def test_the_report_names_the_kept_step_and_draws_the_generated_curve(paths):
    curves = read_curves(paths)
    section = curves_section(curves)
    text = "\n".join(section.lines)
    assert (
        "run-a: kept step 16 of 24: best generated score on validation "
        "(45.0 %; the last step's 38.0 %)."
    ) in text
    assert "run-b: kept step 24 of 24 (41.0 %)." in text
    assert (
        "the evaluation leaves them out of its validation split, and the test split is the headline"
        in text
    )
    table = section.tables[0][1]
    assert table["kept_step"].tolist() == [16, 24]
    assert table["kept_generated"].tolist() == pytest.approx([0.45, 0.41])
    fig = curves_figure(curves)
    right = fig.axes[1]
    assert right.get_title().startswith("Generated score")
    assert [list(line.get_ydata()) for line in right.lines][0] == [0.1, 0.2, 0.3, 0.45, 0.4, 0.38]
    ringed = [tuple(c.get_offsets()[0]) for c in right.collections]
    assert ringed == [(16, 0.45), (24, 0.41)]


def test_a_label_campaign_keeps_its_accuracy_curve(tmp_path):
    rows = [{"step": 1, "split": "train", "loss": 1.0}, {"step": 1, "split": "validation",
            "loss": 1.0, "accuracy": 0.5}]  # fmt: skip
    path = tmp_path / "r" / "metrics.parquet"
    path.parent.mkdir()
    # a table written before the generated and kept columns existed
    metrics_table(rows).drop(columns=["generated", "kept"]).to_parquet(path, index=False)
    curves = read_curves([path])
    assert curves["generated"].isna().all() and not curves["kept"].any()
    section = curves_section(curves)
    assert "Highest final validation accuracy: r (50.0 %" in "\n".join(section.lines)
    assert curves_figure(curves).axes[1].get_title() == "Validation accuracy"


def test_tracking_curves_carry_the_generated_score(paths):
    curves = track_curves(paths[0], "accuracy")
    assert curves["validation/generated"] == [
        (4, 0.1), (8, 0.2), (12, 0.3), (16, 0.45), (20, 0.4), (24, 0.38)
    ]  # fmt: skip
    assert "validation/accuracy" not in curves or curves["validation/accuracy"] == []
    assert not any(math.isnan(v) for _, v in curves["train/loss"])
    assert len(pd.read_parquet(paths[0])) == 30
