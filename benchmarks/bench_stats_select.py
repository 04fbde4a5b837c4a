"""Checkpoint choice (train.select: best_generated) and the headline, on the shipped path.

A generation campaign of two cells x k seeds: each run is judged at STEPS evaluation points on a
fixed validation subsample of SUBSAMPLE items (model.generation.eval_items: the same items at
every step and in every run), campaign.train.select.chosen_step keeps the step whose generations
scored best, and the chosen step's model is scored on the validation and test splits; the
evaluation (stage._comparisons -> stage._decide -> questions.public -> records.build, through
bench_stats.verdict_of) keeps a cell on validation and reports its headline on test.

The model (logit scale, as bench_stats' verdict rows): a run's step t has true quality
curve_c(t) + u_cs + e_cst, a learning curve per cell (CURVES: one that rises and flattens, one
that rises then falls), a seed effect u_cs ~ N(0, run_sd) that persists across steps, and
step-to-step noise e_cst ~ N(0, STEP_SD). An item's score on a step's model is Bernoulli
(0/1 scores) of expit(a_i + g_ci + quality): item difficulty a_i ~ N(logit 0.8, 1.5) and
item x cell g_ci ~ N(0, 0.4), shared by every run and step, crossed with the seeds.

The truth of a cell (the recipe with selection): the mean over the seed population, the
subsample's draw and the item population of the chosen step's true quality, E f(quality(t*)),
f(q) = E_items expit(a + g + q), by Monte Carlo over TRUTH_RUNS runs each choosing its step
through chosen_step. Goals: the truth below the kept cell's reported (test) interval <= 2.5 %,
above <= 2.5 %. For contrast, no goal met by design: the naive headline, the chosen steps'
scores on the subsample they were chosen on (questions.cell_rows over the kept cell's runs).
"""

from __future__ import annotations

import functools
import math

import bench_stats as bs
import numpy as np
from scipy.special import expit, logit

from campaign.evaluate import questions
from campaign.train.select import chosen_step

STEPS = 10  # evaluation points (train.eval_every): steps 25, 50, ..., 250; the last is 250
EVERY = 25
STEP_SD = 0.10  # step-to-step noise of a run's true quality (logit)
SUBSAMPLE = 64  # model.generation.eval_items (SETTINGS name each row's)
SPLIT_ITEMS = (500, 500)  # validation (its first SUBSAMPLE items are the subsample), test
TRUTH_RUNS = 60_000
_t = np.arange(1, STEPS + 1)
# Learning curves (logit shift from the base 0.8): c0 rises and flattens; c1 rises faster and
# falls after about step 5 of 10 (overfitting), so its best step is earlier than its last.
CURVES = {
    0: -1.2 + 1.2 * (1 - np.exp(-_t / 3)),
    1: -1.2 + 1.6 * (1 - np.exp(-_t / 2)) - 0.06 * _t,
}
# (seed sd on the logit, seeds, subsample items): 2 and 3 seeds, seed sd about 4.5
# points (0.30) and 2.3 (0.15), 64 and 32 items judged at each step
SETTINGS = ((0.30, 2, 64), (0.30, 3, 64), (0.15, 3, 32))


@functools.cache
def _population_f(draws: int = 200_000):
    """f(q) = E_items expit(a + g + q) over the item and item x cell populations, as an
    interpolating function on a grid."""
    rng = np.random.default_rng(777)
    x = logit(bs.BASE) + math.hypot(bs.ITEM_SD, bs.INTERACTION_SD) * rng.standard_normal(draws)
    grid = np.linspace(-4, 4, 161)
    values = np.array([expit(x + q).mean() for q in grid])
    return lambda q: np.interp(q, grid, values)


def _steps_of(rng, c: int, k: int, run_sd: float) -> np.ndarray:
    """(k, STEPS) true qualities of k runs of cell c."""
    u = run_sd * rng.standard_normal((k, 1))
    return CURVES[c] + u + STEP_SD * rng.standard_normal((k, STEPS))


def _choose(sub_scores: np.ndarray, mode: str) -> int:
    """The index of the step chosen_step keeps from one run's (STEPS,) subsample means."""
    scores = {EVERY * (i + 1): float(v) for i, v in enumerate(sub_scores)}
    return chosen_step(scores, mode, EVERY * STEPS) // EVERY - 1


@functools.cache
def select_truth(
    c: int,
    run_sd: float,
    mode: str = "best_generated",
    m_sub: int = SUBSAMPLE,
    runs: int = TRUTH_RUNS,
) -> float:
    """The truth of cell c's recipe with `mode`: E f(quality of the chosen step), each run with
    its own draw of the subsample (the marginal expectation equals the shared draw's)."""
    f = _population_f()
    rng = np.random.default_rng([4848, c, int(run_sd * 100)])
    total, done = 0.0, 0
    while done < runs:
        m = min(5000, runs - done)
        q = _steps_of(rng, c, m, run_sd)
        a = logit(bs.BASE) + math.hypot(bs.ITEM_SD, bs.INTERACTION_SD) * rng.standard_normal(
            (m, 1, m_sub)
        )
        sub = (rng.random((m, STEPS, m_sub)) < expit(a + q[:, :, None])).mean(axis=2)
        chosen = np.array([_choose(s, mode) for s in sub])
        total += float(f(q[np.arange(m), chosen]).sum())
        done += m
    return total / runs


