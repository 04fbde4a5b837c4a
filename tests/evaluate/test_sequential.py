"""Group-sequential looks of the adaptive campaign: boundaries against the published
Lan-DeMets O'Brien-Fleming-type values, their crossing probability by simulation, and what an
interim look opens, closes, adds and stops on a design whose answers are plain."""

from __future__ import annotations

import math

import numpy as np
import pytest

from campaign.evaluate import decide, sequential

# DeMets & Lan (1994), gsDesign sfLDOF two-sided, alpha 0.05, equally spaced looks.
PUBLISHED = {
    3: (3.710, 2.511, 1.993),
    5: (4.877, 3.357, 2.680, 2.290, 2.031),
}


@pytest.mark.parametrize("looks", sorted(PUBLISHED))
def test_boundaries_match_the_published_obrien_fleming_type_values(looks):
    got = sequential.boundaries([j / looks for j in range(1, looks + 1)], 0.05)
    assert got == pytest.approx(PUBLISHED[looks], abs=6e-4)


def test_one_look_is_the_fixed_design_and_all_alpha_is_spent_at_time_one():
    assert sequential.boundaries([1.0], 0.05) == pytest.approx([1.959964], abs=1e-6)
    assert sequential.obf_spent(1.0, 0.05) == pytest.approx(0.05)
    assert sequential.obf_spent(0.0, 0.05) == 0.0
    spent = [sequential.obf_spent(t, 0.05) for t in (0.2, 0.4, 0.6, 0.8, 1.0)]
    assert spent == sorted(spent)


def test_a_campaign_that_stops_early_keeps_the_planned_boundaries():
    """Two looks of four planned: the first two of the four-look boundaries (nothing of the
    rest is spent early)."""
    four = sequential.boundaries([0.25, 0.5, 0.75, 1.0], 0.05)
    two = sequential.boundaries([0.5, 1.0], 0.05, [0.25, 0.5])
    assert two == pytest.approx(four[:2], abs=1e-6)


def test_boundaries_cross_with_probability_alpha_at_unequal_information():
    """Brownian motion at information 0.3, 0.7, 1: P(any |Z_j| >= c_j) = alpha under H0
    (200,000 paths: Monte Carlo se 0.0005)."""
    info = np.array([0.3, 0.7, 1.0])
    c = np.array(sequential.boundaries(list(info), 0.05))
    rng = np.random.default_rng(2026)
    steps = rng.standard_normal((200_000, 3)) * np.sqrt(np.diff(info, prepend=0.0))
    z = np.cumsum(steps, axis=1) / np.sqrt(info)
    crossed = (np.abs(z) >= c).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.002)
    assert c[0] > c[1] > c[2] > 1.96  # early looks ask more


def test_information_must_grow():
    with pytest.raises(ValueError, match="must increase"):
        sequential.boundaries([0.5, 0.5, 1.0], 0.05)


def test_a_look_without_new_seeds_tests_nothing_new():
    history = [{"a": 2, "b": 2}, {"a": 2, "b": 2}, {"a": 4, "b": 2}]
    looks = sequential.analysed_looks(history, {"a": 1.0, "b": -1.0})
    assert [j for j, _ in looks] == [1, 3]
    assert looks[0][1] == pytest.approx(1.0) and looks[1][1] == pytest.approx(0.75)


def _design(rng, k: int, n: int, p: dict) -> dict:
    """{cell: Y (k, n)}: each run right on each item with probability p[cell], independently."""
    return {c: (rng.random((k, n)) < q).astype(np.float64) for c, q in p.items()}


SETTINGS = {
    "min_useful_effect": 0.05,
    "confidence": 0.95,
    "power": 0.8,
    "max_looks": 3,
    "max_seeds": 8,
    "budget_hours": None,
    "max_runs": 100,
}


