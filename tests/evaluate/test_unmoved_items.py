"""Non-inferiority on per-item scores in [0, 1] when most items do not move (unchanged
generations, items every model fails): the moved items decide, as a sample of their own, so
the test is not the t on all n items with n - 1 df it does not have."""

import numpy as np
import pytest

from campaign.evaluate import comparison as cmp
from campaign.evaluate import decide, questions

POLICY = {"min_useful_effect": 0.01, "max_quality_loss": 0.01}


def token_f1_pair(seed: int, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """(reference, variant) token-F1-like scores: 40 % of items at 0 for both, the rest at 1
    (35 %) or Beta(2, 1.5); 20 % of those regenerate (a fresh score, 0 one time in nine): a
    true loss of one point, about 89 % of differences exactly 0."""
    rng = np.random.default_rng(seed)
    fail = rng.random(n) < 0.4
    ref = np.where(fail, 0.0, np.where(rng.random(n) < 0.35, 1.0, rng.beta(2, 1.5, n)))
    moved = (~fail) & (rng.random(n) < 0.2)
    collapsed = rng.random(n) < 0.1155
    new = np.where(collapsed, 0.0, np.where(rng.random(n) < 0.35, 1.0, rng.beta(2, 1.5, n)))
    return ref, np.where(moved, new, ref)


def test_a_variant_losing_the_margin_on_few_moved_items_is_not_adopted():
    ref, var = token_f1_pair(28)
    d = var - ref
    assert np.count_nonzero(d) == 34
    skewed = cmp.SkewedMean.of(d)
    # the t on all 300 items (Hall's guard and all) would adopt at p 0.020; the moved items
    # read on their own 33 df do not (p 0.032)
    assert skewed._p(skewed.mean + 0.01, skewed.gamma) < 0.025
    row = questions.quantized_row(ref, var, 0.95, 0.01)
    assert row["p_value"] == pytest.approx(0.0321, abs=1e-3)
    rows = [{"kind": "quantized", "subject": "int8", **row}]
    questions.decide_family(rows, 0.95, 0.8, POLICY)
    assert rows[0]["decision"] == decide.INCONCLUSIVE
    # the interval is the tests inverted: its lower end is below the margin, as the p says
    assert rows[0]["ci_low"] < -0.01


def test_when_every_item_moves_the_test_is_the_one_on_every_item():
    rng = np.random.default_rng(0)
    d = -0.01 + 0.1 * rng.standard_normal(300)
    skewed = cmp.SkewedMean.of(d)
    assert skewed.moved is None
    assert skewed.p_above(-0.02) == skewed._p(skewed.mean + 0.02, skewed.gamma)


def test_a_variant_that_barely_changed_on_a_few_items_is_adopted():
    """5 of 300 items moved by a few hundredths (a cheap variant that hardly changed): adopted
    within a five-point margin, its interval a few hundredths wide; the moved items' own test,
    which cannot pass on so few, is left to the count bound below ten moved."""
    ref = np.linspace(0.0, 1.0, 300)
    var = ref.copy()
    var[[10, 50, 90, 130, 170]] += [0.02, -0.01, 0.03, -0.02, 0.01]
    row = questions.quantized_row(ref, var, 0.95, 0.05)
    rows = [{"kind": "quantized", "subject": "int8", **row}]
    questions.decide_family(rows, 0.95, 0.8, POLICY | {"max_quality_loss": 0.05})
    assert rows[0]["decision"] == decide.ADOPT
    assert -0.01 < rows[0]["ci_low"] <= rows[0]["ci_high"] < 0.01
