"""A rare collapse is said where the user reads: beside a variant's mean, the items on which
it lost more than half the run's own score and the exact bound on the share of items that
could collapse so, in its decision line and in the verdict block's adopted variants."""

import numpy as np

from campaign.evaluate import comparison as cmp
from campaign.evaluate import decide, questions, records, words

SPEC = {"evaluation": {"decide_on": "validation", "metric": "token_f1", "confidence": 0.95,
                       "min_useful_effect": 0.01, "max_quality_loss": 0.01}}  # fmt: skip


def _cell(split: str) -> dict:
    return {"variant": "cell: lr=1", "kind": "cell", "cell": "lr=1", "cell_id": "id-lr=1",
            "split": split, "metric": "token_f1", "value": 0.7, "ci_low": 0.65,
            "ci_high": 0.75, "interval_over": "crossed"}  # fmt: skip


def _verdict(ref: np.ndarray, var: np.ndarray) -> tuple[dict, records.Decisions]:
    row = questions.quantized_row(ref, var, 0.95, 0.01)
    rows = [{"kind": "quantized", "subject": "r1/int8", "reference": "r1", "split": "validation",
             "metric": "token_f1", **row}]  # fmt: skip
    questions.decide_family(rows, 0.95, 0.8, SPEC["evaluation"])
    run = {"variant": "r1", "kind": "run", "cell": "lr=1", "split": "validation",
           "metric": "token_f1", "value": 0.7}  # fmt: skip
    metric_rows = [_cell("validation"), _cell("test"), run]
    public = [questions.public(r) for r in rows]
    return rows[0], records.build(SPEC, public, metric_rows, None, "lr=1")


def test_an_adoption_says_how_many_items_could_collapse_unseen_and_what_would_bound_it():
    rng = np.random.default_rng(1)
    ref = rng.beta(4, 2, 300)
    var = np.clip(ref - 0.001 + rng.normal(0, 0.002, 300), 0, 1)
    row, d = _verdict(ref, var)
    assert row["decision"] == decide.ADOPT and row["collapsed"] == 0
    said = "up to 1.2 % of items could collapse unseen at this item count; 736 items"
    assert said in words.decision_line(row, "validation", "token_f1", SPEC["evaluation"])
    block = words.verdict_block(records.evaluation_verdict(d, [], "in the budget"))
    also = next(line for line in block if line.startswith("  Also adopted"))
    assert "r1/int8 (no item of 300 lost more than half its score; up to 1.2 %" in also


def test_collapsed_items_are_counted_and_their_share_bounded_exactly():
    ref = np.full(300, 0.8)
    var = ref.copy()
    var[:2] = 0.0  # two collapses among 300 items
    var[2:5] = 0.5  # lost 37.5 % of the score: not a collapse
    g = cmp.collapse_guard(ref, var, 0.95)
    assert g["collapsed"] == 2
    assert g["collapse_low"] > 0 and 0.02 < g["collapse_high"] < 0.025  # CP [0.08, 2.4] %
    assert g["collapse_items"] == 736  # 0.995^736 < 0.025 <= 0.995^735
    # 0/1 items: a loss is a collapse, a gain is not
    g = cmp.collapse_guard(np.array([1.0, 1.0, 0.0]), np.array([0.0, 1.0, 1.0]), 0.95)
    assert g["collapsed"] == 1
