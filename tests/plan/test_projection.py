"""The plan table's projection: each run's hours and bytes from the preflight's measurements,
hand-computed, and the plan held against preflight.max_hours and the free disk."""

import pytest

from campaign.core.errors import CampaignError
from campaign.plan.projection import evaluations_per_run, project, run_cost, step_scale

BASELINE = {
    "max_steps": 100,
    "eval_every": 30,
    "checkpoint_every": 40,
    "keep_checkpoints": 2,
    "micro_batch": 8,
    "grad_accum": 2,
    "max_length": 64,
}
RATES = {"steps_per_s": 2.0, "eval_seconds_per_example": 0.01, "checkpoint_save_seconds": 0.5}
SIZES = {
    "checkpoint_bytes": 1000,
    "model_bytes": 300,
    "prediction_bytes": 50,
    "log_bytes": 20,
    "validation_examples": 100,
    "test_examples": 60,
}


def test_evaluations_include_the_last_step():
    assert evaluations_per_run(100, 30) == 4  # 30, 60, 90 and 100
    assert evaluations_per_run(90, 30) == 3


def test_one_run_by_hand():
    cost = run_cost(BASELINE, BASELINE, RATES, SIZES, timings_bytes=5)
    # 100 steps / 2 per s; 4 evaluations x 100 examples x 10 ms; (100 + 60) x 10 ms;
    # ceil(100 / 40) = 3 checkpoint writes x 0.5 s
    assert cost["parts"] == pytest.approx(
        {"train": 50.0, "evaluation": 4.0, "predictions": 1.6, "checkpoints": 1.5}
    )
    assert cost["seconds"] == pytest.approx(57.1)
    # 2 checkpoints kept (the store's work folder); model, predictions, logs and timings twice:
    # in the store and copied into results/
    assert cost["bytes"] == 2 * 1000 + 2 * (300 + 50 + 20 + 5)


def test_a_step_costs_by_its_padded_tokens():
    twice = {**BASELINE, "max_length": 128}
    assert step_scale(twice, BASELINE) == 2.0
    assert step_scale({**BASELINE, "micro_batch": 4, "grad_accum": 4}, BASELINE) == 1.0
    assert run_cost(twice, BASELINE, RATES, SIZES)["parts"]["train"] == pytest.approx(100.0)


def test_a_run_on_two_devices_splits_its_steps_over_them():
    # The preflight measured the baseline's effective batch (2 devices x grad_accum 2) on one
    # process at 2 steps a second: on its 2 devices the 100 steps take 25 s of wall time (50 s
    # on one); evaluation, predictions and checkpoints are rank 0's, as on one device.
    two = {**BASELINE, "devices": 2}
    cost = run_cost(two, two, RATES, SIZES)
    assert cost["parts"] == pytest.approx(
        {"train": 25.0, "evaluation": 4.0, "predictions": 1.6, "checkpoints": 1.5}
    )
    # The same effective batch on one device (grad_accum 4): 50 s of steps.
    one = {**BASELINE, "grad_accum": 4}
    assert run_cost(one, two, RATES, SIZES)["parts"]["train"] == pytest.approx(50.0)


def plan(max_hours=None, disk_margin=0.2, free=10**9):
    spec = {
        "rows": [{"run": "run-a", "seed": 1}, {"run": "run-b", "seed": 2}],
        "recipes": {"run-a": BASELINE, "run-b": {**BASELINE, "max_steps": 200}},
        "baseline": BASELINE,
        "max_hours": max_hours,
        "disk_margin": disk_margin,
    }
    report = {"disk": {"details": SIZES}}
    # The preflight's recorded free disk says nothing: the plan uses the space free now.
    measurements = {
        "throughput": {"details": {"rates": RATES}},
        "disk": {"details": {"free_bytes": 0, "timings_bytes": 0}},
    }
    return spec, report, measurements, free


def test_rows_carry_hours_cumulative_hours_and_bytes():
    rows = project(*plan())
    a, b = (
        run_cost(r, BASELINE, RATES, SIZES)["seconds"] / 3600 for r in plan()[0]["recipes"].values()
    )
    assert [r["run"] for r in rows] == ["run-a", "run-b"]
    assert rows[0]["projected_hours"] == pytest.approx(a, abs=1e-6)
    assert rows[1]["cumulative_hours"] == pytest.approx(a + b, abs=1e-6)
    assert rows[0]["projected_bytes"] == 2740


