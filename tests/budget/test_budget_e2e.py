"""The budget stage in a real Snakemake run of the tiny campaign."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import snakemake

TABLES = ("jobs", "forecast", "offers", "plans", "equal_quality", "to_decide")


@pytest.mark.slow
def test_tiny_campaign_writes_the_budget(finished_campaign):
    # The session's one Snakemake run of the tiny campaign (conftest) wrote the budget.
    out = finished_campaign / "results" / "budget"
    runs = pd.read_csv(finished_campaign / "results" / "plan" / "runs.tsv", sep="\t")
    for name in TABLES:
        csv, parquet = pd.read_csv(out / f"{name}.csv"), pd.read_parquet(out / f"{name}.parquet")
        assert list(csv.columns) == list(parquet.columns) and len(csv) == len(parquet)
    jobs = pd.read_parquet(out / "jobs.parquet")
    assert sorted(jobs["run"]) == sorted(runs["run"])
    assert (jobs["wall_hours"] > 0).all() and (jobs["peak_memory_bytes"] > 0).all()
    forecast = pd.read_parquet(out / "forecast.parquet")
    assert forecast["finished"].all() and forecast["actual_hours"].notna().all()
    # The kept plan again on each offer: the cheapest one is marked, once.
    plans = pd.read_parquet(out / "plans.parquet")
    assert plans[plans["scenario"] == "kept plan"]["cheapest"].sum() == 1
    summary = (out / "summary.txt").read_text()
    assert f"Measured: {len(runs)} finished run(s)" in summary
    assert "Cheapest: " in summary
    # The floor is priced from its timed fit and predictions, and is a candidate exactly when
    # the evaluation shows the chosen cell below it; the first line names what to keep.
    from campaign.budget.stage import floors_at_bar

    floors_json = finished_campaign / "results" / "evaluation" / "floor_timings.json"
    timed = json.loads(floors_json.read_text())["floors"]
    assert all(t["fit_seconds"] > 0 for t in timed.values())
    from campaign.evaluate import read_decisions

    decisions = read_decisions(finished_campaign / "results/evaluation/decisions.json")
    equal = pd.read_parquet(out / "equal_quality.parquet")
    floors = equal[equal["kind"] == "floor"]
    assert sorted(floors["variant"]) == floors_at_bar(decisions)
    assert (floors["train_cost"] > 0).all() and (floors["throughput"] > 0).all()
    # The tiny campaign's 20-step fine-tunes are far below TF-IDF (about 0.2 against 0.9 on
    # test): the evaluation keeps the floor, and the budget's first line says so.
    assert decisions.verdict.kind == "floor"
    keep = equal[equal["cheapest"]].iloc[0]
    assert keep["kind"] == "floor"
    first = summary.partition("\n\n")[2].splitlines()[0]  # after the verdict block
    assert first.startswith(f"Keep the reference floor {keep['variant']}: the chosen cell ")
    # quantization.runs: representative picks, from the runs' predictions on decide_on by the
    # evaluation's metric, the cell and the run the evaluation calls chosen and representative.
    import yaml

    from campaign.quantize import select_representative
    from campaign.quantize.targets import criterion, run_cells, run_scores

    params = yaml.safe_load((finished_campaign / "params.yaml").read_text())
    split, metric = params["evaluation"]["decide_on"], params["evaluation"]["metric"]
    runs = sorted((finished_campaign / "results" / "runs").glob(f"*/predictions_{split}.parquet"))
    splits = {
        x: finished_campaign / "results" / "data" / "splits" / f"{x}.parquet"
        for x in ("train", "validation", "test")
    }
    scores = run_scores(runs, splits, split, metric)
    picked = select_representative(scores, run_cells(params), criterion(split, metric))
    assert picked["cell"] == decisions.best_cell.cell
    assert picked["runs"] == [decisions.best_cell.representative_run]
    # The tables come from wall times recorded upstream; from those bytes they are the same
    # bytes every time (reproduce compares them).
    again = snakemake(finished_campaign, "-n", "results/budget/summary.txt")
    assert "Nothing to be done" in again.stdout + again.stderr
