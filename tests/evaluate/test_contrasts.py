"""Ablation effects as contrasts over the plan's cells: the weights equal hand-derived ones."""

from campaign.evaluate.effects import contrasts

FACTORS = ["train.lr", "train.max_length"]
CONTROL = ("0.001", "32")


def by_name(found):
    return {c.name: dict(c.weights) for c in found}


def test_full_two_by_two_main_effects_and_interaction():
    cells = [("0.001", "32"), ("0.001", "64"), ("0.003", "32"), ("0.003", "64")]
    found = by_name(contrasts(FACTORS, cells, CONTROL))
    # main effect of lr: the mean of (lr high - lr low) at each max_length
    assert found["train.lr 0.001 -> 0.003"] == {
        ("0.003", "32"): 0.5,
        ("0.001", "32"): -0.5,
        ("0.003", "64"): 0.5,
        ("0.001", "64"): -0.5,
    }
    assert found["train.lr 0.001 -> 0.003 x train.max_length 32 -> 64"] == {
        ("0.003", "64"): 1.0,
        ("0.003", "32"): -1.0,
        ("0.001", "64"): -1.0,
        ("0.001", "32"): 1.0,
    }
    assert sum(1 for name in found if name.endswith("(cell)")) == 3


def test_one_at_a_time_main_effect_is_the_moved_cell_against_the_control():
    cells = [("0.001", "32"), ("0.003", "32"), ("0.001", "64")]
    found = by_name(contrasts(FACTORS, cells, CONTROL))
    assert found["train.lr 0.001 -> 0.003"] == {("0.003", "32"): 1.0, ("0.001", "32"): -1.0}
    assert found["train.max_length 32 -> 64"] == {("0.001", "64"): 1.0, ("0.001", "32"): -1.0}
    # no cell moves both factors: the interaction is not estimable, so it is not reported
    assert not [n for n in found if " x " in n]


def test_half_fraction_uses_balanced_means_when_no_partner_exists():
    factors = ["a", "b", "c"]
    control = ("-", "-", "-")
    # 2^(3-1) with c = ab: (-,-,+) (+,-,-) (-,+,-) (+,+,+); the control is not a cell of it
    cells = [("-", "-", "+"), ("+", "-", "-"), ("-", "+", "-"), ("+", "+", "+")]
    found = by_name(contrasts(factors, cells + [control], control))
    # with the control added, a has a partner only for (+,-,-): matched contrast
    assert found["a - -> +"] == {("+", "-", "-"): 1.0, ("-", "-", "-"): -1.0}
    found = by_name(contrasts(factors, cells, ("-", "-", "+")))
    # b: no cell with b=+ has a partner with b=- (others equal): balanced means instead
    assert found["b - -> +"] == {
        ("-", "+", "-"): 0.5,
        ("+", "+", "+"): 0.5,
        ("-", "-", "+"): -0.5,
        ("+", "-", "-"): -0.5,
    }


def test_effects_carry_the_plans_estimability_and_aliases():
    one_at_a_time = [("0.001", "32"), ("0.003", "32"), ("0.001", "64")]
    found = {c.name: c for c in contrasts(FACTORS, one_at_a_time, CONTROL)}
    assert found["train.lr 0.001 -> 0.003"].estimability == "at_control"
    factors = ["a", "b", "c"]
    cells = [("-", "-", "+"), ("+", "-", "-"), ("-", "+", "-"), ("+", "+", "+")]
    found = {c.name: c for c in contrasts(factors, cells, ("-", "-", "+"))}
    # 2^(3-1) with c = ab: a main effect holds only if b x c is negligible
    assert found["a - -> +"].estimability == "if_additive"
    assert found["a - -> +"].aliases == (("b", "c"),)
    assert not [n for n in found if " x " in n]  # interactions aliased with main effects
