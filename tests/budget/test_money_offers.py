"""Hand-computed budget cases: currency formatting, packages against hourly prices, a deadline
that rules out the cheapest offer, the margin, and the extrapolation to an unmeasured card."""

from __future__ import annotations

import math

import pytest

from campaign.budget.money import format_hours, format_money
from campaign.budget.offers import (
    Offer,
    Package,
    card_hours,
    cheapest,
    lpt_loads,
    measured_on,
    options,
    package_vs_hourly,
    work_hours,
)


def offer(name="a", hourly=2.0, hourly_gpus=1, packages=(), gpu="A100", peak=100.0) -> Offer:
    return Offer(name, gpu, 80.0, peak, hourly, hourly_gpus, tuple(packages))


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (1234.5, "1,234.50 EUR"),
        (0.0, "0.00 EUR"),
        (0.004, "< 0.01 EUR"),
        (0.005, "0.01 EUR"),
        (-12.345, "-12.35 EUR"),
        (1_000_000, "1,000,000.00 EUR"),
        (math.nan, "unknown"),
    ],
)
def test_money_is_grouped_with_two_decimals_and_the_code(amount, text):
    assert format_money(amount, "EUR") == text


def test_hours_read_in_their_unit():
    assert [format_hours(h) for h in (10 / 3600, 0.5, 3.25, 96.0)] == [
        "10 s",
        "30.0 min",
        "3.2 h",
        "4.0 days",
    ]


def test_a_package_cheaper_than_hourly():
    # Two 30 h runs = 60 card-hours: 120.00 by the hour, 100.00 for a 3-day package (72 h
    # window holds both runs on its one card). Break-even: 100 / 2 = 50 card-hours.
    o = offer(packages=[Package(3, 100.0, 1)])
    row = package_vs_hourly(o, o.packages[0], [30.0, 30.0], deadline_hours=1000)
    assert row["verdict"] == "cheaper than hourly"
    assert row["hourly_cost_of_work"] == 120.0
    assert row["break_even_card_hours"] == 50.0
    assert row["price_per_card_hour"] == pytest.approx(100 / 72)
    best = cheapest(options(o, [30.0, 30.0], 1000))
    assert (best.pricing, best.cost, best.wall_hours) == ("3-day package x1", 100.0, 60.0)


def test_a_package_dearer_than_hourly():
    # 20 card-hours: 40.00 by the hour against 100.00 for the package.
    o = offer(packages=[Package(3, 100.0, 1)])
    row = package_vs_hourly(o, o.packages[0], [10.0, 10.0], deadline_hours=1000)
    assert row["verdict"] == "dearer than hourly"
    best = cheapest(options(o, [10.0, 10.0], 1000))
    assert (best.pricing, best.cost) == ("hourly", 40.0)


def test_a_package_that_cannot_hold_the_work_is_not_cheaper():
    # A 100 h run does not fit a 72 h window: the package alone cannot do it.
    o = offer(packages=[Package(3, 100.0, 1)])
    row = package_vs_hourly(o, o.packages[0], [100.0], deadline_hours=1000)
    assert row["verdict"] == "does not hold the work"


def test_a_mix_of_package_and_hourly():
    # Runs of 70 h and 20 h: the 3-day package holds the 70 h run, the 20 h run goes hourly
    # (40.00): 140.00, done in 70 h. All hourly: 180.00 (90 h on one card); two packages: 200.00.
    o = offer(packages=[Package(3, 100.0, 1)])
    costs = {x.pricing: x.cost for x in options(o, [70.0, 20.0], 1000)}
    assert costs == {
        "hourly": 180.0,
        "3-day package x1 + hourly": 140.0,
        "3-day package x2": 200.0,
    }
    best = cheapest(options(o, [70.0, 20.0], 1000))
    assert (best.pricing, best.wall_hours) == ("3-day package x1 + hourly", 70.0)


def test_a_run_on_several_cards_holds_them_all_at_once():
    # Runs of 4 h on 2 cards, 3 h and 2 h on one, on 2 cards: the 4 h run on both (0-4 h),
    # then 3 h on card 0 and 2 h on card 1: done in 7 h; 4 x 2 + 3 + 2 = 13 card-hours, 26.00.
    hours, cards = [3.0, 4.0, 2.0], [1, 2, 1]
    assert lpt_loads(hours, 2, cards) == [7.0, 6.0]
    assert lpt_loads([3.0, 4.0, 2.0], 2) == [4.0, 5.0]  # a card each: plain LPT
    (hourly,) = options(offer(hourly_gpus=2), hours, 1000, cards)
    assert (hourly.cost, hourly.wall_hours, hourly.hourly_hours) == (26.0, 7.0, 13.0)
    # A 2-card run on an offer that rents one card cannot run there.
    (one,) = options(offer(hourly_gpus=1), hours, 1000, cards)
    assert (one.feasible, one.why) == (False, "a run takes 2 cards, the offer rents 1 by the hour")


