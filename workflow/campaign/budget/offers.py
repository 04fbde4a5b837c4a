"""GPU offers and what a set of runs costs on each: by the hour, on fixed-term packages, or a
mix, within a deadline.

A run is one job on `cards` cards at once (train.devices: its N processes run side by side, so
it holds N cards for its wall hours and costs wall hours x N card-hours); runs do not split
further. Runs are placed longest first (LPT) on the least loaded cards: a run of w cards takes
the w least loaded ones and starts when the last of them is free; the wall time is the most
loaded card's hours. With one card a run this is plain LPT. Hourly cards are paid for the
card-hours they run; a package is paid whole, used or not, its cards are usable for min(its
term, the deadline), and a run's cards come from one copy of it (one machine). A mix fills the
packages' cards first (longest runs first, each where it still fits in the window) and runs what
does not fit by the hour. A run that takes more cards than an offer has cannot run there.

`hours` here are each run's wall hours on its cards of the offer's kind (see `card_hours`),
margin included; `cards` its cards (absent: one each).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Package:
    days: float
    price: float
    gpus: int

    @property
    def hours(self) -> float:
        return self.days * 24.0

    @property
    def price_per_card_hour(self) -> float:
        return self.price / (self.hours * self.gpus)


@dataclass(frozen=True)
class Offer:
    name: str
    gpu: str
    memory_gib: float
    peak_tflops: float
    hourly: float | None
    hourly_gpus: int
    packages: tuple[Package, ...]

    @classmethod
    def from_params(cls, o: dict) -> Offer:
        packages = tuple(
            Package(float(p["days"]), float(p["price"]), int(p["gpus"])) for p in o["packages"]
        )
        hourly = None if o["hourly"] is None else float(o["hourly"])
        return cls(
            o["name"],
            o["gpu"],
            float(o["memory_gib"]),
            float(o["peak_tflops"]),
            hourly,
            int(o["hourly_gpus"]),
            packages,
        )


# A package or an hourly plan on a card whose hours are unknown: neither held nor ruled out by
# numbers, which would read "nan card-hours" in the summary.
UNSIZED = "cannot be sized: the work's hours are unknown"


def measured_on(offer: Offer, reference: Offer, devices: set[str]) -> bool:
    """Was this offer's card measured? Its card is the reference offer's, or a device a job
    recorded names it (case-insensitive)."""
    gpu = offer.gpu.lower()
    return gpu == reference.gpu.lower() or any(gpu in d.lower() for d in devices)


def card_hours(
    reference_hours: float,
    flops: float,
    offer: Offer,
    measured: bool,
    utilization: float,
    overhead_hours: float = 0.0,
    cards: int = 1,
) -> tuple[float, str]:
    """(wall hours of one run on its `cards` cards of the offer's kind, how they were
    obtained). Where the card was measured: the calibrated wall hours measured there.
    Elsewhere: the run's FLOPs (over all its cards) at peak_tflops x utilization on each of
    its cards, plus the job's measured overhead (start-up, data, writes: not FLOPs, so not
    faster on a faster card)."""
    if measured:
        return reference_hours, "measured"
    how = f"FLOPs at {utilization:.0%} of {offer.peak_tflops:g} TFLOP/s"
    if overhead_hours:
        how += " + measured job overhead"
    per_card = flops / cards / (offer.peak_tflops * 1e12 * utilization) / 3600.0
    return per_card + overhead_hours, how


def work_hours(
    runs: list[dict], offer: Offer, measured: bool, utilization: float, margin: float
) -> tuple[list[float], str]:
    """(wall hours of each run on its cards of the offer's kind with the margin added, how they
    were obtained). runs: forecast rows with forecast_hours (wall hours on the measured card),
    flops, overhead_hours (the calibration's per-job overhead; 0 when absent) and cards (1 when
    absent)."""
    hours, how = [], "measured" if measured else "no runs"
    for r in runs:
        overhead = r.get("overhead_hours", 0.0)
        overhead = overhead if math.isfinite(overhead) else 0.0
        h, how = card_hours(
            r["forecast_hours"],
            r["flops"],
            offer,
            measured,
            utilization,
            overhead,
            int(r.get("cards", 1)),
        )
        hours.append(h * (1 + margin))
    if any(math.isnan(h) for h in hours):
        how = "unknown: no FLOP count"
    return hours, how


def widths_of(hours: list[float], cards: list[int] | None) -> list[int]:
    """The cards each run takes (one each when not given)."""
    return [1] * len(hours) if cards is None else [int(c) for c in cards]


def longest_first(hours: list[float], widths: list[int]) -> list[tuple[float, int]]:
    """(wall hours, cards) of the runs, longest first (the wider first among equals)."""
    return sorted(zip(hours, widths, strict=True), key=lambda r: (-r[0], -r[1]))


def place(loads: list[float], width: int) -> tuple[list[int], float]:
    """(the `width` least loaded cards, the hour the run starts on them: when the most loaded
    of them is free)."""
    chosen = sorted(range(len(loads)), key=lambda k: (loads[k], k))[:width]
    return chosen, max(loads[k] for k in chosen)


def lpt_loads(hours: list[float], cards: int, widths: list[int] | None = None) -> list[float]:
    """Each card's hours after placing the runs longest first, each on the least loaded of
    `cards` cards (a run of w cards: on the w least loaded, from when all w are free).
    widths: the cards each run takes (one each when not given; none may exceed `cards`)."""
    loads = [0.0] * max(cards, 1)
    for h, w in longest_first(hours, widths_of(hours, widths)):
        chosen, start = place(loads, w)
        for k in chosen:
            loads[k] = start + h
    return loads


def card_hours_of(hours: list[float], cards: list[int] | None) -> float:
    """The card-hours of the runs: wall hours x cards, summed."""
    return sum(h * w for h, w in zip(hours, widths_of(hours, cards), strict=True))


def too_wide(widths: list[int], hourly_gpus: int) -> str:
    """Why not, when a run takes more cards than the offer rents by the hour (else "")."""
    widest = max(widths, default=1)
    if widest <= hourly_gpus:
        return ""
    return f"a run takes {widest} cards, the offer rents {hourly_gpus} by the hour"


@dataclass(frozen=True)
class Option:
    """One way to run the work on one offer."""

    offer: str
    pricing: str  # "hourly", "3-day package x2", "7-day package x1 + hourly"
    cost: float
    wall_hours: float
    hourly_hours: float  # card-hours paid by the hour
    feasible: bool
    why: str  # why not, when not feasible


def hourly_option(
    offer: Offer, hours: list[float], deadline_hours: float, cards: list[int] | None = None
) -> Option | None:
    if offer.hourly is None:
        return None
    widths = widths_of(hours, cards)
    total = card_hours_of(hours, widths)
    wide = too_wide(widths, offer.hourly_gpus)
    if wide:
        return Option(offer.name, "hourly", total * offer.hourly, math.nan, total, False, wide)
    wall = max(lpt_loads(hours, offer.hourly_gpus, widths)) if hours else 0.0
    ok = wall <= deadline_hours
    if math.isnan(wall):
        why = f"{UNSIZED} on {offer.gpu}"
    else:
        why = "" if ok else f"takes {wall:.1f} h on {offer.hourly_gpus} card(s)"
    why += f", deadline {deadline_hours:g} h" if why else ""
    return Option(offer.name, "hourly", total * offer.hourly, wall, total, ok, why)


def package_option(
    offer: Offer,
    package: Package,
    copies: int,
    hours: list[float],
    deadline_hours: float,
    cards: list[int] | None = None,
) -> Option:
    """`copies` of `package` bought at once, the rest (if any) by the hour."""
    window = min(package.hours, deadline_hours)
    machines = [[0.0] * package.gpus for _ in range(copies)]
    overflow: list[tuple[float, int]] = []
    for h, w in longest_first(hours, widths_of(hours, cards)):
        spots = [(place(m, w), i) for i, m in enumerate(machines) if w <= len(m)]
        if spots:
            (chosen, start), i = min(spots, key=lambda s: (s[0][1], s[1]))
            if start + h <= window:
                for k in chosen:
                    machines[i][k] = start + h
                continue
        overflow.append((h, w))
    name = f"{package.days:g}-day package x{copies}"
    cost = copies * package.price
    wall = max((max(m) for m in machines), default=0.0)
    if not overflow:
        return Option(offer.name, name, cost, wall, 0.0, True, "")
    over_hours, over_widths = [h for h, _ in overflow], [w for _, w in overflow]
    extra_card_hours = card_hours_of(over_hours, over_widths)
    if offer.hourly is None:
        return Option(
            offer.name,
            name,
            cost,
            math.nan,
            0.0,
            False,
            f"{len(overflow)} run(s) do not fit its {package.gpus} card(s) x {window:g} h; "
            "no hourly price",
        )
    wide = too_wide(over_widths, offer.hourly_gpus)
    if wide:
        why = f"{len(overflow)} run(s) do not fit its {package.gpus} card(s) x {window:g} h; {wide}"
        return Option(offer.name, f"{name} + hourly", cost, math.nan, 0.0, False, why)
    extra = max(lpt_loads(over_hours, offer.hourly_gpus, over_widths))
    wall = max(wall, extra)
    ok = wall <= deadline_hours
    why = "" if ok else f"takes {wall:.1f} h, deadline {deadline_hours:g} h"
    return Option(
        offer.name,
        f"{name} + hourly",
        cost + extra_card_hours * offer.hourly,
        wall,
        extra_card_hours,
        ok,
        why,
    )


def options(
    offer: Offer, hours: list[float], deadline_hours: float, cards: list[int] | None = None
) -> list[Option]:
    """Every way to run `hours` (one entry per run, each on its `cards`) on this offer: hourly,
    and each package bought 1 .. enough copies to give every run its own cards (with hourly
    top-up)."""
    out = []
    hourly = hourly_option(offer, hours, deadline_hours, cards)
    if hourly is not None:
        out.append(hourly)
    for package in offer.packages:
        most = max(1, math.ceil(sum(widths_of(hours, cards)) / package.gpus))
        for copies in range(1, most + 1):
            out.append(package_option(offer, package, copies, hours, deadline_hours, cards))
    return out


def cheapest(opts: list[Option]) -> Option | None:
    """The cheapest feasible option (ties: the sooner finished, then the name)."""
    ok = [o for o in opts if o.feasible]
    if not ok:
        return None
    return min(ok, key=lambda o: (round(o.cost, 9), o.wall_hours, o.offer, o.pricing))


def package_vs_hourly(
    offer: Offer,
    package: Package,
    hours: list[float],
    deadline_hours: float,
    cards: list[int] | None = None,
) -> dict:
    """Does one copy of `package` beat paying the same work by the hour? The break-even is
    price / hourly card-hours of work; the package must also hold the work in its window."""
    total = card_hours_of(hours, cards)
    one = package_option(offer, package, 1, hours, deadline_hours, cards)
    holds = one.feasible and one.hourly_hours == 0.0
    hourly_cost = math.nan if offer.hourly is None else total * offer.hourly
    break_even = math.nan if not offer.hourly else package.price / offer.hourly
    if math.isnan(total):  # no hours on this card (no FLOP count to scale the measured ones)
        verdict = UNSIZED
    elif not holds:
        verdict = "does not hold the work"
    elif offer.hourly is None:
        verdict = "only way to buy"
    else:
        verdict = "cheaper than hourly" if package.price < hourly_cost else "dearer than hourly"
    return {
        "offer": offer.name,
        "gpu": offer.gpu,
        "pricing": f"{package.days:g}-day package",
        "days": package.days,
        "gpus": package.gpus,
        "price": package.price,
        "price_per_card_hour": package.price_per_card_hour,
        "hourly": offer.hourly,
        "break_even_card_hours": break_even,
        "work_card_hours": total,
        "hourly_cost_of_work": hourly_cost,
        "holds_work": holds,
        "verdict": verdict,
    }
