"""A run's compressed variants are one Holm family: reject reads the exact test of "loses at
most the margin" at the family's Bonferroni level (as adopt reads the Holm-adjusted p), and
"too few items" is said exactly when no outcome on the items could adopt at the
family-adjusted level, and never for a variant whose test passes."""

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


def test_reject_reads_the_exact_test_at_the_family_adjusted_level():
    # 17 of 1000 items lost, none gained: the 95 % score interval's upper end is -0.0106, under
    # the 1-point margin, but a true loss of exactly 1 point gives 17 or more losses in about 3
    # % of campaigns: the exact test (p 0.09 with the rate of gains unknown) does not reject.
    assert cmp.paired_score_interval(17, 0, 1000, 0.95)[1] < -0.01
    (lost,) = family((1000, 17, 0))
    assert lost["decision"] == decide.INCONCLUSIVE
    # 21 lost: exact p 0.017 < 0.025 alone: rejected; beside a second variant Bonferroni
    # doubles it (0.034): not rejected, while the other variant is adopted.
    p = cmp.loss_exceeds_p(21, 0, 1000, 0.01)
    assert 0.0125 < p < 0.025
    (alone,) = family((1000, 21, 0))
    assert alone["decision"] == decide.REJECT
    lost, same = family((1000, 21, 0), (1000, 0, 0))
    assert (lost["adj_low"], lost["adj_high"]) == pytest.approx(
        cmp.paired_score_interval(21, 0, 1000, 0.975)
    )
    assert lost["decision"] == decide.INCONCLUSIVE
    assert same["decision"] == decide.ADOPT


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


def test_a_variant_that_gains_items_is_adopted_though_no_change_could_not_prove_it():
    """180 items, margin 1 point: with no item changed the bound cannot show the margin (too few
    items), but 5 items gained and none lost pass the test: adopt, never "too few items"."""
    (none,) = family((180, 0, 0))
    assert none["decision"] == decide.TOO_FEW_ITEMS
    (gained,) = family((180, 0, 5))
    assert gained["p_holm"] < 0.025
    assert gained["decision"] == decide.ADOPT


def canary_rows(canary: bool) -> list[dict]:
    """A run that barely answers (token F1 under 0.1) and a broken cache of it, as poor on 300
    items, beside a sound variant of another run: scores that cannot see the breakage."""
    rng = np.random.default_rng(0)
    weak = rng.uniform(0.0, 0.1, 300)  # token F1 of a run that barely answers
    broken = questions.quantized_row(weak, np.clip(weak - 0.002, 0, 1), 0.95, 0.01)
    sound = questions.quantized_row(*scores(300), 0.95, 0.01)
    rows = [
        {"kind": "quantized", "subject": "r1/kv_corrupt", "reference": "r1", **broken}
        | ({"_canary": True} if canary else {}),
        {"kind": "quantized", "subject": "r2/int8", "reference": "r2", **sound},
    ]
    questions.decide_family(rows, 0.95, 0.8, POLICY)
    questions.settle_canaries(rows)
    return rows


def test_a_canary_is_never_adopted_and_a_missed_one_is_a_finding():
    """The same scores adopt an ordinary variant (nothing lost on any item) but never a
    canary: it is "canary not rejected", outside the adopted variants and the open questions,
    and `campaign findings` says its scores cannot see a broken model."""
    from campaign.evaluate.findings import evaluation_findings

    assert canary_rows(canary=False)[0]["decision"] == decide.ADOPT
    canary, sound = canary_rows(canary=True)
    assert canary["decision"] == decide.CANARY_MISSED
    assert canary["decision"] not in (decide.ADOPT, *decide.OPEN)
    # its own family: the sound variant's Holm p is what it is alone
    alone = [dict(sound)]
    questions.decide_family(alone, 0.95, 0.8, POLICY)
    assert sound["p_holm"] == alone[0]["p_holm"]
    decisions = {
        "decide_on": "validation",
        "metric": "token_f1",
        "decisions": [questions.public(canary)],
    }
    lines = evaluation_findings(decisions)
    assert any("canary r1/kv_corrupt was not rejected" in line for line in lines), lines
