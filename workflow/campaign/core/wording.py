"""How every phase writes a metric: a level in percent with its interval, a difference in signed
points. One wording, so a number reads the same in the evaluation's summary, the budget's and the
report's sections."""

from __future__ import annotations

import math


def points(value: float) -> str:
    """A metric difference in points, signed: +4.1."""
    return f"{value * 100:+.1f}"


def percent(value: float | None) -> str:
    """A metric level in percent: 0.912 -> "91.2 %" (differences are in points: `points`)."""
    if value is None or not math.isfinite(value):
        return "not measured"
    return f"{value * 100:.1f} %"


def level_words(value: float | None, low: float | None, high: float | None) -> str:
    """A level with its interval, in percent: "91.2 % [88.0, 94.1]"."""
    if value is None or not math.isfinite(value):
        return "not measured"
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return f"{percent(value)} (no interval)"
    return f"{percent(value)} [{low * 100:.1f}, {high * 100:.1f}]"