def _look(design, settings=SETTINGS, history=None, spent=None):
    qs = [
        sequential.Question(c, "cell", {c: 1.0, "control": -1.0}) for c in design if c != "control"
    ]
    history = history or [{c: y.shape[0] for c, y in design.items()}]
    return sequential.interim_look(
        design,
        qs,
        "control",
        history,
        settings,
        dict.fromkeys(design, 0.5),
        spent or {"hours": 6.0, "runs": 12},
    )


def test_interim_look_adopts_a_plain_gain_at_once():
    """A cell 25 points over a 70 % control, 6 seeds on 400 items: the first look's repeated
    interval already clears the useful size; the control's equal cell is then far below the
    best and stops, and so does its question."""
    rng = np.random.default_rng(5)
    result = _look(_design(rng, 6, 400, {"control": 0.7, "good": 0.95, "same": 0.7}))
    rows = {r["name"]: r for r in result.rows}
    assert rows["good"]["decision"] == decide.ADOPT and rows["good"]["status"] == "decided"
    assert set(result.stopped) == {"same"} and rows["same"]["status"] == "stopped"
    assert result.add_runs == 0 and result.seeds == {"control": 6, "good": 6, "same": 6}


def test_interim_look_stops_the_worse_cell_and_gives_seeds_to_the_open_question():
    """Control 70 %, a cell 40 points worse (rejected and stopped: far below the best cell) and
    one equal to the control (open: it and the control get seeds, nothing else does)."""
    rng = np.random.default_rng(5)
    result = _look(_design(rng, 3, 400, {"control": 0.7, "bad": 0.3, "same": 0.7}))
    rows = {r["name"]: r for r in result.rows}
    assert rows["bad"]["decision"] == decide.REJECT
    assert set(result.stopped) == {"bad"} and "below the best cell" in result.stopped["bad"]
    assert rows["same"]["status"] == "open"
    assert result.seeds["same"] > 3 and result.seeds["control"] > 3 and result.seeds["bad"] == 3
    added = result.seeds["same"] - 3 + result.seeds["control"] - 3
    assert result.add_runs == added and result.add_hours == pytest.approx(0.5 * added)
    # The repeated interval is wider than the fixed design's at this first of three looks.
    fixed_z = 2.394  # Bonferroni over the 2 cells at 95 %: z at 1 - 0.05 / 4
    assert rows["same"]["boundary"] > fixed_z


def test_interim_look_adds_nothing_beyond_the_caps_and_says_what_is_left():
    rng = np.random.default_rng(5)
    design = _design(rng, 3, 400, {"control": 0.7, "same": 0.7})
    tight = {**SETTINGS, "budget_hours": 6.4}  # 6 spent: 0.4 h left, a run costs 0.5 h
    result = _look(design, tight)
    (row,) = result.rows
    assert row["status"] == "over budget" and result.add_runs == 0
    assert result.seeds == {"control": 3, "same": 3}
    assert result.open_cost_hours[row["name"]] > 0.4
    runs_cap = {**SETTINGS, "max_runs": 12}  # 12 runs done
    assert _look(design, runs_cap).add_runs == 0


def test_the_last_planned_look_adds_nothing():
    rng = np.random.default_rng(5)
    design = _design(rng, 3, 400, {"control": 0.7, "same": 0.7})
    history = [{"control": 2, "same": 2}, {"control": 3, "same": 3}, {"control": 3, "same": 3}]
    with pytest.raises(ValueError, match="outside"):
        _look(design, history=history + history)
    result = _look(design, history=history)
    assert result.final and result.add_runs == 0
    assert result.rows[0]["status"] == "open"
    # No seed since look 2: the interval is look 2's, whose boundary is wider than look 3's.
    assert result.rows[0]["of_look"] == 2
    assert math.isfinite(result.rows[0]["rci_low"])


