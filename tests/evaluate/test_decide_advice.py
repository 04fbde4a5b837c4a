"""The items advice ("N more evaluation items would decide this") reads the seed part of the
variance at its upper chi-square bound: the runs keep their seed effects when more items are
scored, so a seed part measured at 0 (truncated) must not be read as none. Read as measured,
the counts followed on the same runs delivered 50 and 60 % against the 80 % stated
(bench_stats' items advice rows)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from scipy import stats

from campaign.evaluate import decide

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def _advice(var_seeds: float, var_items: float, residual: float, seed_df: int, n_seeds: int):
    # a gap of 2 points above the 1-point bar at the items' lower bound
    est = 0.03 + decide.ADVICE_Z * math.sqrt(var_seeds + var_items)
    return decide.what_would_decide(
        est, var_seeds, var_items, n_seeds, 300, 0.95, 0.8, 0.01, seed_df, residual
    )


def test_a_seed_part_measured_at_zero_gives_no_items_count_on_ten_df():
    # 2 cells x 6 seeds on 0/1 items: the run means' spread (residual 1.5e-4) hides a seed part
    # that 10 df cannot bound below the gap (target se^2 = (0.02 / 2.80)^2 = 5.1e-5)
    need = _advice(0.0, 1.6e-4, 1.5e-4, 10, 6)
    assert need["items_needed"] is None
    assert "upper 90 % bound on 10 df" in need["items_note"]


def test_an_items_count_is_still_given_where_the_bound_is_below_the_gap():
    # 60 df and a small residual: the bound (1e-6 + 2e-6) * 60 / chi2_0.1(60) - 2e-6 leaves
    # room; the count is sized on that bound, not on the seed part measured
    need = _advice(1e-6, 8e-5, 2e-6, 60, 31)
    upper = 3e-6 * 60 / stats.chi2.ppf(decide.ITEMS_SEED_QUANTILE, 60) - 2e-6
    assert decide.seed_upper(1e-6, 2e-6, 60) == upper
    target = (0.02 / (1.959964 + 0.841621)) ** 2
    assert need["items_needed"] == math.ceil(8e-5 * 300 / (target - upper))
    assert need["items_note"] is None


def test_bench_rows_run_on_a_few_campaigns(capsys):
    import bench_stats
    import bench_stats_select

    missed = bench_stats.items_advice_table(5, 0)
    shipped = [line for line in capsys.readouterr().out.splitlines() if "k=6" in line]
    # the shipped rule gives no count at 10 df on 0/1 scores (docs/statistics.md says so);
    # a count given here would need the row's goal judged, and the docs changed
    assert shipped and all("no count given in 5 campaigns" in line for line in shipped)
    assert missed is False
    out = bench_stats_select.select_rows(3, 0, 0.30, 2, 16, runs=500)
    assert set(out["truth"]) == {0, 1} and len(out["rows"]) == 2
