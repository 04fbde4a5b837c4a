"""Forecast calibration on hand-computed pairs and on pairs recorded from a real campaign."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from campaign.budget.calibrate import (
    error_summary,
    fit,
    median_interval,
    sequential_forecasts,
    split_phases,
)

RECORDED = Path(__file__).with_name("recorded_pairs.json")


def test_steps_and_overhead_are_corrected_apart():
    # Projected 1 h each; steps took 2, 2, 4 h; wall 3, 3, 5 h (1 h of overhead each).
    # Step factor = median(2, 2, 4) = 2; overhead = 1 h: a 3 h projection -> 3 x 2 + 1 = 7 h.
    cal = fit(np.array([1.0, 1.0, 1.0]), np.array([2.0, 2.0, 4.0]), np.array([3.0, 3.0, 5.0]))
    assert (cal.steps.value, cal.overhead_hours.value) == (2.0, 1.0)
    assert cal.forecast(3.0) == 7.0


def test_a_projection_of_zero_hours_scales_nothing():
    # The 0 h run (a projection rounded away) still counts for the overhead: median(1, 1) = 1.
    cal = fit(np.array([0.0, 1.0]), np.array([0.5, 2.0]), np.array([1.5, 3.0]))
    assert (cal.steps.value, cal.steps.n, cal.overhead_hours.value) == (2.0, 1, 1.0)


def test_a_run_without_a_step_time_is_all_steps():
    steps, overhead = split_phases(np.array([math.nan, 1.0]), np.array([3.0, 2.0]))
    assert steps.tolist() == [3.0, 1.0] and overhead.tolist() == [0.0, 1.0]


def test_each_run_is_forecast_from_the_runs_before_it_only():
    # No overhead (steps = wall). Ratios 2, 2, 4, 2; min_pairs 2: run 3 gets median(2, 2) = 2
    # -> 2 h against 4 h (50 % off); run 4 gets median(2, 2, 4) = 2 -> 2 h, exact.
    projected = np.ones(4)
    wall = np.array([2.0, 2.0, 4.0, 2.0])
    got = sequential_forecasts(projected, wall, wall, min_pairs=2)
    assert np.isnan(got[:2]).all() and got[2:].tolist() == [2.0, 2.0]
    summary = error_summary(projected, wall, wall, min_pairs=2)
    assert summary["later_runs"] == 2
    assert summary["median_abs_error_calibrated"] == pytest.approx(0.25)  # median(0.5, 0)
    assert summary["median_abs_error_projected"] == pytest.approx(0.625)  # median(.75, .5)
    # Run 2 sees run 1 only (2 h), never itself (the median of 2 and 4 would be 3 h).
    two = sequential_forecasts(np.ones(2), np.array([2.0, 4.0]), np.array([2.0, 4.0]), 1)
    assert math.isnan(two[0]) and two[1] == 2.0


def test_the_interval_holds_the_median_and_follows_its_seed():
    values = np.random.default_rng(5).lognormal(1.0, 0.3, size=40)
    a = median_interval(values, np.random.default_rng(0), 1000)
    b = median_interval(values, np.random.default_rng(0), 1000)
    c = median_interval(values, np.random.default_rng(1), 1000)
    assert a == b and a.value == float(np.median(values)) and a.n == 40
    assert a.low <= a.value <= a.high
    assert (a.low, a.high) != (c.low, c.high)
    values = np.array([1.8, 2.1, 2.5, 3.0, 4.3])
    one = median_interval(values[:1], np.random.default_rng(0), 1000)
    assert one.value == 1.8 and math.isnan(one.low) and math.isnan(one.high)


def test_recorded_pairs_the_calibrated_forecast_is_far_closer():
    """Pairs recorded from real campaigns of this project (tests/budget/recorded_pairs.json:
    the plan's projected hours, each run's step and wall hours from its timings.json). The
    plan's projection misses the later runs by over half their time; corrected from the earlier
    runs it misses by well under half of that. (The 15 % goal is judged, and printed, by
    benchmarks/bench_forecast.py: on a machine shared with other jobs, wall times move with the
    load, which no forecast from earlier runs can know.)"""
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    assert recorded["campaigns"]
    for name, c in recorded["campaigns"].items():
        s = error_summary(c["projected_hours"], c["step_hours"], c["wall_hours"], c["min_pairs"])
        assert s["later_runs"] >= 2, name
        assert s["median_abs_error_projected"] > 0.5, (name, s)
        assert s["median_abs_error_calibrated"] < 0.5 * s["median_abs_error_projected"], (name, s)