def test_information_fractions_count_the_residual_that_more_seeds_shrink():
    """Hand-computed: seed part 1e-4, var_items 3e-4 of which the seed x item residual 2e-4, at
    s = 0.5 (the row's seeds) after s = 1: V = (1e-4 + 2e-4) * s / 0.5 + 1e-4, i.e. 7e-4 then
    4e-4, an estimated fraction of 4/7 (the residual taken as fixed gave 4/5). The boundaries
    take the seeds' share, 0.5 / 1 = 1/2: no larger than the estimate whatever the split."""
    row = {"var_seeds": 1e-4, "var_items": 3e-4, "var_residual": 2e-4}
    assert sequential.variances([1.0, 0.5], row) == pytest.approx([7e-4, 4e-4])
    assert sequential.fractions([1.0, 0.5], row) == pytest.approx([1 / 2, 1.0])
    assert sequential.seed_and_item_parts(row) == pytest.approx((3e-4, 1e-4))


def test_fractions_taken_too_large_would_spend_more_than_alpha():
    """Why the boundaries take the seeds' share: looks at 2 -> 3 -> 4 seeds with no item part
    have fractions 1/2, 3/4, 1. Boundaries solved as if the fractions were 0.95, 0.97, 1 (a
    seed part estimated near zero on few df) cross more than alpha = 0.05 on paths with the
    true correlations (2,000,000 Brownian paths: 0.052); those of the seeds' share do not."""
    rng = np.random.default_rng(3)
    true = np.array([0.5, 0.75, 1.0])
    times = [1 / 3, 2 / 3, 1.0]
    steps = rng.standard_normal((2_000_000, 3)) * np.sqrt(np.diff(true, prepend=0.0))
    z = np.abs(np.cumsum(steps, axis=1) / np.sqrt(true))

    def crossing(b) -> float:
        return float(np.mean((z >= np.asarray(b)).any(axis=1)))

    too_large = sequential.boundaries([0.95, 0.97, 1.0], 0.05, times)
    seeds_share = sequential.boundaries(
        sequential.fractions([1 / 2, 1 / 3, 1 / 4], {}), 0.05, times
    )
    assert crossing(too_large) > 0.0510  # MC se 0.00015
    assert crossing(seeds_share) == pytest.approx(0.05, abs=0.0006)


def test_information_fractions_match_the_simulated_variance_of_the_estimate():
    """2 -> 4 -> 8 seeds per cell on the same 200 items (item difficulty, item x treatment
    interaction, run noise, Bernoulli scores: bench_stats's model): the fractions estimated at
    the last look from its own row (mean over 300 campaigns) agree with Var(est at 8) /
    Var(est at k) over 8,000 campaigns (Monte Carlo se ~0.01); the residual taken as fixed
    put look 1 near 0.5."""
    from scipy.special import expit, logit

    rng = np.random.default_rng(11)
    n, ks = 200, (2, 4, 8)

    def campaigns(reps: int) -> dict:
        a = logit(0.8) + 1.5 * rng.standard_normal((reps, 1, n))
        g = 0.4 * rng.standard_normal((reps, 1, n))
        return {
            c: (rng.random((reps, 8, n)) < expit(a + s + 0.15 * rng.standard_normal((reps, 8, 1))))
            for c, s in (("a", 0.0), ("b", g))
        }

    estimates = []
    for _ in range(8):
        y = campaigns(1000)
        estimates.append(
            [y["a"][:, :k].mean(axis=(1, 2)) - y["b"][:, :k].mean(axis=(1, 2)) for k in ks]
        )
    v = np.var(np.concatenate(estimates, axis=1), axis=1)
    true = v[-1] / v
    y = campaigns(300)
    got = [
        sequential.fractions(
            [2 / k for k in ks],
            sequential.questions.contrast_row(
                {c: y[c][i].astype(np.float64) for c in y}, {"a": 1.0, "b": -1.0}, 0.95
            ),
        )
        for i in range(300)
    ]
    assert true[0] == pytest.approx(0.26, abs=0.03)  # far from the 0.5 of the fixed residual
    # The boundaries' fractions (the seeds' share: 1/4, 1/2, 1) are at most the true ones.
    assert np.all(np.array(got) <= true + 0.02)
    assert np.mean(got, axis=0) == pytest.approx(true, abs=0.03)


