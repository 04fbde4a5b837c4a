"""`campaign compare`'s own path simulated: imported per-item scores (0/1 and in [0, 1]) of
several tasks, decided by campaign.compare.decisions.decide (the evaluate stage's comparisons,
Holm across the tasks, decisions and records). Goals, as the evaluate stage's (bench_stats):
the main effect's 95 % interval covers the true difference 93-97 %; two models of one recipe
(A/A) adopted on any task <= 5 % (family-wise over the tasks); a variant whose true loss equals
the margin adopted as non-inferior on a task <= 2.5 %.

The generator: crossed seeds x items. Item i of a task has difficulty theta_i ~ N(0, 1.2), a
run (model, seed) a seed effect s ~ N(0, 0.15) on the logit scale, the model an effect delta;
a 0/1 score is Bernoulli(expit(mu + theta_i + s + delta)); a score in [0, 1] is
expit(mu + theta_i + s + delta + e), e ~ N(0, 0.5) per run and item. A variant of a run keeps
the run's scores and loses, per item, share c_i of it (0/1: a right item turns wrong with
probability c_i), c_i uniform on [0, 2c] with c the margin over the run's population mean: its
true loss is the margin.

Run: python benchmarks/bench_stats_compare.py [--reps 200] (or bench_stats.py --compare).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from campaign.compare.decisions import Design, decide  # noqa: E402
from campaign.compare.table import check_table  # noqa: E402

MU, ITEM_SD, SEED_SD, NOISE_SD = 0.3, 1.2, 0.15, 0.5
TASKS = 3
MARGIN = 0.02
SETTINGS = ((2, 300, "0/1"), (2, 300, "[0, 1]"), (3, 200, "0/1"))


def _scores(rng, theta, delta: float, kind: str) -> tuple[np.ndarray, float]:
    """One run's per-item scores `(n_items,)` on items of difficulty `theta`, and its seed
    effect."""
    seed_effect = rng.normal(0, SEED_SD)
    eta = MU + theta + seed_effect + delta
    if kind == "0/1":
        return (rng.random(theta.size) < expit(eta)).astype(np.float64), seed_effect
    return expit(eta + rng.normal(0, NOISE_SD, theta.size)), seed_effect


def run_mean(seed_effect: float, kind: str, n: int = 100_000) -> float:
    """A run's population mean score over items (and noise), given its seed effect: the
    variant's true loss is the margin for this run, not on average over runs."""
    rng = np.random.default_rng(12345)
    eta = MU + rng.normal(0, ITEM_SD, n) + seed_effect
    if kind == "0/1":
        return float(expit(eta).mean())
    return float(expit(eta + rng.normal(0, NOISE_SD, n)).mean())


def true_mean(delta: float, kind: str, rng, n: int = 400_000) -> float:
    """The population mean score of a model (over items, seeds and noise)."""
    theta = rng.normal(0, ITEM_SD, n)
    eta = MU + theta + rng.normal(0, SEED_SD, n) + delta
    if kind == "0/1":
        return float(expit(eta).mean())
    return float(expit(eta + rng.normal(0, NOISE_SD, n)).mean())


def _variant(rng, ref: np.ndarray, share: float, kind: str) -> np.ndarray:
    c = rng.uniform(0, 2 * share, ref.size)
    if kind == "0/1":
        return np.where(rng.random(ref.size) < c, 0.0, ref)
    return ref * (1 - c)


def campaign_table(rng, k: int, n: int, kind: str, delta: float, share: float | None,
                   a_mean: float = 1.0):  # fmt: skip
    """The scored-items table of one simulated comparison: models a (control) and b with `k`
    runs each, on TASKS tasks of `n` items; with `share` (the margin over a's population mean
    `a_mean`), a variant v of each of a's runs whose own true loss is the margin."""
    import pandas as pd

    rows = []
    for t in range(TASKS):
        theta = rng.normal(0, ITEM_SD, n)
        items = [f"i{j}" for j in range(n)]
        for seed in range(k):
            (a, effect), (b, _) = _scores(rng, theta, 0.0, kind), _scores(rng, theta, delta, kind)
            runs = {"a": a, "b": b}
            if share is not None:  # the margin for this run of a: share over its own mean
                runs["v"] = _variant(rng, a, share * a_mean / run_mean(effect, kind), kind)
            for model, y in runs.items():
                rows.append(pd.DataFrame({
                    "variant": f"{model}@{seed}", "cell": model, "seed": seed, "split": "test",
                    "task": f"t{t}", "item": items, "score": y, "prediction": None,
                    "metric": "score", "source": "simulated",
                }))  # fmt: skip
    table = pd.concat(rows, ignore_index=True)
    table["seed"] = table["seed"].astype("Int64")
    check_table(table)
    return table