def test_a_run_takes_its_cards_from_one_package_copy():
    # A 30 h run on 2 cards: two 1-card packages are two machines, neither holds it; it runs
    # by the hour on 2 cards (60 card-hours, 120.00) on top of what the packages cost.
    o = offer(hourly_gpus=2, packages=[Package(3, 100.0, 1)])
    costs = {x.pricing: x.cost for x in options(o, [30.0], 1000, [2])}
    assert costs == {
        "hourly": 120.0,
        "3-day package x1 + hourly": 220.0,
        "3-day package x2 + hourly": 320.0,
    }
    # A 2-card package holds it and a 1-card 30 h run after it on one of its cards: 60 h,
    # 100.00, against 90 card-hours by the hour (180.00).
    o = offer(hourly_gpus=2, packages=[Package(3, 100.0, 2)])
    row = package_vs_hourly(o, o.packages[0], [30.0, 30.0], 1000, [2, 1])
    assert (row["work_card_hours"], row["verdict"]) == (90.0, "cheaper than hourly")
    best = cheapest(options(o, [30.0, 30.0], 1000, [2, 1]))
    assert (best.pricing, best.cost, best.wall_hours) == ("3-day package x1", 100.0, 60.0)


def test_flops_on_an_unmeasured_card_split_over_the_run_s_cards():
    # 7.2e17 FLOPs at 50 % of 100 TFLOP/s: 4 h of one card; on 2 cards 2 h of wall time.
    o = offer(peak=100.0)
    assert card_hours(1.0, 7.2e17, o, False, 0.5)[0] == pytest.approx(4.0)
    assert card_hours(1.0, 7.2e17, o, False, 0.5, cards=2)[0] == pytest.approx(2.0)


def test_a_deadline_rules_out_the_cheapest_offer():
    # Four 10 h runs. Offer cheap: 1.00/h on one card -> 40.00 but 40 h. Offer fast: 3.00/h on
    # four cards -> 120.00 in 10 h. A 24 h deadline leaves only the fast one; 48 h the cheap.
    cheap, fast = offer("cheap", 1.0, 1), offer("fast", 3.0, 4)
    runs = [10.0] * 4
    both = options(cheap, runs, 24) + options(fast, runs, 24)
    assert [(x.offer, x.feasible) for x in both] == [("cheap", False), ("fast", True)]
    assert "takes 40.0 h on 1 card(s), deadline 24 h" == both[0].why
    assert (cheapest(both).offer, cheapest(both).cost) == ("fast", 120.0)
    later = options(cheap, runs, 48) + options(fast, runs, 48)
    assert (cheapest(later).offer, cheapest(later).cost) == ("cheap", 40.0)


def test_the_deadline_shortens_a_package_window():
    # A 7-day package cannot be used past a 50 h deadline: a 60 h run does not fit in it.
    o = offer(hourly=None, packages=[Package(7, 100.0, 1)])
    (only,) = options(o, [60.0], 50)
    assert not only.feasible
    assert cheapest([only]) is None


def test_the_margin_is_added_to_every_run():
    # Two runs forecast at 10 h on the measured card, margin 20 %: 12 h each, 24 card-hours,
    # 48.00 at 2.00/h.
    rows = [{"forecast_hours": 10.0, "flops": math.nan}] * 2
    hours, how = work_hours(rows, offer(), measured=True, utilization=0.5, margin=0.2)
    assert hours == [12.0, 12.0] and how == "measured"
    assert cheapest(options(offer(), hours, 1000)).cost == pytest.approx(48.0)


def test_an_unmeasured_card_is_extrapolated_from_flops():
    # 3.6e15 FLOPs at 50 % of 1 TFLOP/s = 7200 s = 2 h, whatever the measured hours were.
    o = offer(peak=1.0)
    assert card_hours(99.0, 3.6e15, o, measured=False, utilization=0.5) == (
        2.0,
        "FLOPs at 50% of 1 TFLOP/s",
    )
    assert card_hours(99.0, 3.6e15, o, measured=True, utilization=0.5) == (99.0, "measured")
    # The job's overhead (start-up, data, writes) is added, not scaled by the card.
    assert card_hours(99.0, 3.6e15, o, False, 0.5, overhead_hours=0.25)[0] == 2.25


def test_a_card_counts_as_measured_by_the_reference_or_a_recorded_device():
    ref = offer("ref", gpu="cpu")
    assert measured_on(offer(gpu="CPU"), ref, set())
    assert measured_on(offer(gpu="H200"), ref, {"NVIDIA H200"})
    assert not measured_on(offer(gpu="A100"), ref, {"NVIDIA H200"})


def test_runs_are_placed_longest_first_on_the_least_loaded_card():
    assert lpt_loads([3, 5, 3, 4, 3], 2) == [8, 10]
    assert lpt_loads([], 3) == [0.0, 0.0, 0.0]


def test_work_of_unknown_hours_is_not_sized_nor_ruled_out_by_nan():
    # No FLOP count to scale the measured hours to this card: the rows say so in words.
    o = offer(packages=[Package(3, 100.0, 1)])
    row = package_vs_hourly(o, o.packages[0], [math.nan], deadline_hours=1000)
    assert row["verdict"] == "cannot be sized: the work's hours are unknown"
    hourly = next(x for x in options(o, [math.nan], 1000) if x.pricing == "hourly")
    assert not hourly.feasible and "nan" not in hourly.why and "unknown" in hourly.why