def test_a_look_keeps_the_boundaries_the_earlier_looks_used():
    """Look 1 used 3.0 where the fractions now say otherwise: look 2's boundary is solved given
    3.0, so P(|Z1| < 3.0, |Z2| >= c2) is look 2's share of alpha (200,000 Brownian paths at
    information 0.4, 1), and the recomputed first boundary is not used."""
    info, times = [0.4, 1.0], [1 / 3, 2 / 3]
    c1, c2 = sequential.boundaries(info, 0.05, times, earlier=[3.0])
    assert c1 == 3.0
    share = sequential.obf_spent(2 / 3, 0.05) - sequential.obf_spent(1 / 3, 0.05)
    rng = np.random.default_rng(3)
    steps = rng.standard_normal((200_000, 2)) * np.sqrt(np.diff(info, prepend=0.0))
    z = np.abs(np.cumsum(steps, axis=1) / np.sqrt(info))
    assert ((z[:, 0] < c1) & (z[:, 1] >= c2)).mean() == pytest.approx(share, abs=0.0012)
    fresh = sequential.boundaries(info, 0.05, times)
    assert fresh[0] != pytest.approx(3.0, abs=0.05)
    # kept boundaries equal to the fresh ones give the fresh answer
    assert sequential.boundaries(info, 0.05, times, [fresh[0]]) == pytest.approx(fresh)
    with pytest.raises(ValueError, match="earlier boundaries"):
        sequential.boundaries(info, 0.05, times, [3.0, 2.0])


def _obf(t: float, alpha: float = 0.05) -> float:
    """Lan-DeMets O'Brien-Fleming-type two-sided spending, written out: 4 (1 - Phi(z / sqrt t)),
    z the normal quantile at 1 - alpha / 4."""
    from scipy import stats

    return 4 * stats.norm.sf(stats.norm.isf(alpha / 4) / math.sqrt(t))


def _continue_then_cross(info, c1: float, c2: float, paths: int = 1_000_000) -> float:
    """P(|Z1| < c1, |Z2| >= c2) on `paths` simulated Brownian score paths at information
    `info` (2,): Z_j = W(info_j) / sqrt(info_j), corr(Z1, Z2) = sqrt(info_1 / info_2)."""
    rng = np.random.default_rng(7)
    steps = rng.standard_normal((paths, 2)) * np.sqrt(np.diff(info, prepend=0.0))
    z = np.abs(np.cumsum(steps, axis=1) / np.sqrt(info))
    return float(((z[:, 0] < c1) & (z[:, 1] >= c2)).mean())


def test_interim_look_records_its_boundary_and_the_next_look_keeps_it():
    """Look 1 at 3 seeds records [[1, z1]], its alpha spent and information fraction; look 2
    (5 seeds, the variance parts re-estimated) keeps z1 as recorded and solves z2 given it:
    continuing past 3.5 at look 1 and crossing z2 at look 2 has probability look 2's share of
    alpha, obf(2/3) - obf(1/3) = 0.0119, on 1,000,000 Brownian paths at the seeds' share of
    information, (2/5) / (2/3) = 0.6 then 1 (Monte Carlo se 0.0001; tolerance 0.0005)."""
    rng = np.random.default_rng(5)
    full = _design(rng, 5, 400, {"control": 0.7, "same": 0.7})
    first = {c: y[:3] for c, y in full.items()}
    (r1,) = _look(first).rows
    assert r1["boundaries"] == [[1, r1["boundary"]]]
    assert r1["alpha_spent"] == pytest.approx(sequential.obf_spent(1 / 3, 0.05))
    assert r1["spending_time"] == pytest.approx(1 / 3) and 0 < r1["info_fraction"] < 1
    history = [{"control": 3, "same": 3}, {"control": 5, "same": 5}]
    recorded = {"same": [[1, 3.5]]}  # as if look 1's parts had given 3.5
    (r2,) = sequential.interim_look(
        full,
        [sequential.Question("same", "cell", {"same": 1.0, "control": -1.0})],
        "control",
        history,
        SETTINGS,
        dict.fromkeys(full, 0.5),
        {"hours": 5.0, "runs": 10},
        earlier=recorded,
    ).rows
    assert r2["boundaries"] == [[1, 3.5], [2, r2["boundary"]]]
    share = _obf(2 / 3) - _obf(1 / 3)
    assert share == pytest.approx(0.0119, abs=0.00005)
    assert _continue_then_cross([0.6, 1.0], 3.5, r2["boundary"]) == pytest.approx(share, abs=5e-4)
    # The simulation tells boundaries 0.05 apart.
    assert _continue_then_cross([0.6, 1.0], 3.5, r2["boundary"] + 0.05) < share - 5e-4
    assert r2["info_fraction"] > r1["info_fraction"]


