"""What the budget shows: its report sections (the finished jobs and the ways to buy the rest;
the forecast against what each run took) and their figures.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from campaign.budget.money import format_money
from campaign.core.figures import BAD, GOOD, NEUTRAL, empty_figure, figure_axes
from campaign.core.io import read_table, read_text
from campaign.core.stage import Section
from campaign.evaluate import VERDICT_TITLE


def budget_section(plans_path: Path, jobs_path: Path, summary_path: Path) -> Section:
    plans = read_table(
        plans_path,
        (
            "scenario",
            "offer",
            "pricing",
            "runs",
            "cost",
            "currency",
            "wall_hours",
            "meets_deadline",
            "cheapest",
        ),
    )
    jobs = read_table(jobs_path, ("run", "wall_hours", "cost"))
    summary = read_text(summary_path)
    rest = plans[plans["scenario"] == "rest"]
    scenario = "rest" if len(rest) and rest["runs"].max() > 0 else "kept plan"
    chosen = plans[plans["scenario"] == scenario].copy()
    chosen["label"] = chosen["offer"] + ", " + chosen["pricing"]
    currency = str(plans["currency"].iloc[0]) if len(plans) else ""
    best = chosen[chosen["cheapest"].astype(bool)]
    if len(best):
        b = best.iloc[0]
        offer = (
            f"Recommended offer ({scenario}): {b['offer']}, {b['pricing']}: "
            f"{format_money(float(b['cost']), currency)}, done in {b['wall_hours']:.3g} h."
        )
    else:
        offer = f"No offer finishes the {scenario} before the deadline."
    lines = [
        f"{len(jobs)} finished job(s), {jobs['wall_hours'].sum():.3g} h, "
        f"{format_money(float(jobs['cost'].sum()), currency)} measured.",
        offer,
    ]
    shown = [
        "offer",
        "pricing",
        "runs",
        "card_hours",
        "wall_hours",
        "cost",
        "meets_deadline",
        "cheapest",
    ]
    section = Section(
        lines,
        [
            ("Finished jobs", jobs),
            (f"Ways to buy the {scenario}", chosen[[c for c in shown if c in chosen]]),
        ],
        (
            budget_figure,
            (
                chosen[["label", "cost", "meets_deadline", "cheapest"]].reset_index(drop=True),
                currency,
            ),
        ),
    )
    section.pre = split_verdict(summary)[1]
    return section


def split_verdict(summary: str) -> tuple[list[str], str]:
    """(the verdict block's lines, the rest) of the budget's summary.txt, which opens with the
    block (campaign.evaluate.verdict_block) and a blank line; ([], summary) without one."""
    head, blank, rest = summary.partition("\n\n")
    lines = head.splitlines()
    if not blank or not lines or not lines[0].startswith(VERDICT_TITLE + " ("):
        return [], summary
    return lines, rest


def forecast_section(forecast_path: Path) -> Section:
    forecast = read_table(
        forecast_path,
        (
            "run",
            "finished",
            "projected_hours",
            "actual_hours",
            "forecast_from_earlier_hours",
            "forecast_hours",
        ),
    )
    done = forecast[forecast["finished"].astype(bool)]
    lines = [f"{len(done)} of {len(forecast)} planned run(s) finished."]
    for column, what in (
        ("abs_error_projected", "as projected"),
        ("abs_error_calibrated", "calibrated"),
    ):
        if column in forecast and forecast[column].notna().any():
            lines.append(
                f"Median absolute forecast error, {what}: {forecast[column].median() * 100:.0f}% "
                f"(over {int(forecast[column].notna().sum())} run(s))."
            )
    shown = [
        "run",
        "tier",
        "finished",
        "projected_hours",
        "forecast_from_earlier_hours",
        "actual_hours",
        "forecast_hours",
    ]
    return Section(
        lines,
        [("Forecast per planned run", forecast[[c for c in shown if c in forecast]])],
        (forecast_figure, (forecast,)),
    )


def render_budget(inputs) -> Section:
    return budget_section(inputs.one("plans"), inputs.one("jobs"), inputs.one("budget_summary"))


def render_forecast(inputs) -> Section:
    return forecast_section(inputs.one("forecast"))


def budget_figure(plans: pd.DataFrame, currency: str):
    """The cost of each way to buy the work, cheapest marked, those that miss the deadline hatched.

    plans: columns label, cost, meets_deadline, cheapest (one scenario's rows).
    """
    fig, (ax,) = figure_axes(height_in=max(2.5, 0.32 * len(plans) + 1.4))
    if plans.empty:
        return empty_figure(fig, "no plan")
    y = list(range(len(plans)))
    colors = [GOOD if c else NEUTRAL for c in plans["cheapest"]]
    bars = ax.barh(y, plans["cost"], color=colors)
    for bar, ok in zip(bars, plans["meets_deadline"], strict=True):
        if not ok:
            bar.set_hatch("//")
            bar.set_edgecolor(BAD)
    for i, (cost, ok) in enumerate(zip(plans["cost"], plans["meets_deadline"], strict=True)):
        note = "" if ok else "  misses the deadline"
        shown = f"{cost:,.2f}" if cost >= 1 or cost == 0 else f"{cost:.2g}"
        ax.text(cost, i, f" {shown}{note}", va="center", fontsize="x-small")
    ax.set_yticks(y, plans["label"], fontsize="small")
    ax.invert_yaxis()
    positive = plans["cost"][plans["cost"] > 0]
    if not positive.empty and positive.max() / max(positive.min(), 1e-12) > 100:
        # The linear part ends at a power of ten, so 0 and the first decade stay apart.
        ax.set_xscale("symlog", linthresh=10 ** np.floor(np.log10(max(positive.min(), 1e-6))))
    ax.set_xlim(0, max(plans["cost"].max(), 1e-9) * 4)
    ax.set_xlabel(f"cost ({currency}; green: cheapest that meets the deadline)")
    ax.set_title("What the work costs on each offer")
    fig.tight_layout()
    return fig


def forecast_figure(forecast: pd.DataFrame):
    """Each finished run's projected and calibrated forecast against what it took (hours).

    forecast: columns run, projected_hours, actual_hours, forecast_from_earlier_hours.
    """
    from matplotlib import ticker

    fig, (ax,) = figure_axes()
    done = forecast.dropna(subset=["actual_hours"])
    if done.empty:
        return empty_figure(fig, "no run finished")
    columns = ["actual_hours", "projected_hours", "forecast_from_earlier_hours"]
    hours = done[columns].to_numpy(dtype=float)
    positive = hours[(hours > 0) & pd.notna(hours)]
    if positive.size == 0:
        return empty_figure(fig, "no positive durations")
    # Seconds for short campaigns (the tiny demo's runs take seconds), hours otherwise.
    unit, scale = ("seconds", 3600.0) if positive.max() < 0.5 else ("hours", 1.0)
    actual = done["actual_hours"] * scale
    ax.scatter(actual, done["projected_hours"] * scale, color=BAD, label="projected")
    cal = done.dropna(subset=["forecast_from_earlier_hours"])
    ax.scatter(
        cal["actual_hours"] * scale,
        cal["forecast_from_earlier_hours"] * scale,
        color=GOOD,
        marker="s",
        label="calibrated (from the runs before it)",
    )
    lo, hi = positive.min() * scale / 2, positive.max() * scale * 2
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8, label="forecast = actual")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel(f"actual {unit}")
    ax.set_ylabel(f"forecast {unit}")
    ax.set_title("Forecast vs actual, per finished run")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig
