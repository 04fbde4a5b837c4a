"""The designs: cell counts derived by hand, the control shared and never duplicated, seeds
multiplying the cells, the fractional factorial's generators, resolution and alias table."""

import copy
import itertools

import pytest

from campaign.core.errors import CampaignError
from campaign.core.params import load_params
from campaign.plan import plan_runs
from campaign.plan.designs import fractional, get, names
from campaign.plan.planner import design_parts

THREE_BY_THREE = {
    "train": {
        "lr": [1.0e-3, 3.0e-3, 1.0e-2],
        "max_length": [32, 64, 128],
        "warmup_steps": [0, 10, 20],
    }
}
# Five two-level factors; the baseline's value is each one's first level.
FIVE = {
    "train": {
        "lr": [1.0e-3, 3.0e-3],
        "max_length": [64, 32],
        "warmup_steps": [10, 0],
        "weight_decay": [0.0, 0.1],
        "max_grad_norm": [1.0, 0.5],
    }
}


@pytest.fixture()
def params():
    p = load_params("params.yaml")
    p["train"].update(lr=1.0e-3, max_length=64, warmup_steps=10, weight_decay=0.0)
    p["train"]["max_grad_norm"] = 1.0
    p["ablation"]["seeds"] = [1]
    p["ablation"]["max_runs"] = 1000
    return p


def with_design(params, design, factors, seeds=(1,), **settings):
    p = copy.deepcopy(params)
    p["ablation"].update(design=design, factors=copy.deepcopy(factors), seeds=list(seeds))
    for key, value in settings.items():
        p["ablation"][design][key] = value
    return p


def cells_of(runs):
    return {r.cell for r in runs}


def test_the_registry_lists_the_four_designs():
    assert names() == ["explicit", "fractional", "full", "one_at_a_time"]


def test_full_factorial_3x3x3_is_27_cells(params):
    runs = plan_runs(with_design(params, "full", THREE_BY_THREE))
    assert len(runs) == 27 == len(cells_of(runs))
    levels = THREE_BY_THREE["train"]
    assert {tuple(v for _, v in c) for c in cells_of(runs)} == set(
        itertools.product(levels["lr"], levels["max_length"], levels["warmup_steps"])
    )


def test_one_at_a_time_3x3x3_is_1_plus_sum_of_L_minus_1(params):
    runs = plan_runs(with_design(params, "one_at_a_time", THREE_BY_THREE))
    assert len(runs) == 1 + 3 * (3 - 1) == 7
    control = runs[0]
    assert control.moved == () and control.tier == "control"
    assert dict(control.cell) == {
        "train.lr": 1.0e-3,
        "train.max_length": 64,
        "train.warmup_steps": 10,
    }
    # Each other cell moves exactly one factor off the control's value.
    assert sorted(r.moved for r in runs[1:]) == sorted(
        [("train.lr",)] * 2 + [("train.max_length",)] * 2 + [("train.warmup_steps",)] * 2
    )


def test_one_at_a_time_with_a_baseline_off_the_levels_adds_every_level(params):
    params["train"]["lr"] = 5.0e-4  # not one of lr's levels
    runs = plan_runs(with_design(params, "one_at_a_time", THREE_BY_THREE))
    assert len(runs) == 1 + 3 + 2 + 2


@pytest.mark.parametrize("design", ["full", "one_at_a_time"])
def test_seeds_multiply_the_cells_and_the_control_is_never_duplicated(params, design):
    one = plan_runs(with_design(params, design, THREE_BY_THREE))
    three = plan_runs(with_design(params, design, THREE_BY_THREE, seeds=(1, 2, 3)))
    assert len(three) == 3 * len(one)
    assert len({r.run_id for r in three}) == len(three)
    # Every cell at every seed, once; the control once per seed.
    assert sorted((r.cell, r.seed) for r in three) == sorted(
        (c, s) for c in cells_of(one) for s in (1, 2, 3)
    )
    assert [r.seed for r in three if not r.moved] == [1, 2, 3]


def test_fractional_2_5_minus_2_is_8_cells_resolution_iii(params):
    p = with_design(params, "fractional", FIVE, p=2)
    runs = plan_runs(p)
    assert len(runs) == 8
    keys, levels, baseline, design = design_parts(p)
    lines = design.describe(keys, levels, baseline, p["ablation"])
    assert lines[0] == "fractional 2^(5−2) = 8 cells, resolution III"
    assert "generators: D = AB, E = AC" in lines
    assert "defining relation: I = ABD = ACE = BCDE" in lines
    # The cells are the fraction: in ±1 coding (+ the baseline's level) D = A·B and E = A·C, and
    # every factor is balanced (4 at each level). The control (all +) is one of them.
    signs = []
    for run in runs:
        cell = dict(run.cell)
        signs.append([1 if cell[k] == baseline[k] else -1 for k in keys])
    for a, b, c, d, e in signs:
        assert d == a * b and e == a * c
    assert all(sum(column) == 0 for column in zip(*signs, strict=True))
    assert [1] * 5 in signs and runs[0].moved == ()


