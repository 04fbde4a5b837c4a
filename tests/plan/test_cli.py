"""`campaign plan`: the ordered table, the cut and what the plan can estimate, in words, before
the preflight has measured anything (hours come with the plan table)."""

import json

import yaml

from conftest import campaign


def test_campaign_plan_prints_order_cut_and_estimability(tiny_project):
    path = tiny_project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    params["ablation"]["factors"]["train"]["max_length"] = [32, 16]
    params["ablation"].update(seeds=[1], max_runs=2)
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    out = campaign(tiny_project, "plan").stdout
    lines = out.splitlines()
    assert lines[0].startswith("design full: 4 cells × 1 seed = 4 runs; the control (lr 0.001,")
    header = next(line for line in lines if line.startswith("run "))
    assert header.split() == [
        "run",
        "train.lr",
        "train.max_length",
        "seed",
        "tier",
        "cell_id",
        "kept",
    ]
    assert "kept 2 of 4 runs; cut 2 by max_runs (2)" in lines
    assert "projected hours need the preflight's measurements" in out
    assert "  main effects no longer estimable: lr" in lines
    rows = json.loads(campaign(tiny_project, "plan", "--format", "json").stdout)
    assert [(r["tier"], r["kept"]) for r in rows] == [
        ("control", True),
        ("main", True),
        ("main", False),
        ("interaction", False),
    ]
