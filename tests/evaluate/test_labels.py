"""The labels and reasons beside a decision say what the numbers say: a variant on per-item
scores is "too few items" only where no outcome on its items could adopt it; the p a line names
is the test's that gave it; "at the bar" only at the bar; identical outputs read identical."""

import sys
from pathlib import Path

import numpy as np

from campaign.evaluate import decide, questions, words

POLICY = {"min_useful_effect": 0.01, "max_quality_loss": 0.01}
S = {"max_quality_loss": 0.01, "min_useful_effect": 0.01}


def decided(ref, var, consistency=False) -> dict:
    row = questions.quantized_row(ref, var, 0.95, 0.01, consistency=consistency)
    rows = [{"kind": "quantized", "subject": "int8", "reference": "run", **row}]
    questions.decide_family(rows, 0.95, 0.8, POLICY)
    return rows[0]


def test_scores_in_0_1_at_300_items_are_not_called_too_few_items():
    # 300 token-F1 items (0.99^300 = 0.049: the count bound at no item moved cannot adopt),
    # but the paired t can: a variant 0.1 points lower on 60 items is adopted on these items,
    # so an undecided one (0.8 points lower on 60 items) is "inconclusive", not "too few".
    rng = np.random.default_rng(0)
    ref = rng.uniform(0.2, 0.9, 300)
    small = ref.copy()
    small[:60] -= 0.001 * rng.uniform(0.5, 1.5, 60)
    assert decided(ref, small)["decision"] == decide.ADOPT
    open_ = ref.copy()
    open_[:60] -= 0.04 * rng.uniform(0.0, 2.0, 60)
    row = decided(ref, open_)
    assert row["decision"] == decide.INCONCLUSIVE
    line = words.decision_line(row, "validation", "token_f1", S)
    assert "count bound" not in line and "paired t" in line


def test_the_line_names_the_count_bound_only_when_it_gave_the_p():
    ref = np.full(300, 0.5)
    few = ref.copy()
    few[:4] -= 0.01  # 4 moved items: the count bound decides
    row = decided(ref, few)
    assert row["p_from"] == "count bound"
    assert "count bound gives p" in words.decision_line(row, "validation", "token_f1", S)


def test_no_count_far_from_the_bar_does_not_say_it_sits_at_the_bar():
    # estimate 4 points against a bar at 1 point, se 2.07 points: 1.9 se from the bar, yet
    # neither seeds (the items' part alone is wider than the gap) nor items (the seed part
    # alone is) decide it
    wanted = decide.what_would_decide(0.05, 3e-5, 4e-4, 6, 300, 0.95, 0.8, 0.01, 10, 0.0)
    assert wanted["seeds_needed"] is None and wanted["items_needed"] is None
    row = {"n_seeds": 6, **wanted}
    said = words._needs(row)
    assert "sits at the bar" not in said
    assert "no number of seeds decides this" in said


def test_identical_outputs_read_identical_not_plus_minus_ten_points():
    for ref in (np.linspace(0.1, 0.9, 33), np.ones(33)):  # [0, 1] scores and 0/1 scores
        row = decided(ref, ref.copy(), consistency=True)
        assert row["decision"] == decide.CONSISTENCY
        assert (row["ci_low"], row["ci_high"]) == (0.0, 0.0)
        assert (row["adj_low"], row["adj_high"]) == (0.0, 0.0)
        line = words.decision_line(row, "validation", "token_f1", S)
        assert "identical to run on all 33 validation items" in line
        assert "[" not in line


def test_the_bench_row_finds_no_label_printed_where_false():
    """bench_stats' label row on the shipped path: "too few items" only where no outcome that
    gains on no item adopts, "identical" only where nothing differs, never an interval for
    identical outputs; the binary generator at 300 items is rightly too few."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_stats

    claims = bench_stats.label_claims(40, 1)
    assert all(false == 0 for _, false in claims.values())
    assert claims["too few items (binary)"][0] > 0 and claims["identical"][0] > 0