def test_fractional_alias_table_equals_the_hand_derived_one():
    # I = ABD = ACE = BCDE. Multiplying each effect by the words and keeping what has at most
    # two letters (A·ABD = BD, A·ACE = CE, A·BCDE = ABCDE; BD·ACE = ABCDE, BD·BCDE = CE):
    hand = {
        "A": ["BD", "CE"],
        "B": ["AD"],
        "C": ["AE"],
        "D": ["AB"],
        "E": ["AC"],
        "AB": ["D"],
        "AC": ["E"],
        "AD": ["B"],
        "AE": ["C"],
        "BC": ["DE"],
        "BD": ["A", "CE"],
        "BE": ["CD"],
        "CD": ["BE"],
        "CE": ["A", "BD"],
        "DE": ["BC"],
    }
    generators = fractional.choose_generators(5, 2)
    assert [fractional.word_text(g) for g in generators] == ["AB", "AC"]
    assert fractional.alias_table(5, generators) == hand


def test_fractional_generators_reach_the_highest_resolution():
    # 2^(6−2): resolution IV (E = ABC, F = ABD: I = ABCE = ABDF = CDEF); 2^(4−1):
    # resolution IV (D = ABC); 2^(7−4): resolution III, the saturated 8-run design.
    for k, p, res, gens in ((6, 2, 4, ["ABC", "ABD"]), (4, 1, 4, ["ABC"]), (7, 4, 3, None)):
        chosen = fractional.choose_generators(k, p)
        words = fractional.defining_words(k, chosen)
        assert fractional.resolution(words) == res, (k, p)
        if gens:
            assert [fractional.word_text(g) for g in chosen] == gens


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda a: a["fractional"].update(p=None), r"^ablation.fractional.p: design fractional"),
        (lambda a: a["fractional"].update(p=3), r"^ablation.fractional.p: 3 is too large for 5"),
        (
            lambda a: a["factors"]["train"].update(lr=[1.0e-3, 3.0e-3, 1.0e-2]),
            r"^ablation.factors.train.lr: design fractional needs exactly 2 levels",
        ),
    ],
)
def test_fractional_settings_errors_name_the_key(params, edit, message):
    p = with_design(params, "fractional", FIVE, p=2)
    edit(p["ablation"])
    with pytest.raises(CampaignError, match=message):
        plan_runs(p)


def test_explicit_cells_with_the_control_shared(params):
    cells = [
        {"train.lr": 3.0e-3},
        {"train.lr": 1.0e-3},
        {"train.max_length": 32, "train.lr": 3.0e-3},
    ]
    p = with_design(params, "explicit", THREE_BY_THREE, seeds=(1, 2), cells=cells)
    runs = plan_runs(p)
    # The second listed cell is the control itself: merged, not duplicated. 3 cells × 2 seeds.
    assert len(runs) == 6
    assert [r.seed for r in runs if not r.moved] == [1, 2]
    assert {dict(r.cell)["train.max_length"] for r in runs} == {64, 32}
    assert {r.moved for r in runs} == {(), ("train.lr",), ("train.lr", "train.max_length")}


@pytest.mark.parametrize(
    "cells, message",
    [
        ([{"train.dropout": 0.1}], r"^ablation.explicit.cells\[0\]: train.dropout is not a factor"),
        ([{}, {"train.lr": 5.0e-3}], r"^ablation.explicit.cells\[1\].train.lr: 0.005 is not one"),
        (None, r"^ablation.explicit.cells: design explicit needs a list of cells"),
    ],
)
def test_explicit_errors_name_the_cell(params, cells, message):
    p = with_design(params, "explicit", THREE_BY_THREE, cells=cells)
    with pytest.raises(CampaignError, match=message):
        plan_runs(p)


def test_a_design_setting_for_another_design_is_refused(params):
    from campaign.plan import PHASE

    p = with_design(params, "full", THREE_BY_THREE)
    p["ablation"]["fractional"]["p"] = 1
    with pytest.raises(CampaignError, match=r"^ablation.fractional.p: only used by design"):
        PHASE.check_params(p)


def test_unknown_design_is_one_line():
    with pytest.raises(CampaignError, match=r"^ablation.design: unknown design 'latin'"):
        get("latin")
