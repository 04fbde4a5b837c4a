"""The plan's order and cut: control, main effects, interactions, higher orders, extra seeds,
cheaper first within a tier; deterministic; priorities follow it; runs.tsv's columns; what a cut
costs in estimability, in words."""

import copy
import csv
from types import SimpleNamespace

import pytest

from campaign.core.errors import CampaignError
from campaign.core.params import load_params
from campaign.plan import plan_runs, run_priorities
from campaign.plan.columns import kept_in_table
from campaign.plan.planner import stage_plan_table, table_spec
from campaign.plan.summary import report_lines

# The rates and sizes of test_projection: the 100-step baseline recipe there is 57.1 s.
RATES = {"steps_per_s": 2.0, "eval_seconds_per_example": 0.01, "checkpoint_save_seconds": 0.5}
SIZES = {
    "checkpoint_bytes": 1000,
    "model_bytes": 300,
    "prediction_bytes": 50,
    "log_bytes": 20,
    "validation_examples": 100,
    "test_examples": 60,
}


@pytest.fixture()
def params():
    p = load_params("params.yaml")
    p["train"].update(lr=1.0e-3, max_length=64, warmup_steps=10)
    p["ablation"].update(design="full", seeds=[1, 2], max_runs=1000)
    p["ablation"]["factors"] = {"train": {"lr": [1.0e-3, 3.0e-3], "max_length": [64, 32]}}
    return p


def levels(run):
    return tuple(v for _, v in run.cell)


def test_full_2x2_order_by_hand(params):
    runs = plan_runs(params)
    # control; the two main-effect cells, max_length 32 first (half the padded tokens of lr's
    # cell, which trains at 64); the interaction cell; then all of it again at seed 2.
    assert [(levels(r), r.seed, r.tier) for r in runs] == [
        ((1.0e-3, 64), 1, "control"),
        ((1.0e-3, 32), 1, "main"),
        ((3.0e-3, 64), 1, "main"),
        ((3.0e-3, 32), 1, "interaction"),
        ((1.0e-3, 64), 2, "extra_seed"),
        ((1.0e-3, 32), 2, "extra_seed"),
        ((3.0e-3, 64), 2, "extra_seed"),
        ((3.0e-3, 32), 2, "extra_seed"),
    ]
    assert [r.rank for r in runs] == list(range(8))


def test_3x3x3_tiers_count_by_hand(params):
    params["ablation"]["seeds"] = [1]
    params["ablation"]["factors"] = {
        "train": {
            "lr": [1.0e-3, 3.0e-3, 1.0e-2],
            "max_length": [64, 32, 128],
            "warmup_steps": [10, 0, 20],
        }
    }
    tiers = [r.tier for r in plan_runs(params)]
    # 1 + 3 × 2 main-effect parameters; 3 pairs × 2 × 2 interaction parameters; the other 8
    # cells (all three factors moved) only add to the three-factor interaction.
    assert tiers == ["control"] + ["main"] * 6 + ["interaction"] * 12 + ["higher_order"] * 8


def test_order_and_cut_are_deterministic_and_independent_of_listing(params):
    a = [r.run_id for r in plan_runs(params)]
    assert a == [r.run_id for r in plan_runs(copy.deepcopy(params))]
    # The levels listed in another order: the same runs in the same order (ties break on the
    # design's order only among equally useful, equally cheap cells).
    params["ablation"]["factors"]["train"]["max_length"] = [32, 64]
    assert [r.run_id for r in plan_runs(params)][:2] == a[:2]
    assert set(r.run_id for r in plan_runs(params)) == set(a)


def test_priorities_follow_the_order(params):
    runs = plan_runs(params)
    priority = run_priorities(params)
    assert [priority[r.run_id] for r in runs] == list(range(len(runs), 0, -1))


def measured():
    report = {"disk": {"details": SIZES}}
    measurements = {
        "throughput": {"details": {"rates": RATES}},
        "disk": {"details": {"free_bytes": 10**12, "timings_bytes": 0}},
    }
    return report, measurements