def select_campaign(
    rng, k: int, run_sd: float, m_sub: int = SUBSAMPLE, mode: str = "best_generated"
) -> tuple:
    """(variants, scored, naive): a campaign of the two cells x k seeds, each run scored at its
    chosen step on the validation split (its first m_sub items the subsample the step was
    chosen on) and the test split, as bench_stats.verdict_of reads them; naive: {cell: (k,
    m_sub) the chosen steps' subsample scores}."""
    n_val, n_test = SPLIT_ITEMS
    a_val = logit(bs.BASE) + bs.ITEM_SD * rng.standard_normal(n_val)
    a_test = logit(bs.BASE) + bs.ITEM_SD * rng.standard_normal(n_test)
    variants, scored, naive = [], {"validation": {}, "test": {}}, {}
    for c in CURVES:
        g_val = a_val + bs.INTERACTION_SD * rng.standard_normal(n_val)
        g_test = a_test + bs.INTERACTION_SD * rng.standard_normal(n_test)
        q = _steps_of(rng, c, k, run_sd)
        sub = rng.random((k, STEPS, m_sub)) < expit(g_val[:m_sub] + q[:, :, None])
        naive[c] = np.zeros((k, m_sub))
        for s in range(k):
            t = _choose(sub[s].mean(axis=1), mode)
            name = f"r{c}-{s}"
            variants.append({"kind": "run", "name": name, "run": name, "cell": (f"c{c}",),
                             "seed": s, "cell_id": f"id-c{c}"})  # fmt: skip
            naive[c][s] = sub[s, t]
            rest = rng.random(n_val - m_sub) < expit(g_val[m_sub:] + q[s, t])
            val = np.concatenate([sub[s, t], rest]).astype(np.float64)
            test = (rng.random(n_test) < expit(g_test + q[s, t])).astype(np.float64)
            for split, y in (("validation", val), ("test", test)):
                scored[split][name] = {"correct": y, "point": y.mean(), "draws": None}
    return variants, scored, naive


def select_rows(
    reps: int, seed: int, run_sd: float, k: int, m_sub: int = SUBSAMPLE, runs: int = TRUTH_RUNS
) -> dict:
    """{goal: (rate, low, high)} and the truths: the kept cell's truth below / above its
    reported test interval, and the naive headline's (the chosen steps' subsample scores)."""
    truth = {c: select_truth(c, run_sd, m_sub=m_sub, runs=runs) for c in CURVES}
    last = {c: select_truth(c, run_sd, "last", m_sub, runs) for c in CURVES}
    rng = np.random.default_rng([seed, k, int(run_sd * 100), m_sub, 48])
    below = above = naive_below = naive_above = 0
    for r in range(reps):
        variants, scored, naive = select_campaign(rng, k, run_sd, m_sub)
        best = bs.verdict_of(variants, scored, r).best_cell
        c = int(best.cell.removeprefix("cell=c"))
        below += truth[c] < best.reported.ci_low
        above += truth[c] > best.reported.ci_high
        row = questions.cell_rows(naive, bs.LEVEL)[c]
        naive_below += truth[c] < row["ci_low"]
        naive_above += truth[c] > row["ci_high"]
    what = f"seed sd {run_sd:.2f}, k={k}, {m_sub} items"
    return {
        "rows": {
            f"test headline: truth below ({what})": (below / reps, 0.0, 0.025),
            f"test headline: truth above ({what})": (above / reps, 0.0, 0.025),
        },
        "naive": {
            f"naive (subsample score): truth below ({what})": naive_below / reps,
            f"naive (subsample score): truth above ({what})": naive_above / reps,
        },
        "truth": truth,
        "last": last,
    }


def select_table(reps: int, seed: int) -> bool:
    """Print the checkpoint-choice rows; True where a goal is MISSED."""
    missed = False
    print(f"Checkpoint choice (train.select: best_generated through chosen_step, {STEPS} steps "
          f"judged on the validation subsample), {reps} campaigns per row, 2 cells, "
          f"{SPLIT_ITEMS[1]} test items:")  # fmt: skip
    for run_sd, k, m_sub in SETTINGS:
        out = select_rows(reps, seed, run_sd, k, m_sub)
        for goal, (value, low, high) in out["rows"].items():
            flag, bad = bs.judge(value, low, high, reps)
            missed |= bad
            print(f"  {goal:<60} {value * 100:5.1f}% +/- {bs._se(value, reps) * 100:.1f}  "
                  f"{low * 100:.1f}-{high * 100:.1f} %{flag}")  # fmt: skip
        for goal, value in out["naive"].items():
            print(f"  {goal:<60} {value * 100:5.1f}% +/- {bs._se(value, reps) * 100:.1f}  "
                  "(contrast, no goal)")  # fmt: skip
    for run_sd, m_sub in dict.fromkeys((sd, m) for sd, _, m in SETTINGS):
        for c in CURVES:
            best = select_truth(c, run_sd, m_sub=m_sub)
            last = select_truth(c, run_sd, "last", m_sub)
            print(f"  truth of c{c} (seed sd {run_sd:.2f}, {m_sub} items): best_generated "
                  f"{best * 100:.2f} %, last {last * 100:.2f} %, selecting "
                  f"{(best - last) * 100:+.2f} points")  # fmt: skip
    return missed