def test_an_open_question_is_sized_on_the_seed_spread_only_once_it_has_the_df():
    """3 seeds in 2 cells (4 error df): the spread is no size to go by, the open question heads
    for max_seeds (8), half the way at this first of 3 looks (3 + ceil(5 / 2) = 6). 12 seeds
    (22 df), useful from 2 points: the fewest seeds per cell at which the interval would clear
    the useful size with probability 0.8 at a gap of max(|estimate - useful|, useful), found
    here by scanning k:
    se(k)^2 = (var_seeds + var_residual) 12 / k + var_items - var_residual (the crossed model;
    the residual shrinks with seeds), power(k) = Phi(gap / se(k) - z_0.975) (a family of one)."""
    from scipy import stats

    rng = np.random.default_rng(5)
    few = _look(_design(rng, 3, 400, {"control": 0.7, "same": 0.7}))
    assert few.rows[0]["seeds_target"] == 8 and few.seeds == {"control": 6, "same": 6}
    design = _design(rng, 12, 400, {"control": 0.7, "same": 0.7})
    useful = 0.02  # small enough that the sizing, not the one-more-seed floor (13), decides
    wide = {**SETTINGS, "min_useful_effect": useful, "max_seeds": 500, "max_looks": 5}
    (r,) = _look(design, wide | {"max_runs": 10_000}).rows
    row = sequential.questions.contrast_row(design, {"same": 1.0, "control": -1.0}, 0.95)
    assert row["seed_df"] == 22 >= sequential.SIZING_MIN_DF
    gap = max(abs(row["estimate"] - useful), useful)
    by_seeds = (row["var_seeds"] + row["var_residual"]) * 12
    beyond = row["var_items"] - row["var_residual"]

    def power(k: int) -> float:
        return float(stats.norm.cdf(gap / math.sqrt(by_seeds / k + beyond) - 1.959964))

    need = next(k for k in range(2, 10_000) if power(k) >= 0.8)
    assert power(need - 1) < 0.8 <= power(need)
    assert r["status"] == "open" and r["seeds_target"] == need and 13 < need < 500


def test_a_cell_an_earlier_look_stopped_stays_stopped_and_its_question_too():
    """Look 1 stopped "bad"; at look 2 its data alone would not stop it (equal to the control),
    yet it gets no seed, and its question is "stopped" even at the last planned look."""
    rng = np.random.default_rng(5)
    design = _design(rng, 3, 400, {"control": 0.7, "bad": 0.7})
    qs = [sequential.Question("bad", "cell", {"bad": 1.0, "control": -1.0})]
    history = [{"control": 2, "bad": 2}, {"control": 3, "bad": 3}]
    why = {"bad": "below the floor (upper end -3.0 points)"}
    for looks in (history, [*history, {"control": 3, "bad": 3}]):  # look 2, then the last
        result = sequential.interim_look(
            design, qs, "control", looks, SETTINGS, dict.fromkeys(design, 0.5),
            {"hours": 3.0, "runs": 6}, stopped=why,
        )  # fmt: skip
        assert result.stopped == why and result.seeds["bad"] == 3
        assert result.rows[0]["status"] == "stopped", result.rows[0]
    fresh = sequential.interim_look(
        design, qs, "control", history, SETTINGS, dict.fromkeys(design, 0.5),
        {"hours": 3.0, "runs": 6},
    )  # fmt: skip
    assert fresh.stopped == {} and fresh.seeds["bad"] > 3  # without the record: open