def write_table(tmp_path, params):
    import json

    report, measurements = measured()
    (tmp_path / "report.json").write_text(json.dumps(report))
    (tmp_path / "measurements.json").write_text(json.dumps(measurements))
    spec = json.loads(json.dumps(table_spec(params), sort_keys=True))  # as the runner passes it
    ctx = SimpleNamespace(
        spec=spec,
        inputs={
            "preflight_report": [tmp_path / "report.json"],
            "preflight_measurements": [tmp_path / "measurements.json"],
        },
        outputs={"runs": tmp_path / "runs.tsv", "report": tmp_path / "report.txt"},
        work_dir=tmp_path,
    )
    stage_plan_table(ctx)
    with open(tmp_path / "runs.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return rows, (tmp_path / "report.txt").read_text()


def test_runs_tsv_columns_and_the_budget_cut(tmp_path, params):
    # Each run of the 100-step baseline recipe is 57.1 s at the test rates (test_projection);
    # at max_length 32 its 50 s of steps halve: 32.1 s. A budget of 150 s holds the control,
    # the max_length cell and the lr cell (146.3 s), not the interaction cell.
    for key, value in (("max_steps", 100), ("eval_every", 30), ("checkpoint_every", 40)):
        params["train"][key] = value
    params["train"].update(keep_checkpoints=2, micro_batch=8, grad_accum=2)
    params["ablation"]["budget_hours"] = 150 / 3600
    rows, report = write_table(tmp_path, params)
    assert list(rows[0]) == [
        "run",
        "train.lr",
        "train.max_length",
        "seed",
        "tier",
        "cell_id",
        "projected_hours",
        "cumulative_hours",
        "projected_bytes",
        "kept",
    ]
    assert [r["tier"] for r in rows] == ["control", "main", "main", "interaction"] + [
        "extra_seed"
    ] * 4
    assert [float(r["projected_hours"]) * 3600 for r in rows[:4]] == pytest.approx(
        [57.1, 32.1, 57.1, 32.1], abs=0.01
    )
    assert float(rows[2]["cumulative_hours"]) * 3600 == pytest.approx(146.3, abs=0.01)
    assert [r["kept"] for r in rows] == ["true"] * 3 + ["false"] * 5
    assert kept_in_table(tmp_path / "runs.tsv") == [r["run"] for r in rows[:3]]
    assert "cut 5 by budget_hours (0.0416667 h)" in report
    # The interaction is lost; the main effects keep their verdict, at one seed.
    costs = report.split("what the cut costs:\n")[1].splitlines()
    assert costs[0] == (
        "  lr main effect: estimable, clear of two-factor interactions (2 seeds per contrast)  →  "
        "estimable at the control's values of the other factors, not averaged over them "
        "(1 seed per contrast)"
    )
    assert (
        "  lr × max_length interaction: estimable (2 seeds per contrast)  →  not estimable: "
        "no kept cell moves both" in costs
    )


def test_a_cut_that_removes_a_main_effect_is_reported_in_words(params):
    params["ablation"].update(seeds=[1], max_runs=2)
    spec = table_spec(params)
    lines = report_lines(spec, spec["rows"])
    assert "kept 2 of 4 runs; cut 2 by max_runs (2)" in lines
    costs = lines[lines.index("what the cut costs:") + 1 :]
    assert costs[0] == "  main effects no longer estimable: lr"
    assert (
        "  lr main effect: estimable, clear of two-factor interactions (1 seed per contrast)  →  "
        "not estimable: no kept cell moves it; lr = 0.003 not run"
    ) in costs


def test_one_at_a_time_says_interactions_are_not_estimable(params):
    params["ablation"].update(design="one_at_a_time", seeds=[1, 2, 3])
    spec = table_spec(params)
    lines = report_lines(spec, spec["rows"])
    assert lines[0].startswith("design one_at_a_time: 3 cells × 3 seeds = 9 runs; the control")
    assert (
        "  lr main effect: estimable at the control's values of the other factors, not averaged "
        "over them (3 seeds per contrast)"
    ) in lines
    assert "  lr × max_length interaction: not estimable: no cell moves both" in lines


def test_the_free_disk_is_measured_when_the_plan_is_made_not_replayed(tmp_path, params):
    """The issue's case: the preflight measured 0 bytes free (a full disk) and its entry holds
    that number; the user freed space and reran, and the plan failed again with "0.00 GiB free"
    because the measurement came back from the store. The plan stage, run through the store's
    runner as the rule runs it, measures the free space itself."""
    import json
    import shutil

    from campaign.core.runner import run_stage
    from campaign.core.store import Store

    report, measurements = measured()
    measurements["disk"]["details"]["free_bytes"] = 0  # recorded while the disk was full
    (tmp_path / "report.json").write_text(json.dumps(report))
    (tmp_path / "measurements.json").write_text(json.dumps(measurements))
    inputs = {
        "preflight_report": [tmp_path / "report.json"],
        "preflight_measurements": [tmp_path / "measurements.json"],
    }
    store = Store(tmp_path / "state")

    def plan_table(margin: float, out: str):
        params["preflight"]["disk_margin"] = margin
        spec = json.loads(json.dumps(table_spec(params), sort_keys=True))
        outputs = {"runs": tmp_path / out / "runs.tsv", "report": tmp_path / out / "report.txt"}
        return run_stage("plan_table", spec, inputs, outputs, store, tmp_path)

    # The space free now holds the plan (a few KiB): it passes, whatever the preflight recorded.
    assert plan_table(0.2, "a").key and (tmp_path / "a" / "runs.tsv").is_file()
    # A plan larger than the disk: the message gives the space free now, not the recorded 0.
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(CampaignError) as info:
        plan_table(1.0e15, "b")
    message = str(info.value)
    shown = float(message.split(" and ")[1].split(" GiB")[0])
    assert message.endswith("GiB are free now") and shown > 0, message
    assert shown == pytest.approx(free / 2**30, rel=0.05, abs=0.05)
    assert not (tmp_path / "b").exists()
