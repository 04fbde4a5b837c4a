"""GPU offers and what a set of runs costs on each: by the hour, on fixed-term packages, or a
mix, within a deadline.

A run is one job on one card; runs do not split across cards. With several cards, runs are
placed longest first on the least loaded card (LPT), and the wall time is the most loaded card's
hours. Hourly cards are paid for the hours they run; a package is paid whole, used or not, and
its cards are usable for min(its term, the deadline). A mix fills the packages' cards first
(longest runs first, each on the least loaded card where it still fits in the window) and runs
what does not fit by the hour.

Hours here are card-hours on the offer's own card (see `card_hours`), margin included.
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
) -> tuple[float, str]:
    """(hours of one run on the offer's card, how it was obtained). Where the card was
    measured: the calibrated hours measured there. Elsewhere: the run's FLOPs at
    peak_tflops x utilization, plus the job's measured overhead (start-up, data, writes: not
    FLOPs, so not faster on a faster card)."""
    if measured:
        return reference_hours, "measured"
    how = f"FLOPs at {utilization:.0%} of {offer.peak_tflops:g} TFLOP/s"
    if overhead_hours:
        how += " + measured job overhead"
    return flops / (offer.peak_tflops * 1e12 * utilization) / 3600.0 + overhead_hours, how


def work_hours(
    runs: list[dict], offer: Offer, measured: bool, utilization: float, margin: float
) -> tuple[list[float], str]:
    """(card-hours of each run on the offer's card with the margin added, how they were
    obtained). runs: forecast rows with forecast_hours (on the measured card), flops and
    overhead_hours (the calibration's per-job overhead; 0 when absent)."""
    hours, how = [], "measured" if measured else "no runs"
    for r in runs:
        overhead = r.get("overhead_hours", 0.0)
        overhead = overhead if math.isfinite(overhead) else 0.0
        h, how = card_hours(r["forecast_hours"], r["flops"], offer, measured, utilization, overhead)
        hours.append(h * (1 + margin))
    if any(math.isnan(h) for h in hours):
        how = "unknown: no FLOP count"
    return hours, how


def lpt_loads(hours: list[float], cards: int) -> list[float]:
    """Each card's hours after placing the runs longest first on the least loaded card."""
    loads = [0.0] * max(cards, 1)
    for h in sorted(hours, reverse=True):
        i = min(range(len(loads)), key=lambda k: (loads[k], k))
        loads[i] += h
    return loads


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


def hourly_option(offer: Offer, hours: list[float], deadline_hours: float) -> Option | None:
    if offer.hourly is None:
        return None
    wall = max(lpt_loads(hours, offer.hourly_gpus)) if hours else 0.0
    total = sum(hours)
    ok = wall <= deadline_hours
    why = "" if ok else f"takes {wall:.1f} h on {offer.hourly_gpus} card(s)"
    why += f", deadline {deadline_hours:g} h" if why else ""
    return Option(offer.name, "hourly", total * offer.hourly, wall, total, ok, why)


def package_option(
    offer: Offer, package: Package, copies: int, hours: list[float], deadline_hours: float
) -> Option:
    """`copies` of `package` bought at once, the rest (if any) by the hour."""
    window = min(package.hours, deadline_hours)
    loads = [0.0] * (copies * package.gpus)
    overflow: list[float] = []
    for h in sorted(hours, reverse=True):
        i = min(range(len(loads)), key=lambda k: (loads[k], k))
        if loads[i] + h <= window:
            loads[i] += h
        else:
            overflow.append(h)
    name = f"{package.days:g}-day package x{copies}"
    cost = copies * package.price
    wall = max(loads) if loads else 0.0
    if not overflow:
        return Option(offer.name, name, cost, wall, 0.0, True, "")
    if offer.hourly is None:
        return Option(
            offer.name,
            name,
            cost,
            math.nan,
            0.0,
            False,
            f"{len(overflow)} run(s) do not fit its {window:g} h window; no hourly price",
        )
    extra = max(lpt_loads(overflow, offer.hourly_gpus))
    wall = max(wall, extra)
    ok = wall <= deadline_hours
    why = "" if ok else f"takes {wall:.1f} h, deadline {deadline_hours:g} h"
    return Option(
        offer.name,
        f"{name} + hourly",
        cost + sum(overflow) * offer.hourly,
        wall,
        sum(overflow),
        ok,
        why,
    )


def options(offer: Offer, hours: list[float], deadline_hours: float) -> list[Option]:
    """Every way to run `hours` (one entry per run) on this offer: hourly, and each package
    bought 1 .. enough copies to give every run its own card (with hourly top-up)."""
    out = []
    hourly = hourly_option(offer, hours, deadline_hours)
    if hourly is not None:
        out.append(hourly)
    for package in offer.packages:
        most = max(1, math.ceil(len(hours) / package.gpus))
        for copies in range(1, most + 1):
            out.append(package_option(offer, package, copies, hours, deadline_hours))
    return out


def cheapest(opts: list[Option]) -> Option | None:
    """The cheapest feasible option (ties: the sooner finished, then the name)."""
    ok = [o for o in opts if o.feasible]
    if not ok:
        return None
    return min(ok, key=lambda o: (round(o.cost, 9), o.wall_hours, o.offer, o.pricing))


def package_vs_hourly(
    offer: Offer, package: Package, hours: list[float], deadline_hours: float
) -> dict:
    """Does one copy of `package` beat paying the same work by the hour? The break-even is
    price / hourly card-hours of work; the package must also hold the work in its window."""
    total = sum(hours)
    one = package_option(offer, package, 1, hours, deadline_hours)
    holds = one.feasible and one.hourly_hours == 0.0
    hourly_cost = math.nan if offer.hourly is None else total * offer.hourly
    break_even = math.nan if not offer.hourly else package.price / offer.hourly
    if not holds:
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
