"""A campaign that decides an outside trainer against the built-in loop: the finished tiny
campaign with a factor over train.command (builtin and a named HF Trainer command, the example
in examples/), run again by Snakemake. The plan lists both trainers by name at both seeds, the
built-in runs are the finished campaign's (not retrained: the named commands are in no run's
id), the command's runs are trained by the example, scored by the campaign on the same items,
and the evaluation compares the two trainers with the seed x item statistics it uses for any
factor."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_generation_e2e import generation_campaign  # noqa: F401 (the session's fixture)

from campaign.core.io import read_plan
from conftest import copy_finished, snakemake, stage_keys

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

    assert_decided(project, "train.command builtin -> hf", n_items=len(ours))


def assert_decided(project: Path, subject: str, n_items: int) -> None:
    """The evaluation compared the trainers on validation at both seeds over every item, and
    the summary states the decision."""
    comparisons = pd.read_parquet(project / "results" / "evaluation" / "comparisons.parquet")
    effect = comparisons[
        (comparisons["kind"] == "main") & (comparisons["split"] == "validation")
    ].set_index("subject")
    row = effect.loc[subject]
    assert row["n_seeds"] == 2 and row["n_items"] == n_items
    assert row["ci_low"] <= row["estimate"] <= row["ci_high"]
    summary = (project / "results" / "evaluation" / "summary.txt").read_text()
    line = next(x for x in summary.splitlines() if x.startswith(subject))
    assert row["decision"] in line, line
    if row["adj_low"] == row["adj_high"]:
        # No item and no seed differ (both trainers on the items' ceiling): nothing is ruled out.
        assert row["decision"] == "inconclusive", line


TRL = "examples/trl_sft_generation.py"


def decide_trl_beside_builtin(project: Path) -> dict:
    """The finished generative campaign run again by Snakemake with a factor over the trainer:
    builtin (the finished campaign's lr 1e-2 runs) and the TRL SFTTrainer example. Returns what
    the test asserts on: the plan's runs by (level, seed), the train keys before and after."""
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    before = read_plan(project / "results" / "plan" / "runs.tsv")
    lr = params["train"]["lr"]
    builtin = {r["seed"]: r["run"] for r in before.rows if float(r["train.lr"]) == lr}
    trained_before = len(stage_keys(project, "train"))
    params["train"]["commands"] = {
        "trl": {"argv": ["python", TRL], "files": [TRL], "packages": ["trl", "transformers"]}
    }
    params["train"]["command"] = "builtin"
    params["ablation"]["factors"] = {"train": {"command": ["builtin", "trl"]}}
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    snakemake(project, timeout=1500)
    plan = read_plan(project / "results" / "plan" / "runs.tsv")
    return {
        "plan": plan,
        "runs": {(r["train.command"], r["seed"]): r["run"] for r in plan.rows},
        "builtin_before": builtin,
        "trained": len(stage_keys(project, "train")) - trained_before,
    }


@pytest.mark.slow(minutes=6)
def test_the_trl_examples_runs_are_decided_beside_a_builtin_generation_run(
    generation_campaign,  # noqa: F811 (the fixture imported above)
    tmp_path,
):
    """The issue's must-show: the TRL example trains the generative cell at both seeds, the
    campaign generates and scores its answers on the built-in runs' items, and the evaluation
    decides `train.command builtin -> trl` on the generated token F1. The built-in cell is the
    finished campaign's (a store hit, not retrained). TRL's resume gives the weights of an
    uninterrupted run bit for bit on CPU (tests/train/test_command_trl.py); here each run is
    trained once. On this fixture both trainers answered every validation item exactly at both
    seeds (token F1 1.0), so the decision measured here sits on the items' ceiling."""
    project = copy_finished(generation_campaign, tmp_path / "project")
    got = decide_trl_beside_builtin(project)
    assert got["plan"].factors == ("train.command",)
    assert sorted(got["runs"]) == [("builtin", 1), ("builtin", 2), ("trl", 1), ("trl", 2)]
    assert {s: got["runs"]["builtin", s] for s in (1, 2)} == got["builtin_before"]
    assert got["trained"] == 2  # the two TRL runs; the built-in ones came from the store
    runs = project / "results" / "runs"
    for seed in (1, 2):
        manifest = json.loads((runs / got["runs"]["trl", seed] / "run_manifest.json").read_text())
        assert manifest["trainer"]["argv"] == ["python", TRL]
        ours = pd.read_parquet(runs / got["runs"]["trl", seed] / "predictions_validation.parquet")
        theirs = pd.read_parquet(
            runs / got["runs"]["builtin", seed] / "predictions_validation.parquet"
        )
        # The same items, each generated by the campaign (its evaluation scores the texts).
        assert list(ours["id"]) == list(theirs["id"])
        assert "score" not in ours.columns and (ours["tokens"] > 0).all()

    decisions = json.loads((project / "results/evaluation/decisions.json").read_text())
    assert decisions["metric"] == "token_f1"
    assert_decided(project, "train.command builtin -> trl", n_items=len(ours))
