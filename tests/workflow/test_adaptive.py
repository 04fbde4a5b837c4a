"""An adaptive tiny campaign, run by Snakemake from a finished fixed one: the first look
appends a seed to every cell of the open contrast (with the ids a fixed plan listing that seed
gives), the second stops the cell below the floor and so ends the campaign, the evaluation
decides on the last look's repeated intervals, `campaign status` tells the looks, and the
campaign run again from an empty results folder is all store hits."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import yaml

from campaign.core.io import cell_id
from campaign.plan import plan_runs
from conftest import campaign, events, snakemake


def test_adaptive_campaign_appends_seeds_to_the_open_contrast_then_reruns_as_store_hits(
    finished_project,
):
    path = finished_project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    params["ablation"]["adaptive"] = {"enabled": True, "max_looks": 3, "max_seeds": 4}
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    n_events = len(events(finished_project))
    snakemake(finished_project, timeout=1500)

    looks = finished_project / "results" / "adaptive"
    first = json.loads((looks / "look_1.json").read_text())
    last = json.loads((looks / "look_2.json").read_text())
    # The tiny cells cannot be told apart at 2 seeds: the contrast is open, every cell gets its
    # third seed, with the id a fixed plan with seeds [1, 2, 3] gives that cell and seed.
    assert {r["status"] for r in first["rows"]} == {"open"} and not first["final"]
    fixed = {**params, "ablation": {**params["ablation"], "seeds": [1, 2, 3]}}
    third = {r.run_id for r in plan_runs(fixed) if r.seed == 3}
    assert set(first["appended"]) == third and len(third) == len(first["seeds"])
    assert first["seeds"] == dict.fromkeys(first["seeds"], 3)
    # Look 2: the tiny model is far below TF-IDF + logistic regression; the non-control cell
    # stops (below the floor; the control never stops, every contrast needs it), so its
    # questions stop and the campaign ends a look before the last planned one.
    control = cell_id(dict(plan_runs(fixed)[0].cell))
    assert [c for c in last["stopped"]] == [c for c in last["seeds"] if c != control]
    assert all(why.startswith("below the floor") for why in last["stopped"].values())
    assert {r["status"] for r in last["rows"]} == {"stopped"}
    assert last["final"] and last["look"] == 2 and last["appended"] == []
    assert last["runs"] == first["runs"]
    new = events(finished_project)[n_events:]
    trained = [e["event"] for e in new if e["stage"] == "train" and e["event"] != "commit"]
    assert trained == ["miss", "miss"]  # the two appended runs; the plan's 4 were there
    # The evaluation decides the effect on the looks' repeated intervals (intersected).
    decisions = json.loads((finished_project / "results/evaluation/decisions.json").read_text())
    main = [d for d in decisions["decisions"] if d["kind"] == "main"]
    rows = [next(r for r in look["rows"] if r["kind"] == "main") for look in (first, last)]
    low, high = max(r["rci_low"] for r in rows), min(r["rci_high"] for r in rows)
    assert [(d["adj_low"], d["adj_high"]) for d in main] == [(low, high)]
    status = campaign(finished_project, "status", check=False).stdout
    assert "Adaptive looks:" in status
    # The budget, the index and status count the last look's runs: the 2 appended ones too,
    # not the 2 candidates (seed 4) no look asked for.
    # (Snakemake's summary marks the plan's 4 training jobs stale here, and does not list the
    # appended ones: their job records say they are trained.)
    told = next(line for line in status.splitlines() if line.startswith("adaptive:"))
    assert told.startswith(
        "adaptive: look 2 (the last) asks for 6 runs (2 appended by the looks): "
    ), status
    trained = int(told.split(": ")[2].split(" trained")[0])
    stale = int(told.split(" stale")[0].rsplit(" ", 1)[1]) if " stale" in told else 0
    assert trained >= 2 and trained + stale == 6 and told.endswith("0 running, 0 to do"), told
    results = finished_project / "results"
    summary = (results / "budget" / "summary.txt").read_text()
    assert (
        "Adaptive campaign, last look (2) taken: the kept plan is the 6 run(s) it lists (2 "
        "appended by the looks); 2 adaptive run(s) (" in summary
    )
    forecast = pd.read_parquet(results / "budget" / "forecast.parquet").set_index("run")
    assert sorted(forecast.index) == sorted(last["runs"])
    assert forecast["kept"].all() and forecast["finished"].all()
    index = pd.read_parquet(results / "index.parquet")
    runs = index[index["kind"] == "run"].set_index("run")
    looked = runs["added_at_look"]
    assert sorted(looked.index) == sorted(last["runs"])
    assert looked[first["appended"]].tolist() == [1, 1]
    assert looked.drop(first["appended"]).isna().all()

    # Run again from no results: every stage, the looks and the appended runs too, a store hit.
    shutil.rmtree(finished_project / "results")
    n_events = len(events(finished_project))
    snakemake(finished_project, timeout=900)
    again = events(finished_project)[n_events:]
    assert [e for e in again if e["event"] != "hit"] == []
    assert sum(e["stage"] == "train" for e in again) == 6
    assert sum(e["stage"] == "look" for e in again) == 2
