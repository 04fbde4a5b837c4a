"""The verdict's keep is a decision (issue 33): the control recipe is kept unless a cell is
shown better than it by the cells' family test; the representative run is not the worse seed by
construction; a cell against the floor at 2 seeds claims no more than its level."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from campaign.evaluate import decide, records, words

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_stats  # noqa: E402

SPEC = {"evaluation": {"decide_on": "validation", "metric": "accuracy", "confidence": 0.95,
                       "min_useful_effect": 0.01, "max_quality_loss": 0.01}}  # fmt: skip


def _cell(name: str, value: float, split: str = "validation") -> dict:
    return {"variant": f"cell: {name}", "kind": "cell", "cell": name, "cell_id": f"id-{name}",
            "split": split, "metric": "accuracy", "value": value, "ci_low": value - 0.05,
            "ci_high": value + 0.05, "interval_over": "crossed"}  # fmt: skip


def _against_control(name: str, decision: str, estimate: float) -> dict:
    return {"split": "validation", "kind": "cell", "subject": f"{name} (cell)",
            "cell_id": f"id-{name}", "decision": decision, "estimate": estimate}  # fmt: skip


def _keep(decisions_of_cells: dict) -> records.Decisions:
    metric_rows = [_cell("lr=1", 0.70), *(_cell(c, 0.70 + est) for c, (_, est) in
                                           decisions_of_cells.items())]  # fmt: skip
    metric_rows += [dict(r, split="test") for r in metric_rows]
    rows = [_against_control(c, d, est) for c, (d, est) in decisions_of_cells.items()]
    return records.build(SPEC, rows, metric_rows, None, "lr=1")


def test_the_control_is_kept_when_the_highest_cell_is_not_shown_better():
    d = _keep({"lr=2": (decide.INCONCLUSIVE, 0.04), "lr=3": (decide.REJECT, -0.02)})
    assert d.best_cell.cell == "lr=1" and d.best_cell.kept_as == decide.KEPT_CONTROL
    assert d.verdict.keep == "lr=1"
    assert "no cell shown better" in d.verdict.line


def test_a_cell_shown_better_is_kept_the_largest_among_several():
    d = _keep({"lr=2": (decide.ADOPT_SMALL, 0.02), "lr=3": (decide.ADOPT, 0.05)})
    assert d.verdict.keep == "lr=3" and d.best_cell.kept_as == decide.KEPT_SHOWN


def test_without_a_control_the_highest_cell_is_kept_and_said_so():
    metric_rows = [
        _cell("a", 0.6),
        _cell("b", 0.7),
        _cell("a", 0.6, "test"),
        _cell("b", 0.7, "test"),
    ]
    d = records.build(SPEC, [], metric_rows, None, None)
    assert d.verdict.keep == "b" and "no control scored" in d.verdict.line


def test_the_representative_of_two_seeds_is_chosen_by_run_id_not_by_value():
    assert decide.representative({"r-a": 0.9, "r-b": 0.7}) == "r-a"
    assert decide.representative({"r-a": 0.7, "r-b": 0.9}) == "r-a"
    assert decide.representative({"r-c": 0.1, "r-a": 0.5, "r-b": 0.9}) == "r-a"  # the median


def test_a_short_simulation_of_the_verdict_meets_keep_and_floor_goals():
    """Four equal cells at 2 seeds (seed sd ~4.8 points), through stage._comparisons, _decide
    and records.build: a non-control cell kept in at most 5 % (+2 Monte Carlo se); the
    control-against-floor claim at 2 seeds under 5 % + 2 se (the uncapped Satterthwaite df
    claimed 7-8 %)."""
    reps = 80
    rng = np.random.default_rng(7)
    kept = sum(
        bench_stats.verdict_of(*bench_stats.verdict_campaign(rng, [0.0] * 4, 2), r).best_cell.cell
        != "cell=c0"
        for r in range(reps)
    )
    assert kept / reps <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / reps)
    claims = bench_stats.floor_claims(np.random.default_rng(8), 2, 400)
    assert claims <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 400)


def test_items_needed_is_bounded_and_says_when_no_number_of_items_decides():
    # The gap (2 points above the 1-point bar) needs Var <= (0.02 / 2.80)^2 = 5.10e-5.
    # Seed part 5.07e-5 leaves ~3e-7 for items of 1e-4 at 300 items: ~100,000 items, over 100 x.
    def at_gap(var_seeds: float) -> float:  # a 2-point gap at its lower bound
        return 0.03 + decide.ADVICE_Z * (var_seeds + 1e-4) ** 0.5

    need = decide.what_would_decide(at_gap(5.07e-5), 5.07e-5, 1e-4, 3, 300, 0.95, 0.8, 0.01)
    assert need["items_needed"] is None
    assert "no number of items within 100 times these 300" in need["items_note"]
    # The seed part alone is wider than the gap: no number of items at all.
    need = decide.what_would_decide(at_gap(6e-5), 6e-5, 1e-4, 3, 300, 0.95, 0.8, 0.01)
    assert need["items_needed"] is None and need["items_note"].startswith("no number of items")
    # Within reach: a number, no note.
    need = decide.what_would_decide(at_gap(1e-6), 1e-6, 1e-4, 3, 300, 0.95, 0.8, 0.01)
    assert 300 < need["items_needed"] <= 30_000 and need["items_note"] is None
    line = words._needs({"n_seeds": 3, "dominant": "items", **need})
    assert f"{need['items_needed']} evaluation items" in line


def test_scores_in_0_1_take_the_paired_t_path_and_decide_both_ways():
    """Per-item scores that are not all 0/1 (a generation metric) are tested by the paired t:
    a variant 0.1 points below its reference on 1,000 items is adopted at a 1-point margin, one
    5 points below is rejected; 0/1 scores keep the exact score test."""
    from campaign.evaluate import questions

    rng = np.random.default_rng(3)
    ref = rng.beta(4, 2, 1000)
    policy = {"min_useful_effect": 0.01, "max_quality_loss": 0.01}
    decided = []
    for loss in (0.001, 0.05):
        var = np.clip(ref - loss + rng.normal(0, 0.01, ref.size), 0, 1)
        row = questions.quantized_row(ref, var, 0.95, 0.01)
        assert row["test"] == questions.PAIRED_T
        rows = [{"kind": "quantized", "subject": "v", "metric": "token_f1", **row}]
        questions.decide_family(rows, 0.95, 0.8, policy)
        decided.append(rows[0]["decision"])
    assert decided == [decide.ADOPT, decide.REJECT]
    binary = questions.quantized_row(ref > 0.5, ref > 0.5, 0.95, 0.01)
    assert binary["test"].startswith("Tango")


def test_a_loss_with_a_long_tail_is_not_adopted_on_the_plain_t_alone():
    """Per-item losses mostly small with a few large (left skew, as a compressed variant's):
    a sample that missed the tail has a high mean and a small sd at once, so the plain t
    adopted non-inferiority at a true loss equal to the margin in 2.6-2.8 % of campaigns at
    300 items against 2.5 % (bench_stats). Here the t's p is 0.020 on 300 items: Hall's
    skewness-corrected t says 0.027, the variant is not adopted, and the family-adjusted
    interval agrees (its lower end under -margin). The same sample mirrored (a long tail of
    gains) keeps the t's own p: the correction never makes a test more liberal than the t."""
    from scipy import stats as st

    from campaign.evaluate import questions

    n, margin = 300, 0.01
    policy = {"min_useful_effect": 0.01, "max_quality_loss": margin}
    raw = np.random.default_rng(5).exponential(0.01, n)
    se = raw.std(ddof=1) / np.sqrt(n)
    at_t = -margin + float(st.t.isf(0.02, n - 1)) * se  # the mean whose t p is 0.020
    ref = np.full(n, 0.9)
    for sign, adopted in ((-1.0, False), (1.0, True)):  # a tail of losses, then of gains
        d = sign * (raw - raw.mean()) + at_t
        row = questions.quantized_row(ref, ref + d, 0.95, margin)
        rows = [{"kind": "quantized", "subject": "v", "metric": "token_f1", **row}]
        questions.decide_family(rows, 0.95, 0.8, policy)
        r = rows[0]
        if adopted:
            assert r["p_value"] == pytest.approx(0.02)
            assert r["decision"] == decide.ADOPT and r["adj_low"] > -margin
        else:
            assert 0.025 < r["p_value"] < 0.035
            assert r["decision"] != decide.ADOPT and r["adj_low"] < -margin


def test_a_loss_beyond_the_margin_with_a_tail_of_gains_is_not_rejected_on_the_plain_t_alone():
    """The reject side mirrored: a mean loss beyond the margin made of a few large gains among
    many losses (right skew). A sample that missed the gains looks worse than the truth, so the
    t's p of "loses at most the margin" (0.020) is liberal; Hall's says 0.027, the variant is
    not rejected, and the interval's upper end agrees (above -margin). Hall's sign on this side
    matters: with the skewness taken the other way the reject p is the t's 0.020 and the upper
    end falls under -margin (a rejection the data cannot support)."""
    from scipy import stats as st

    from campaign.evaluate import questions

    n, margin = 300, 0.01
    policy = {"min_useful_effect": 0.01, "max_quality_loss": margin}
    raw = np.random.default_rng(5).exponential(0.01, n)
    se = raw.std(ddof=1) / np.sqrt(n)
    at_t = -margin - float(st.t.isf(0.02, n - 1)) * se  # the mean whose reject t p is 0.020
    ref = np.full(n, 0.5)
    for sign, rejected in ((1.0, False), (-1.0, True)):  # a tail of gains, then of losses
        d = sign * (raw - raw.mean()) + at_t
        row = questions.quantized_row(ref, ref + d, 0.95, margin)
        rows = [{"kind": "quantized", "subject": "v", "metric": "token_f1", **row}]
        questions.decide_family(rows, 0.95, 0.8, policy)
        r = rows[0]
        if rejected:  # the skew makes the t conservative on this side: the t's own p
            assert r["p_reject"] == pytest.approx(0.02)
            assert r["decision"] == decide.REJECT and r["adj_high"] < -margin
        else:
            assert r["p_reject"] == pytest.approx(0.0274, abs=5e-4)
            assert r["decision"] != decide.REJECT and r["adj_high"] > -margin


def test_no_count_at_two_seeds_and_the_advice_at_three_delivers_its_power():
    """A seed spread measured on 2 df (2 seeds of 2 cells) is low often enough that a count of
    seeds sized on it delivered 41-64 % against the 80 % stated, and a count of items 16-35 %:
    no count is given there, and the note says why. At 3 seeds (4 df) the seeds count is
    followed (bench_stats.advice_delivered: the same campaigns extended with the advised
    seeds): 75-85 %, give or take two Monte Carlo standard errors; no items count below 10 df."""
    need = decide.what_would_decide(0.03, 1e-4, 1e-6, 2, 300, 0.95, 0.8, 0.01, 2)
    assert need["seeds_needed"] is None and need["items_needed"] is None
    assert "measured on 2 df" in need["seeds_note"]
    assert "measured on 2 df" in words._needs({"n_seeds": 2, **need})
    _, rate, followed = bench_stats.advice_delivered(3, 300, 600, 3, 0.40, "seeds", 0.06)
    assert followed >= 100
    se = np.sqrt(0.8 * 0.2 / followed)
    # within 5 points of the 80 % stated: sized at the 10 % bound it delivered 93 %
    assert 0.75 - 2 * se <= rate <= 0.85 + 2 * se
    assert bench_stats.advice_delivered(3, 300, 100, 3, 0.40, "items", 0.06)[2] == 0


def test_a_verdict_weighed_against_no_floor_says_so():
    """With every floor skipped (a from_config model's zero-shot floor) or none asked for, the
    verdict keeps a cell and says nothing showed it beats a cheaper answer; with a floor it
    reads the comparison instead."""
    from campaign.evaluate import words
    from campaign.evaluate.records import KeptCell

    kept = KeptCell(cell="lr=0.001", kept_as="control")
    lines = words.verdict_lines(kept, None, None, None, "validation", "test", "token_f1")
    assert lines[0].startswith("Keep: lr=0.001")
    assert any("none was scored" in line for line in lines), lines
    with_floor = words.verdict_lines(
        kept, None, "floor/retrieval", None, "validation", "test", "token_f1"
    )
    assert not any("none was scored" in line for line in with_floor)


def test_a_variant_no_item_of_which_moved_is_adopted_only_on_enough_items():
    """Per-item scores in [0, 1], the variant equal to its run on every item: the t statistic
    is degenerate (p 0 at any n). A one-point loss needs a share of 1 % of the items to move,
    so 80 unmoved items cannot prove it ((0.99)^80 = 0.45), 1,000 can ((0.99)^1000 < 1e-4).
    The extraction example adopted its kv_int4 cache on 80 such items and lost 0.6 points on
    test."""
    from campaign.evaluate import questions

    rng = np.random.default_rng(0)
    policy = {"min_useful_effect": 0.01, "max_quality_loss": 0.01}
    decided = {}
    for n in (80, 1000):
        ref = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], n)
        row = questions.quantized_row(ref, ref.copy(), 0.95, 0.01)
        assert row["test"] == questions.PAIRED_T and row["items_changed"] == 0
        rows = [{"kind": "quantized", "subject": "v", "metric": "json_fields", **row}]
        questions.decide_family(rows, 0.95, 0.8, policy)
        decided[n] = rows[0]["decision"]
    # not "too few items": on 80 items an outcome with ten or more moved can adopt
    assert decided == {80: decide.INCONCLUSIVE, 1000: decide.ADOPT}
    # One item of 80 moved, either way: not safer than none moved (the t alone adopted both).
    ref = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], 80)
    for step in (-0.25, 0.25):
        var = ref.copy()
        var[int(np.argmax((ref > 0.3) & (ref < 0.7)))] += step
        rows = [{"kind": "quantized", "subject": "v", "metric": "json_fields",
                 **questions.quantized_row(ref, var, 0.95, 0.01)}]  # fmt: skip
        questions.decide_family(rows, 0.95, 0.8, policy)
        assert rows[0]["decision"] != decide.ADOPT, (step, rows[0]["p_value"])


