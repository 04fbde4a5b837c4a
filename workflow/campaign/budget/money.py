"""Amounts of money as a user reads them: grouped thousands, two decimals, the currency code."""

from __future__ import annotations

import math


def format_money(amount: float, currency: str) -> str:
    """1234.5, "EUR" -> "1,234.50 EUR"; a positive amount under one cent -> "< 0.01 EUR" (it is
    not free); NaN -> "unknown"."""
    if amount is None or (isinstance(amount, float) and math.isnan(amount)):
        return "unknown"
    if 0 < amount < 0.005:
        return f"< 0.01 {currency}"
    text = f"{abs(amount):,.2f}"
    sign = "-" if amount < 0 and text != "0.00" else ""
    return f"{sign}{text} {currency}"


def format_hours(hours: float) -> str:
    """Hours in the unit that reads best: "42 s", "12.5 min", "3.2 h", "4.1 days"."""
    if hours is None or (isinstance(hours, float) and math.isnan(hours)):
        return "unknown"
    seconds = hours * 3600
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if hours < 48:
        return f"{hours:.1f} h"
    return f"{hours / 24:.1f} days"