def test_a_stop_contrast_keeps_the_boundary_its_earlier_look_recorded():
    """Cell "mid" against the best cell "good": look 1 (3 seeds) records the stop contrast's
    boundary; look 2 (5 seeds) keeps the one recorded (here 3.5, as if look 1's variance parts
    had given it) and solves its own given it, as the questions' boundaries are kept. Without
    the record it solves both afresh, and look 1's is not 3.5."""
    rng = np.random.default_rng(5)
    full = _design(rng, 5, 400, {"control": 0.7, "good": 0.8, "mid": 0.7})
    first = {c: y[:3] for c, y in full.items()}
    one = {r["name"]: r for r in _look(first).stop_rows}
    assert set(one) == {"mid - good"}  # the control never stops, the best is not tested
    assert one["mid - good"]["boundaries"] == [[1, one["mid - good"]["boundary"]]]
    assert not one["mid - good"]["stops"]
    history = [{c: 3 for c in full}, {c: 5 for c in full}]

    def look_2(earlier_stops):
        result = sequential.interim_look(
            full, [], "control", history, SETTINGS, dict.fromkeys(full, 0.5),
            {"hours": 7.5, "runs": 15}, earlier_stops=earlier_stops,
        )  # fmt: skip
        return {r["name"]: r for r in result.stop_rows}["mid - good"]

    kept = look_2({"mid - good": [[1, 3.5]]})
    assert kept["boundaries"] == [[1, 3.5], [2, kept["boundary"]]]
    # Solved given 3.5 (one contrast: the whole alpha), as test_interim_look_records_... checks.
    share = _obf(2 / 3) - _obf(1 / 3)
    assert _continue_then_cross([0.6, 1.0], 3.5, kept["boundary"]) == pytest.approx(share, abs=5e-4)
    row = sequential.questions.contrast_row(full, {"mid": 1.0, "good": -1.0}, 0.95)
    df = min(row["df"], row["seed_df"])  # sequential.interval_df
    t = sequential.stats.t.isf(sequential.stats.norm.sf(kept["boundary"]), df)
    assert kept["rci_high"] == pytest.approx(row["estimate"] + t * row["se"])
    fresh = look_2(None)
    assert fresh["boundaries"][0][1] != pytest.approx(3.5, abs=0.05)
    assert fresh["boundary"] != pytest.approx(kept["boundary"])


def test_a_repeated_interval_reads_its_quantile_on_at_most_the_seed_df():
    """2 seeds in 2 cells (2 seed error df) with no run-level spread: the seed part comes out
    near 0 and the Satterthwaite df far above 2, which at the first of 3 looks (z 3.710,
    one-sided 1.04e-4) would read t on hundreds of df (about 3.8) instead of on 2 (about 69).
    The look's interval is the estimate -/+ t_2 at that tail times se, and its row says df 2.
    One seed (no seed level measured) keeps the items' df."""
    from scipy import stats

    rng = np.random.default_rng(5)
    design = _design(rng, 2, 400, {"control": 0.7, "same": 0.7})
    row = sequential.questions.contrast_row(design, {"same": 1.0, "control": -1.0}, 0.95)
    assert row["seed_df"] == 2 and row["df"] > 50
    (r,) = _look(design).rows
    assert r["boundary"] == pytest.approx(3.710, abs=1e-3) and r["df"] == 2
    t = stats.t.isf(stats.norm.sf(r["boundary"]), 2)
    assert t == pytest.approx(69, abs=2)
    assert r["rci_low"] == pytest.approx(max(-1.0, row["estimate"] - t * row["se"]))
    assert r["rci_high"] == pytest.approx(min(1.0, row["estimate"] + t * row["se"]))
    one = sequential.questions.contrast_row(
        {c: y[:1] for c, y in design.items()}, {"same": 1.0, "control": -1.0}, 0.95
    )
    assert one["seed_df"] == 0 and sequential.interval_df(one) == one["df"] == 399