def test_differences_with_no_spread_decide_only_on_the_count_bound():
    """Every item moved by the same amount has no spread for the t to measure: ten items each
    0.5 points lower gave p 0 and an interval of zero width (adopted on ten items). Now the
    count bound decides at any count and the interval is that bound inverted: ten items cannot
    adopt, and 100 unmoved items (p 0.366) get an interval that reaches below -margin, as the
    decision says, where it was [0, 0]."""
    from campaign.evaluate import questions

    policy = {"min_useful_effect": 0.01, "max_quality_loss": 0.01}
    for n, d, p in ((10, -0.005, 1.0), (100, 0.0, 0.99**100)):
        ref = np.full(n, 0.5)
        rows = [{"kind": "quantized", "subject": "v", "metric": "token_f1",
                 **questions.quantized_row(ref, ref + d, 0.95, 0.01)}]  # fmt: skip
        questions.decide_family(rows, 0.95, 0.8, policy)
        r = rows[0]
        assert r["p_value"] == pytest.approx(p)
        assert r["decision"] == decide.INCONCLUSIVE  # other outcomes on n >= 10 items adopt
        assert r["ci_low"] < -0.01 and r["adj_low"] < -0.01 and r["adj_high"] > d


def test_an_adoption_on_scores_in_0_1_says_the_loss_it_cannot_see():
    """A mean over n items cannot see a loss carried by fewer items than the sample is likely
    to hold one of (0.55 % of items collapsing to 0 at 300 items: adopted at a loss beyond the
    margin in about a fifth of campaigns). The adoption's line says so with the share for its
    own n (1 - 0.025^(1/n): 1.2 % at 300, 0.37 % at 1,000); a rejection does not."""
    from campaign.evaluate import questions

    policy = {"min_useful_effect": 0.01, "max_quality_loss": 0.01}
    rng = np.random.default_rng(3)
    for n, share in ((300, "1.2 %"), (1000, "0.37 %")):
        ref = rng.beta(4, 2, n)
        for loss, adopted in ((0.001, True), (0.05, False)):
            var = np.clip(ref - loss + rng.normal(0, 0.005, n), 0, 1)
            rows = [{"kind": "quantized", "subject": "v", "reference": "run r",
                     **questions.quantized_row(ref, var, 0.95, 0.01)}]  # fmt: skip
            questions.decide_family(rows, 0.95, 0.8, policy)
            line = words.decision_line(rows[0], "validation", "token_f1", policy)
            assert (rows[0]["decision"] == decide.ADOPT) == adopted, line
            assert ("paired t" in line) and ("Tango" not in line), line
            assert (f"up to {share} of items could collapse unseen" in line) == adopted, line
            assert (f"no item of {n} lost more than half" in line) == adopted, line
