"""What the preflight shows: its report section (each check's verdict, the memory estimate
against the measurement, the fit table), its figure, and its findings (failed checks).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from campaign.core.figures import BAD, GOOD, empty_axes, figure_axes
from campaign.core.io import read_json
from campaign.core.stage import Section


def preflight_section(report_path: Path) -> Section:
    report = read_json(report_path, ("passed",))
    checks = pd.DataFrame(
        [
            {"check": name, "passed": bool(c.get("passed")), "blocking": bool(c.get("blocking"))}
            for name, c in report.items()
            if isinstance(c, dict) and "passed" in c
        ],
        columns=["check", "passed", "blocking"],
    )
    memory = (report.get("memory") or {}).get("details") or {}
    fit = pd.DataFrame(
        memory.get("fit_table") or [],
        columns=[
            "card",
            "memory_bytes",
            "need_bytes",
            "usable_bytes",
            "margin_pct",
            "fits",
            "micro_batch",
            "max_micro_batch",
            "phase",
            "source",
        ],
    )
    components = pd.DataFrame(
        memory.get("comparison") or [], columns=["component", "estimated", "measured", "ratio"]
    )
    failed = checks[~checks["passed"]]["check"].tolist()
    lines = [
        f"Preflight {'passed' if report['passed'] else 'FAILED'}: {int(checks['passed'].sum())} "
        f"of {len(checks)} checks passed" + (f"; failed: {', '.join(failed)}." if failed else "."),
        f"Memory fit: the run fits {int(fit['fits'].sum())} of {len(fit)} target card(s)"
        + (f" ({', '.join(fit[~fit['fits']]['card'])} too small)." if (~fit["fits"]).any() else ".")
        if len(fit)
        else "Memory fit: no target cards.",
    ]
    return Section(
        lines,
        [
            ("Checks", checks),
            ("Memory fit table", fit),
            ("Memory: estimate vs measured", components),
        ],
        (memory_figure, (components, fit)),
    )


def render_preflight(inputs) -> Section:
    return preflight_section(inputs.one("preflight_report"))


def memory_figure(components: pd.DataFrame, fit: pd.DataFrame):
    """Left: memory estimate vs measurement per component. Right: need vs usable per card.

    components: columns component, estimated, measured (bytes).
    fit: columns card, need_bytes, usable_bytes, fits.
    """
    fig, (left, right) = figure_axes(2)
    if components.empty:
        empty_axes(left, "no memory measurement")
    else:
        y = range(len(components))
        h = 0.38
        left.barh([i - h / 2 for i in y], components["estimated"] / 2**20, h, label="estimated")
        left.barh([i + h / 2 for i in y], components["measured"] / 2**20, h, label="measured")
        left.set_yticks(list(y), components["component"])
        left.invert_yaxis()
        left.set_xlabel("MiB")
        left.set_title("Estimate vs measurement (one step)")
        left.legend(fontsize="small")
    if fit.empty:
        empty_axes(right, "no target cards")
    else:
        y = range(len(fit))
        colors = [GOOD if f else BAD for f in fit["fits"]]
        right.barh(list(y), fit["usable_bytes"] / 2**30, color="#dddddd", label="usable")
        right.barh(list(y), fit["need_bytes"] / 2**30, color=colors, height=0.5, label="needed")
        right.set_xscale("log")
        right.set_yticks(list(y), fit["card"])
        right.invert_yaxis()
        right.set_xlabel("GiB (log scale)")
        right.set_title("Fit on the target cards")
        right.legend(fontsize="small")
    fig.tight_layout()
    return fig
