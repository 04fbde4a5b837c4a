"""Forecast calibration on recorded projected/actual pairs: how far the plan table's projection
was from what each run took, and how far the calibrated forecast is (campaign.budget.calibrate).

Every run in the plan's order is forecast from the runs that finished before it only, once
``min_pairs`` of them have (the way the budget stage forecasts the rest of a plan). Three
forecasts per run, each against its measured wall time:
- projected: the plan table's projected hours as they are (the baseline);
- one factor: projected x median(actual / projected) of the earlier runs;
- steps + overhead (the budget stage's): projected x median(step hours / projected) + median
  (wall - step hours) of the earlier runs: the plan scales the steps with the recipe, not the
  job's start-up, data, evaluation and writes, so each phase gets its own correction.

Pairs come from ``tests/budget/recorded_pairs.json`` (recorded from real campaigns of this
project) and from any ``--forecast results/budget/forecast.parquet`` a campaign wrote (its
projected_hours, step_hours and actual_hours columns). Goal (issue 13): median absolute error of
the later runs <= 15 %; a campaign that misses it prints MISSED.

    .venv/bin/python benchmarks/bench_forecast.py
    .venv/bin/python benchmarks/bench_forecast.py --forecast results/budget/forecast.parquet
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from campaign.budget.calibrate import abs_errors, ratios, sequential_forecasts  # noqa: E402

GOAL = 0.15
RECORDED = ROOT / "tests" / "budget" / "recorded_pairs.json"


def one_factor(projected: np.ndarray, wall: np.ndarray, min_pairs: int) -> np.ndarray:
    out = np.full(len(projected), np.nan)
    r = ratios(projected, wall)
    for i in range(max(min_pairs, 1), len(projected)):
        out[i] = projected[i] * float(np.median(r[:i]))
    return out


def report(name: str, c: dict) -> bool:
    projected = np.asarray(c["projected_hours"], dtype=np.float64)
    steps = np.asarray(c["step_hours"], dtype=np.float64)
    wall = np.asarray(c["wall_hours"], dtype=np.float64)
    k = c["min_pairs"]
    single = one_factor(projected, wall, k)
    phased = sequential_forecasts(projected, steps, wall, k)
    later = ~np.isnan(phased)
    print(f"\n{name}: {len(wall)} runs, the last {int(later.sum())} forecast from earlier runs")
    print(f"{'run':<18} {'projected s':>11} {'actual s':>9} {'1-factor s':>10} {'phased s':>9}")
    for i, run in enumerate(c["runs"]):
        print(
            f"{run:<18} {projected[i] * 3600:>11.1f} {wall[i] * 3600:>9.1f} "
            f"{single[i] * 3600:>10.1f} {phased[i] * 3600:>9.1f}"
        )
    if not later.any():
        print("no later runs: nothing to judge")
        return True
    rows = {
        "projected (baseline)": abs_errors(projected, wall)[later],
        "one factor": abs_errors(single, wall)[later],
        "steps + overhead": abs_errors(phased, wall)[later],
    }
    base = float(np.median(rows["projected (baseline)"]))
    print(f"{'forecast':<22} {'median |error|':>14} {'max |error|':>12} {'vs baseline':>12}")
    for label, err in rows.items():
        med = float(np.median(err))
        print(f"{label:<22} {med:>14.1%} {float(err.max()):>12.1%} {med / base:>11.2f}x")
    med = float(np.median(rows["steps + overhead"]))
    ok = med <= GOAL
    print(f"goal: median |error| of later runs <= {GOAL:.0%}: {'met' if ok else 'MISSED'}")
    return ok


def from_forecast(path: Path, min_pairs: int) -> dict:
    import pandas as pd

    f = pd.read_parquet(path)
    f = f[f["finished"]]
    return {
        "min_pairs": min_pairs,
        "runs": f["run"].tolist(),
        "projected_hours": f["projected_hours"].tolist(),
        "step_hours": f["step_hours"].tolist(),
        "wall_hours": f["actual_hours"].tolist(),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--forecast", type=Path, action="append", default=[])
    p.add_argument("--min-pairs", type=int, default=2)
    p.add_argument("--strict", action="store_true", help="exit 1 when a goal is MISSED")
    args = p.parse_args()
    campaigns = json.loads(RECORDED.read_text(encoding="utf-8"))["campaigns"]
    for path in args.forecast:
        campaigns[str(path)] = from_forecast(path, args.min_pairs)
    results = [report(name, c) for name, c in campaigns.items()]
    return 1 if args.strict and not all(results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
