"""The kept cell's headline holds after the keep chose it for its value: a cell kept because
it was shown better reports its other-split interval for every cell at once (Bonferroni over
the cells), as the test split re-scores the runs whose seed luck made it the largest."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from campaign.evaluate import decide, questions

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_stats  # noqa: E402


def test_cell_rows_give_every_cell_an_interval_that_holds_for_all_cells_at_once():
    rng = np.random.default_rng(3)
    design = bench_stats.campaign(rng, [0.0, 0.2, 0.2, 0.2], 3, 500)
    rows = questions.cell_rows(design, 0.95)
    for r in rows.values():
        assert r["sel_low"] < r["ci_low"] <= r["value"] <= r["ci_high"] < r["sel_high"]


def test_a_cell_kept_for_its_value_reports_the_interval_over_every_cell():
    rng = np.random.default_rng(11)
    tau = bench_stats._verdict_tau(0.06, 0.40)
    for r in range(6):  # the first campaign of these that keeps a shown-better cell
        d = bench_stats.verdict_of(
            *bench_stats.verdict_campaign(rng, [0.0, tau, tau, tau], 3, False, 0.40), r
        )
        if d.best_cell.kept_as == decide.KEPT_SHOWN:
            break
    kept = d.best_cell
    assert kept.kept_as == decide.KEPT_SHOWN and kept.reported_cells == 4
    plain = kept.by_split["test"]
    assert kept.reported.ci_low < plain.ci_low and kept.reported.ci_high > plain.ci_high
    assert d.verdict.quality.ci_low == kept.reported.ci_low
    assert "for all 4 cells at once: the keep chose among them" in d.verdict.line
    # The report's evaluation section says it of its "Best cell" line too.
    from campaign.evaluate.section import decisions_section

    (best,) = [x for x in decisions_section(d).lines if x.startswith("Best cell:")]
    assert "interval for all 4 cells at once" in best