def _one(rng, k, n, kind, delta, share, truth, a_mean=1.0) -> tuple[float, bool, bool]:
    """(share of tasks whose main interval covers `truth`, adopted b on any task, adopted the
    variant on task 0)."""
    design = Design(control="a", variants={"v": "a"} if share is not None else {},
                    margin=MARGIN, resamples=100, seed=int(rng.integers(1 << 30)))  # fmt: skip
    scopes, _ = decide(campaign_table(rng, k, n, kind, delta, share, a_mean), design)
    covered, adopted, ni = [], False, False
    for s in scopes:
        main = s.decisions.of_kind("main")[0]
        covered.append(main.ci_low <= truth <= main.ci_high)
        adopted |= main.decision.startswith("adopt")
        ni |= (
            any(d.decision == "adopt" for d in s.decisions.of_kind("quantized")) and s.name == "t0"
        )
    return float(np.mean(covered)), adopted, ni


def run(reps: int, seed: int, settings=SETTINGS, real_difference: bool = True) -> list[tuple]:
    """[(setting, goal, observed, low, high)] over `reps` simulated comparisons per setting."""
    out = []
    for k, n, kind in settings:
        rng = np.random.default_rng([seed, k, n, len(kind)])
        a_mean = true_mean(0.0, kind, rng)
        share = MARGIN / a_mean
        # A/A with a variant at the margin: b is a's recipe again (truth 0).
        got = [_one(rng, k, n, kind, 0.0, share, 0.0, a_mean) for _ in range(reps)]
        setting = f"{k} seeds x {n} items x {TASKS} tasks, {kind}"
        cov, aa, ni = (float(np.mean(col)) for col in zip(*got, strict=True))
        out += [
            (setting, "A/A: main interval covers 0 (per task)", cov, 0.93, 0.97),
            (setting, "A/A: b adopted on any task (family-wise)", aa, 0.0, 0.05),
            (setting, "variant at a loss = the margin adopted (task 0)", ni, 0.0, 0.025),
        ]
        if not real_difference:
            continue
        # A real difference: coverage of its true value on each task.
        delta = 0.25
        truth = true_mean(delta, kind, rng) - a_mean
        got = [_one(rng, k, n, kind, delta, None, truth) for _ in range(reps)]
        per_task = float(np.mean([g[0] for g in got]))
        what = f"main interval covers a true {truth * 100:+.1f} points (per task)"
        out.append((setting, what, per_task, 0.93, 0.97))
    return out


def print_rows(rows: list[tuple], reps: int) -> bool:
    """Print the rows with their Monte Carlo error; True where a goal is missed by more than two
    Monte Carlo standard errors."""
    missed = False
    for setting, goal, value, low, high in rows:
        se = math.sqrt(max(value * (1 - value), 1 / reps) / reps)
        bad = value < low - 2 * se or value > high + 2 * se
        missed |= bad
        print(f"  {setting:<34} {goal:<50} {value * 100:5.1f}% +/- {se * 100:.1f}  "
              f"{low * 100:.1f}-{high * 100:.1f} %{'  MISSED' if bad else ''}")  # fmt: skip
    return missed


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--continuous-only", action="store_true",
                        help="only the A/A and variant rows on scores in [0, 1]")  # fmt: skip
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"campaign compare's path, {args.reps} simulated comparisons per row:")
    settings = [s for s in SETTINGS if s[2] != "0/1"] if args.continuous_only else SETTINGS
    rows = run(args.reps, args.seed, settings, not args.continuous_only)
    missed = print_rows(rows, args.reps)
    print(f"{time.perf_counter() - start:.0f} s")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
