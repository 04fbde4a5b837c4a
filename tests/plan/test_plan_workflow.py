"""Through real Snakemake on the tiny campaign: the budget cut (the plan table as a checkpoint)
decides which runs are trained, and editing the design or adding a level plans training jobs
for the new cells only."""

import csv
import json
from pathlib import Path

import pytest
import yaml

from conftest import planned_jobs, snakemake, warm_store

pytestmark = pytest.mark.slow


def edit_params(project: Path, edit) -> None:
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    edit(params)
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def table(project: Path) -> list[dict]:
    with open(project / "results" / "plan" / "runs.tsv", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def trained(project: Path) -> set[str]:
    return {p.parent.name for p in (project / "results" / "runs").glob("*/run_manifest.json")}


# The trained runs' consumer this test needs (the later phases' targets are left out: faster).
TARGET = "results/metrics.json"


def train_jobs(project: Path) -> list[str]:
    jobs = planned_jobs(snakemake(project, "-n", TARGET))
    return sorted(out.split("/")[2] for rule, out in jobs if rule == "train")


def test_the_budget_cut_decides_what_is_trained_and_edits_train_only_new_cells(
    tiny_project, finished_campaign
):
    # The tiny plan: lr at 1e-3 (the control) and 3e-3, seeds 1 and 2. The plan table alone
    # first (it runs the preflight), for the measured hours of each run. The store holds the
    # session's run of the same params (conftest.warm_store): its preflight and training jobs
    # are store hits, and what this test is about (which jobs Snakemake plans and runs) is not.
    warm_store(tiny_project, finished_campaign)
    snakemake(tiny_project, "results/plan/runs.tsv", timeout=600)
    rows = table(tiny_project)
    assert [r["tier"] for r in rows] == ["control", "main", "extra_seed", "extra_seed"]
    assert all(r["kept"] == "true" for r in rows)
    cumulative = [float(r["cumulative_hours"]) for r in rows]

    # A budget between the second and third runs' cumulative hours: the plan table (now a
    # checkpoint) keeps the control and the lr cell at seed 1; only those are trained. The
    # projection reads the same measurements, so the hours do not move.
    budget = (cumulative[1] + cumulative[2]) / 2
    edit_params(tiny_project, lambda p: p["ablation"].update(budget_hours=budget))
    snakemake(tiny_project, TARGET, timeout=600)
    rows = table(tiny_project)
    assert [float(r["cumulative_hours"]) for r in rows] == cumulative
    kept = [r["run"] for r in rows if r["kept"] == "true"]
    assert kept == [rows[0]["run"], rows[1]["run"]]
    assert trained(tiny_project) == set(kept)
    metrics = json.loads((tiny_project / "results" / "metrics.json").read_text())
    assert set(metrics["training"]["validation_accuracy"]) == set(kept)
    report = (tiny_project / "results" / "plan" / "report.txt").read_text()
    assert "lr main effect: 2 → 1 seed per contrast" in report
    assert planned_jobs(snakemake(tiny_project, "-n", TARGET)) == []

    # Adding a level (budget lifted, max_runs 3: a cut Snakemake knows at DAG time): the new
    # cell is the third run of the order, and its training job is the only one planned.
    def add_level(p):
        p["ablation"]["factors"]["train"]["lr"] = [1.0e-3, 3.0e-3, 1.0e-2]
        p["ablation"].update(budget_hours=None, max_runs=3)

    edit_params(tiny_project, add_level)
    new = train_jobs(tiny_project)
    assert len(new) == 1 and new[0] not in trained(tiny_project)

    # Editing the design instead: one_at_a_time over lr and a new factor max_length (the
    # control's 32 and 16). Order: the control, max_length 16 (cheaper), lr 3e-3: only the
    # max_length cell is new.
    def one_at_a_time(p):
        p["ablation"]["design"] = "one_at_a_time"
        p["ablation"]["factors"]["train"] = {"lr": [1.0e-3, 3.0e-3], "max_length": [32, 16]}
        p["ablation"].update(budget_hours=None, max_runs=3)

    edit_params(tiny_project, one_at_a_time)
    new = train_jobs(tiny_project)
    assert len(new) == 1 and new[0] not in trained(tiny_project)
    # The plan table is redone (the design changed); no data or preflight job reruns.
    rules = {rule for rule, _ in planned_jobs(snakemake(tiny_project, "-n", TARGET))}
    assert "plan_table" in rules and not rules & {"manifest", "split", "preflight"}
