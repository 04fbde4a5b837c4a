"""A campaign that decides an outside trainer against the built-in loop: the finished tiny
campaign with a factor over train.command (builtin and a named HF Trainer command, the example
in examples/), run again by Snakemake. The plan lists both trainers by name at both seeds, the
built-in runs are the finished campaign's (not retrained: the named commands are in no run's
id), the command's runs are trained by the example, scored by the campaign on the same items,
and the evaluation compares the two trainers with the seed x item statistics it uses for any
factor."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from campaign.core.io import read_plan
from conftest import snakemake, stage_keys

EXAMPLE = "examples/hf_trainer_classification.py"


@pytest.mark.slow(minutes=4)
def test_a_campaign_decides_a_named_command_beside_the_builtin_loop(finished_project):
    project = finished_project
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    before = read_plan(project / "results" / "plan" / "runs.tsv")
    builtin_runs = {r["seed"]: r["run"] for r in before.rows if r["train.lr"] == "0.001"}
    trained_before = len(stage_keys(project, "train"))
    params["train"]["commands"] = {
        "hf": {"argv": ["python", EXAMPLE], "files": [EXAMPLE], "packages": ["transformers"]}
    }
    params["train"]["command"] = "builtin"
    params["ablation"]["factors"] = {"train": {"command": ["builtin", "hf"]}}
    path.write_text(yaml.safe_dump(params, sort_keys=False))

    snakemake(project, timeout=900)

    plan = read_plan(project / "results" / "plan" / "runs.tsv")
    assert plan.factors == ("train.command",)
    by_level = {(r["train.command"], r["seed"]): r["run"] for r in plan.rows}
    assert sorted(by_level) == [("builtin", 1), ("builtin", 2), ("hf", 1), ("hf", 2)]
    # The built-in cell is the finished campaign's lr 1e-3 cell: the same runs, not retrained.
    assert {s: by_level["builtin", s] for s in (1, 2)} == builtin_runs
    assert len(stage_keys(project, "train")) == trained_before + 2
    runs = project / "results" / "runs"
    for seed in (1, 2):
        manifest = json.loads((runs / by_level["hf", seed] / "run_manifest.json").read_text())
        assert manifest["trainer"] == {"kind": "command", "argv": ["python", EXAMPLE],
                                       "files": [EXAMPLE]}  # fmt: skip
        ours = pd.read_parquet(runs / by_level["hf", seed] / "predictions_validation.parquet")
        theirs = pd.read_parquet(
            runs / by_level["builtin", seed] / "predictions_validation.parquet"
        )
        assert list(ours["id"]) == list(theirs["id"])  # the same items, scored the same way

    comparisons = pd.read_parquet(project / "results" / "evaluation" / "comparisons.parquet")
    effect = comparisons[
        (comparisons["kind"] == "main") & (comparisons["split"] == "validation")
    ].set_index("subject")
    row = effect.loc["train.command builtin -> hf"]
    assert row["n_seeds"] == 2 and row["n_items"] == len(ours)
    assert row["ci_low"] <= row["estimate"] <= row["ci_high"]
    summary = (project / "results" / "evaluation" / "summary.txt").read_text()
    assert "train.command builtin -> hf" in summary
