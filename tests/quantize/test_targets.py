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
from campaign.quantize.targets import run_cells, select_representative, stage_select

REPO = Path(__file__).resolve().parents[2]

# Cell A: seeds at 0.70, 0.90, 0.80 (mean 0.80); cell B: 0.84, 0.74 (mean 0.79, but its best
# seed, 0.84, is below A's 0.90 only); cell C has no validation score.
SCORES = {"ra1": 0.70, "ra2": 0.90, "ra3": 0.80, "rb1": 0.84, "rb2": 0.74, "rc1": None}
CELLS = {"ra1": "lr=1", "ra2": "lr=1", "ra3": "lr=1", "rb1": "lr=2", "rb2": "lr=2", "rc1": "lr=3"}


def manifests(root: Path, scores: dict) -> list[Path]:
    paths = []
    for run, accuracy in scores.items():
        folder = root / run
        folder.mkdir(parents=True, exist_ok=True)
        final = None if accuracy is None else {"accuracy": accuracy, "split": "validation"}
        (folder / "run_manifest.json").write_text(json.dumps({"final_validation": final}))
        paths.append(folder / "run_manifest.json")
    return paths


def test_the_chosen_cells_median_seed_not_the_luckiest_run(tmp_path):
    chosen = select_representative(manifests(tmp_path, SCORES), CELLS)
    assert chosen["cell"] == "lr=1"  # mean 0.80 beats 0.79
    assert chosen["cell_means"] == pytest.approx({"lr=1": 0.80, "lr=2": 0.79})
    assert chosen["cell_runs"] == ["ra1", "ra3", "ra2"]  # by accuracy
    assert chosen["runs"] == ["ra3"]  # the median seed (0.80), not ra2 (0.90)


def test_even_seeds_take_the_lower_median_and_ties_the_smaller_id(tmp_path):
    # Two seeds: the lower of the two. Equal accuracies: sorted by run id, the first.
    two = {"rb1": 0.84, "rb2": 0.74}
    assert select_representative(manifests(tmp_path / "a", two), CELLS)["runs"] == ["rb2"]
    tied = {"rb2": 0.8, "rb1": 0.8}
    assert select_representative(manifests(tmp_path / "b", tied), CELLS)["runs"] == ["rb1"]
    # Two cells at the same mean: the name that sorts first.
    even = {"ra1": 0.8, "rb1": 0.8}
    assert select_representative(manifests(tmp_path / "c", even), CELLS)["cell"] == "lr=1"


def test_unscored_or_unplanned_runs_fail_in_one_line(tmp_path):
    with pytest.raises(CampaignError, match="quantization.runs: representative: no run has"):
        select_representative(manifests(tmp_path / "a", {"rc1": None}), CELLS)
    with pytest.raises(CampaignError, match="run rx9 is not a planned run"):
        select_representative(manifests(tmp_path / "b", {"rx9": 0.5}), CELLS)


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
    scores = {rid: 0.5 for rid in cells} | dict(zip(runs, [0.9, 0.7], strict=False))
    stage = next(s for s in PHASE.stages if s.name == "quantize_select")
    spec = stage.spec(params)
    assert spec["mode"] == "representative" and spec["cells"] == cells
    out = tmp_path / "selection.json"
    ctx = StageContext(
        "quantize_select",
        spec,
        {"run_manifests": manifests(tmp_path / "runs", scores)},
        {"selection": out},
        tmp_path / "work",
        tmp_path,
    )
    stage_select(ctx)
    written = json.loads(out.read_text())
    assert written["cell"] == cell and written["runs"] == [runs[1]]  # 0.7: the median
    paths = job_paths(params, "result.json", list(cells), lambda: out)(None)
    assert paths == [
        f"results/quantize/{runs[1]}/fp32/result.json",
        f"results/quantize/{runs[1]}/int8_dynamic/result.json",
    ]
    # control is known from the params: it never asks for the selection, and a selection
    # stage run by hand says there is nothing to select.
    params["quantization"]["runs"] = "control"
    assert stage.spec(params)["mode"] is None
    ctx.spec = stage.spec(params)
    with pytest.raises(CampaignError, match="quantization.runs: the params name the runs"):
        stage_select(ctx)
    assert len(job_paths(params, "result.json", [], lambda: 1 / 0)(None)) == 2
