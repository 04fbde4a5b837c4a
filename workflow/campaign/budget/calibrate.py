"""Forecast calibration: how far the plan's projected hours were from what runs really took, and
the correction that the runs still to come get from the finished ones.

Every finished run gives its projection (the plan table's projected hours) and two measured
phases from its timings.json: the training steps (`train_seconds`) and the rest of the job
(`wall_seconds - train_seconds`: start-up, data and tokenizer, evaluation passes, writing the
outputs). The plan scales the step phase with the recipe (steps, tokens per step) but not the
rest, so each phase gets its own correction:

    forecast = projected x step factor + job overhead

with the step factor = median(train_seconds / projected) and the overhead = median(wall -
train) over the finished runs, each with a percentile bootstrap interval over runs (medians:
one slow job moves neither). A run without a step time counts as all steps (overhead 0).

The forecast error is measured the way the forecast is used: each run in the plan's order is
forecast from the runs that finished before it only (no run forecasts itself), once `min_pairs`
of them have.

Shapes: `projected, steps, wall: (n_runs,)` hours, in the plan's order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Factor:
    """A median over `n` finished runs and its bootstrap interval (NaN with fewer than 2)."""

    value: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class Calibration:
    steps: Factor  # measured step hours / projected hours
    overhead_hours: Factor  # per job: wall - step hours

    def forecast(self, projected_hours: float) -> float:
        return projected_hours * self.steps.value + self.overhead_hours.value

    def words(self) -> str:
        n = self.steps.n
        if n == 0:
            return "no finished run: projections are not corrected"
        s, o = self.steps, self.overhead_hours
        text = f"steps x{s.value:.3g}, + {o.value * 3600:.3g} s a job (median of {n} runs"
        if n >= 2:
            text += (
                f"; 95 % intervals x{s.low:.3g}-{s.high:.3g} and "
                f"{o.low * 3600:.3g}-{o.high * 3600:.3g} s"
            )
        return text + ")"


NO_CALIBRATION = Calibration(Factor(1.0, math.nan, math.nan, 0), Factor(0.0, math.nan, math.nan, 0))


def ratios(projected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """actual / projected per run: (n_runs,). Both in the same unit; projected must be > 0."""
    projected = np.asarray(projected, dtype=np.float64)
    actual = np.asarray(actual, dtype=np.float64)
    if np.any(projected <= 0):
        raise ValueError("projected hours must be positive")
    return actual / projected


def median_interval(
    values: np.ndarray, rng: np.random.Generator | None, resamples: int, confidence: float = 0.95
) -> Factor:
    """The median of `values: (n_runs,)` with a percentile bootstrap interval over runs (none
    without a Generator or with fewer than two values: one value says nothing of the spread)."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if n == 0:
        return Factor(math.nan, math.nan, math.nan, 0)
    point = float(np.median(values))
    if n == 1 or rng is None:
        return Factor(point, math.nan, math.nan, n)
    draws = np.median(values[rng.integers(0, n, size=(resamples, n))], axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return Factor(point, float(low), float(high), n)


def split_phases(steps: np.ndarray, wall: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(step hours, overhead hours) per run; a run without a step time is all steps."""
    steps = np.asarray(steps, dtype=np.float64)
    wall = np.asarray(wall, dtype=np.float64)
    known = np.isfinite(steps)
    step_h = np.where(known, steps, wall)
    return step_h, np.where(known, wall - step_h, 0.0)


def fit(
    projected: np.ndarray,
    steps: np.ndarray,
    wall: np.ndarray,
    rng: np.random.Generator | None = None,
    resamples: int = 0,
) -> Calibration:
    """The calibration from the finished runs (see the module's docstring)."""
    projected = np.asarray(projected, dtype=np.float64)
    step_h, overhead = split_phases(steps, wall)
    scaled = projected > 0  # a projection rounded to 0 h scales nothing
    if not scaled.any():
        return NO_CALIBRATION
    return Calibration(
        median_interval(ratios(projected[scaled], step_h[scaled]), rng, resamples),
        median_interval(overhead, rng, resamples),
    )


def sequential_forecasts(
    projected: np.ndarray, steps: np.ndarray, wall: np.ndarray, min_pairs: int
) -> np.ndarray:
    """(n_runs,) each run's forecast from the runs before it in the order; NaN while fewer
    than `min_pairs` came before (nothing measured to correct with)."""
    projected = np.asarray(projected, dtype=np.float64)
    out = np.full(len(projected), math.nan)
    for i in range(max(min_pairs, 1), len(projected)):
        out[i] = fit(projected[:i], steps[:i], wall[:i]).forecast(float(projected[i]))
    return out


def abs_errors(forecast: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """|forecast - actual| / actual per run: (n_runs,), NaN where there is no forecast."""
    forecast = np.asarray(forecast, dtype=np.float64)
    actual = np.asarray(actual, dtype=np.float64)
    return np.abs(forecast - actual) / actual


def error_summary(projected, steps, wall, min_pairs: int) -> dict:
    """The median absolute forecast error of the later runs (those forecast from at least
    `min_pairs` earlier ones): the plan's projection as it was, and calibrated."""
    projected = np.asarray(projected, dtype=np.float64)
    steps = np.asarray(steps, dtype=np.float64)
    wall = np.asarray(wall, dtype=np.float64)
    calibrated = sequential_forecasts(projected, steps, wall, min_pairs)
    later = ~np.isnan(calibrated)
    raw = abs_errors(projected, wall)
    cal = abs_errors(calibrated, wall)
    return {
        "later_runs": int(later.sum()),
        "median_abs_error_projected": float(np.median(raw[later])) if later.any() else math.nan,
        "median_abs_error_calibrated": float(np.median(cal[later])) if later.any() else math.nan,
    }
