"""Which run the quantize phase takes: the chosen cell's median-seed run (representative), not
the luckiest seed; the checkpoint stage writes it and the rules' input function reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from campaign.core.errors import CampaignError
from campaign.core.runner import StageContext
from campaign.quantize import PHASE, job_paths
from campaign.quantize.targets import (
    run_cells,
    run_scores,
    select_representative,
    stage_select,
)

REPO = Path(__file__).resolve().parents[2]
RESULT = "results/quantize/{run}/{variant}/result.json"  # a job's file, as a rule input names it

# Cell A: seeds at 0.70, 0.90, 0.80 (mean 0.80); cell B: 0.84, 0.74 (mean 0.79, but its best
# seed, 0.84, is below A's 0.90 only); cell C has no validation score.
SCORES = {"ra1": 0.70, "ra2": 0.90, "ra3": 0.80, "rb1": 0.84, "rb2": 0.74, "rc1": None}
CELLS = {"ra1": "lr=1", "ra2": "lr=1", "ra3": "lr=1", "rb1": "lr=2", "rb2": "lr=2", "rc1": "lr=3"}
BY = "validation.accuracy"

# Four items, truth a a a b. Run "x" says a a a a: accuracy 3/4, macro-F1 (6/7 + 0) / 2 = 0.43.
# Run "y" says b a b b: accuracy 2/4, macro-F1 (F1 of a 2/4, of b 2/4) = 0.50.
TRUTH = ["a", "a", "a", "b"]
SAYS = {"x": "aaaa", "y": "babb"}


def split_files(root: Path, truth: list[str] = TRUTH) -> dict[str, Path]:
    """train, validation and test split files on the same items."""
    import pandas as pd

    root.mkdir(parents=True, exist_ok=True)
    ids = [str(i) for i in range(len(truth))]
    frame = pd.DataFrame({"id": ids, "label": truth, "text": ["t"] * len(truth)})
    out = {}
    for name in ("train", "validation", "test"):
        frame.to_parquet(root / f"{name}.parquet", index=False)
        out[name] = root / f"{name}.parquet"
    return out


def predictions(root: Path, says: dict[str, str], split: str, truth=TRUTH) -> list[Path]:
    """results/runs/<run>/predictions_<split>.parquet of each run: its labels, scores 1/0."""
    import pandas as pd

    paths = []
    for run, labels in says.items():
        (root / run).mkdir(parents=True, exist_ok=True)
        frame = pd.DataFrame(
            {
                "id": [str(i) for i in range(len(truth))],
                "label": truth,
                "prediction": list(labels),
                "score_a": [1.0 if x == "a" else 0.0 for x in labels],
                "score_b": [1.0 if x == "b" else 0.0 for x in labels],
            }
        )
        frame.to_parquet(root / run / f"predictions_{split}.parquet", index=False)
        paths.append(root / run / f"predictions_{split}.parquet")
    return paths


def test_the_chosen_cells_median_seed_not_the_luckiest_run():
    chosen = select_representative(SCORES, CELLS, BY)
    assert chosen["cell"] == "lr=1"  # mean 0.80 beats 0.79
    assert chosen["cell_means"] == pytest.approx({"lr=1": 0.80, "lr=2": 0.79})
    assert chosen["cell_runs"] == ["ra1", "ra3", "ra2"]  # by score
    assert chosen["runs"] == ["ra3"]  # the median seed (0.80), not ra2 (0.90)
    assert chosen["criterion"] == BY


def test_even_seeds_take_a_middle_run_by_id_not_the_worse_one_by_construction():
    # Two seeds: the run id decides, whichever scored higher (the lower median would always
    # quantize the worse seed). Equal scores: the first id.
    assert select_representative({"rb1": 0.84, "rb2": 0.74}, CELLS, BY)["runs"] == ["rb1"]
    assert select_representative({"rb1": 0.74, "rb2": 0.84}, CELLS, BY)["runs"] == ["rb1"]
    assert select_representative({"rb2": 0.8, "rb1": 0.8}, CELLS, BY)["runs"] == ["rb1"]
    # Two cells at the same mean: the name that sorts first.
    assert select_representative({"ra1": 0.8, "rb1": 0.8}, CELLS, BY)["cell"] == "lr=1"


def test_unscored_or_unplanned_runs_fail_in_one_line():
    with pytest.raises(CampaignError, match="representative: no run has a validation.accuracy"):
        select_representative({"rc1": None}, CELLS, BY)
    with pytest.raises(CampaignError, match="run rx9 is not a planned run"):
        select_representative({"rx9": 0.5}, CELLS, BY)


def test_runs_are_scored_by_the_evaluations_metric_on_its_split(tmp_path):
    splits = split_files(tmp_path / "splits")
    paths = predictions(tmp_path / "runs", SAYS, "validation")
    accuracy = run_scores(paths, splits, "validation", "accuracy")
    assert accuracy == pytest.approx({"x": 0.75, "y": 0.5})
    f1 = run_scores(paths, splits, "validation", "macro_f1")
    assert f1 == pytest.approx({"x": 3 / 7, "y": 0.5})
    cells = {"x": "lr=1", "y": "lr=2"}
    assert select_representative(accuracy, cells, BY)["runs"] == ["x"]
    assert select_representative(f1, cells, "validation.macro_f1")["runs"] == ["y"]


def test_the_checkpoint_writes_what_the_rules_read(tmp_path):
    """The selection stage's file is what job_paths (the quantize table's and the evaluation's
    input function, evaluated after the checkpoint) turns into the jobs' paths."""
    params = yaml.safe_load((REPO / "tests" / "fixtures" / "tiny_params.yaml").read_text())
    params["quantization"]["runs"] = "representative"
    params["quantization"]["variants"] = ["fp32", "int8_dynamic"]
    cells = run_cells(params)
    by_cell: dict[str, list[str]] = {}
    for rid, cell in cells.items():
        by_cell.setdefault(cell, []).append(rid)
    cell, runs = next((c, r) for c, r in by_cell.items() if len(r) >= 2)
    # Ten items, nine "a" then one "b": a run saying k "a" then "b" has accuracy (k + 1) / 10.
    right = {rid: 5 for rid in cells} | dict(zip(runs, [9, 7], strict=False))
    says = {rid: "a" * k + "b" * (10 - k) for rid, k in right.items()}
    stage = next(s for s in PHASE.stages if s.name == "quantize_select")
    spec = stage.spec(params)
    assert spec["mode"] == "representative" and spec["cells"] == cells
    assert (spec["metric"], spec["split"]) == ("accuracy", "validation")
    out = tmp_path / "selection.json"
    truth = ["a"] * 9 + ["b"]
    ctx = StageContext(
        "quantize_select",
        spec,
        {
            "predictions_validation": predictions(tmp_path / "runs", says, "validation", truth),
            **{k: [v] for k, v in split_files(tmp_path / "splits", truth).items()},
        },
        {"selection": out},
        tmp_path / "work",
        tmp_path,
    )
    stage_select(ctx)
    written = json.loads(out.read_text())
    # Two seeds (1.0 and 0.8): the middle run whose id sorts first, whichever scored higher.
    chosen = min(runs[:2])
    assert written["cell"] == cell and written["runs"] == [chosen]
    assert written["criterion"] == "validation.accuracy"
    paths = job_paths(params, RESULT, list(cells), lambda: out)(None)
    assert paths == [
        f"results/quantize/{chosen}/fp32/result.json",
        f"results/quantize/{chosen}/int8_dynamic/result.json",
    ]
    # control is known from the params: it never asks for the selection, and a selection
    # stage run by hand says there is nothing to select.
    params["quantization"]["runs"] = "control"
    assert stage.spec(params)["mode"] is None
    ctx.spec = stage.spec(params)
    with pytest.raises(CampaignError, match="quantization.runs: the params name the runs"):
        stage_select(ctx)
    assert len(job_paths(params, RESULT, [], lambda: 1 / 0)(None)) == 2


def test_the_checkpoint_selects_by_evaluation_metric_on_decide_on(tmp_path):
    """evaluation.metric: macro_f1 and decide_on: test pick y (macro-F1 0.50 on test), not x
    (the better accuracy, 0.75), and the file names the criterion."""
    params = yaml.safe_load((REPO / "tests" / "fixtures" / "tiny_params.yaml").read_text())
    params["quantization"]["runs"] = "best_seed"
    params["evaluation"] |= {"metric": "macro_f1", "decide_on": "test"}
    stage = next(s for s in PHASE.stages if s.name == "quantize_select")
    spec = stage.spec(params)
    assert (spec["metric"], spec["split"]) == ("macro_f1", "test")
    out = tmp_path / "selection.json"
    inputs = {
        "predictions_test": predictions(tmp_path / "runs", SAYS, "test"),
        **{k: [v] for k, v in split_files(tmp_path / "splits").items()},
    }
    stage_select(
        StageContext("quantize_select", spec, inputs, {"selection": out}, tmp_path, tmp_path)
    )
    written = json.loads(out.read_text())
    assert written["runs"] == ["y"] and written["criterion"] == "test.macro_f1"
    assert written["scores"] == pytest.approx({"x": 3 / 7, "y": 0.5})
