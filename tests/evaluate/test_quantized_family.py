"""A run's compressed variants are one Holm family: reject reads the family-adjusted interval
(as adopt reads the Holm-adjusted p), and "too few items" is said exactly when no outcome on
the items could adopt at the family-adjusted level."""

import numpy as np
import pytest

from campaign.evaluate import comparison as cmp
from campaign.evaluate import decide, questions

POLICY = {"min_useful_effect": 0.01, "max_quality_loss": 0.01}


def scores(n: int, losses: int = 0, gains: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(reference, variant) right/wrong on n items: `losses` right -> wrong, `gains` the other
    way, every other item right for both."""
    ref = np.ones(n, dtype=bool)
    var = ref.copy()
    var[:losses] = False
    ref[losses : losses + gains] = False
    return ref, var


def family(*outcomes: tuple[int, int, int]) -> list[dict]:
    rows = []
    for i, (n, losses, gains) in enumerate(outcomes):
        row = questions.quantized_row(*scores(n, losses, gains), 0.95, 0.01)
        rows.append({"kind": "quantized", "subject": f"v{i}", "metric": "accuracy", **row})
    questions.decide_family(rows, 0.95, 0.8, POLICY)
    return rows


def test_reject_reads_the_family_adjusted_interval():
    # 17 of 1000 items lost: the 95 % score interval's upper end is -0.0106 (under the margin),
    # the 97.5 % one (two variants: Bonferroni) is -0.0100, not under it.
    assert cmp.paired_score_interval(17, 0, 1000, 0.95)[1] < -0.01
    assert cmp.paired_score_interval(17, 0, 1000, 0.975)[1] > -0.01
    lost, same = family((1000, 17, 0), (1000, 0, 0))
    assert lost["estimate"] == pytest.approx(-0.017)
    assert lost["ci_high"] < -0.01 < lost["adj_high"]
    assert (lost["adj_low"], lost["adj_high"]) == pytest.approx(
        cmp.paired_score_interval(17, 0, 1000, 0.975)
    )
    assert lost["decision"] == decide.INCONCLUSIVE
    assert same["decision"] == decide.ADOPT
    # Alone in its family the same outcome is rejected.
    (alone,) = family((1000, 17, 0))
    assert alone["decision"] == decide.REJECT


def test_too_few_items_at_the_family_adjusted_level():
    # 400 items, no item changed: one-sided p 0.0222 < 0.025, so alone it is adopted ...
    (alone,) = family((400, 0, 0))
    assert alone["p_value"] == pytest.approx(0.0222, abs=1e-4)
    assert alone["decision"] == decide.ADOPT
    assert alone["smallest_provable_loss"] == pytest.approx(0.00951, abs=1e-5)
    # ... beside a variant that clearly loses, Holm doubles it (0.044): no outcome on 400
    # items could adopt it, and the row says so with the bound at alpha / 4 = 0.0125.
    best, worse = family((400, 0, 0), (400, 40, 0))
    assert best["p_holm"] == pytest.approx(2 * alone["p_value"])
    assert best["decision"] == decide.TOO_FEW_ITEMS
    z2 = 2.241403**2  # the normal quantile of 1 - 0.0125, squared
    assert best["smallest_provable_loss"] == pytest.approx(z2 / (400 + z2), abs=1e-5)
    assert best["items_to_prove"] == cmp.items_to_prove(0.01, 0.0125)
    assert worse["decision"] == decide.REJECT
    # Beside a variant that is clearly better, Holm leaves its p as is (step-down): it can
    # still be adopted, and is. A Bonferroni bound (alpha / 4) would have called it too few.
    best, better = family((400, 0, 0), (400, 0, 40))
    assert best["p_holm"] == pytest.approx(alone["p_value"])
    assert best["decision"] == decide.ADOPT
    assert best["smallest_provable_loss"] == pytest.approx(alone["smallest_provable_loss"])


def test_consistency_rows_are_not_counted_in_the_family():
    rows = []
    for name, consistency in (("fp32", True), ("int8", False)):
        row = questions.quantized_row(*scores(400), 0.95, 0.01, consistency=consistency)
        rows.append({"kind": "quantized", "subject": name, **row})
    questions.decide_family(rows, 0.95, 0.8, POLICY)
    assert [r["decision"] for r in rows] == [decide.CONSISTENCY, decide.ADOPT]