def test_a_plan_over_max_hours_or_the_disk_stops_in_one_line():
    with pytest.raises(
        CampaignError, match=r"^preflight.max_hours: the plan's 2 kept runs .* over 1e-06 h"
    ):
        project(*plan(max_hours=1e-6))
    project(*plan(max_hours=1.0))  # 2 runs of about a minute fit in an hour
    # 2 x 2740 bytes x 1.2 = 6576 bytes needed
    with pytest.raises(CampaignError, match="^preflight.disk_margin: the plan's 2 kept runs need"):
        project(*plan(free=6575))
    project(*plan(free=6576))


def budget_plan(budget_hours, kept=(True, True)):
    spec, report, measurements, free = plan()
    spec["rows"] = [{**r, "kept": k} for r, k in zip(spec["rows"], kept, strict=True)]
    spec["budget_hours"] = budget_hours
    return spec, report, measurements, free


def test_budget_hours_keeps_the_prefix_whose_cumulative_hours_fit():
    a = run_cost(BASELINE, BASELINE, RATES, SIZES)["seconds"] / 3600  # 57.1 s
    b = run_cost({**BASELINE, "max_steps": 200}, BASELINE, RATES, SIZES)["seconds"] / 3600
    assert [r["kept"] for r in project(*budget_plan(a + b))] == [True, True]
    assert [r["kept"] for r in project(*budget_plan(a + b - 1e-6))] == [True, False]
    # Cumulative hours count every row so far (what going further would cost), kept or not.
    rows = project(*budget_plan(a))
    assert rows[1]["cumulative_hours"] == pytest.approx(a + b, abs=1e-6)
    # A row max_runs already cut stays cut, whatever the budget.
    assert [r["kept"] for r in project(*budget_plan(10.0, kept=(True, False)))] == [True, False]
    # Deterministic: the same inputs, the same rows.
    assert project(*budget_plan(a)) == project(*budget_plan(a))


def test_a_budget_below_the_control_stops_in_one_line():
    with pytest.raises(CampaignError, match=r"^ablation.budget_hours: the control run alone"):
        project(*budget_plan(1e-4))


def test_money_is_a_hook_that_adds_cost_columns_only_with_a_price():
    rows = project(*budget_plan(None), price_per_hour=2.0)
    assert rows[0]["projected_cost"] == pytest.approx(2 * rows[0]["projected_hours"])
    assert rows[1]["cumulative_cost"] == pytest.approx(2 * rows[1]["cumulative_hours"])
    assert "projected_cost" not in project(*budget_plan(None))[0]


def test_a_command_runs_steps_are_timed_at_the_rate_the_preflight_measured_for_it():
    from campaign.plan.planner import cost_recipe

    # The recipe names its trainer: a named command, an inline one; the built-in loop none.
    train = {**BASELINE, "lr": 1e-3}
    assert "trainer" not in cost_recipe({**train, "command": "builtin"})
    assert cost_recipe({**train, "command": "hf"})["trainer"] == "hf"
    assert cost_recipe({**train, "command": {"argv": ["x"]}})["trainer"] == "train.command"
    spec, report, measurements, free = plan()
    spec["recipes"]["run-b"] = {**BASELINE, "trainer": "hf"}
    measurements["command"] = {"details": {"runs": {"hf": {"steps_per_s": 0.5}}}}
    rows = project(spec, report, measurements, free)
    builtin = run_cost(BASELINE, BASELINE, RATES, SIZES)["seconds"]
    # 100 steps at the command's 0.5 per s: 200 s of steps instead of 50, the rest as built-in.
    assert rows[0]["projected_hours"] == pytest.approx(builtin / 3600, abs=1e-6)
    assert rows[1]["projected_hours"] == pytest.approx((builtin + 150) / 3600, abs=1e-6)
    # A command the preflight did not measure: the built-in loop's rate.
    del measurements["command"]
    assert project(spec, report, measurements, free)[1]["projected_hours"] == pytest.approx(
        builtin / 3600, abs=1e-6
    )


def test_a_command_runs_bytes_are_what_the_preflight_saw_it_write_declared_or_not():
    spec, report, measurements, free = plan()
    spec["recipes"]["run-b"] = {**BASELINE, "trainer": "hf"}
    disk = {"checkpoint_bytes": 4000, "model_bytes": 700, "undeclared": {"big.bin": 10**9}}
    measurements["command"] = {"details": {"runs": {"hf": {"steps_per_s": 2.0, "disk": disk}}}}
    rows = project(spec, report, measurements, 10**10)
    # By hand: 2 kept checkpoints, the model, predictions and logs twice, the undeclared once.
    assert rows[0]["projected_bytes"] == 2740  # the built-in loop's run, as before
    assert rows[1]["projected_bytes"] == 4000 * 2 + 2 * (700 + 50 + 20) + 10**9
    # A plan that fits the built-in sizes but not what the command writes stops in one line.
    with pytest.raises(CampaignError, match="preflight.disk_margin"):
        project(spec, report, measurements, 10**9)
