"""results/budget/summary.txt: what the campaign cost, what the rest will cost and on which
offer, and which variant to keep at equal quality, in words."""

from __future__ import annotations

import math

from campaign.budget.calibrate import Calibration, error_summary
from campaign.budget.money import format_hours, format_money


def summary(b, reference, jobs, forecast, cal: Calibration, plans, offers, equal) -> str:
    cur = b["currency"]
    money = lambda x: format_money(x, cur)  # noqa: E731
    lines = [f"Budget in {cur}; the jobs ran on the offer '{reference.name}' ({reference.gpu})."]
    spent = sum(j["cost"] for j in jobs if math.isfinite(j["cost"]))
    hours = sum(j["wall_hours"] for j in jobs if math.isfinite(j["wall_hours"]))
    lines.append(f"Measured: {len(jobs)} finished run(s), {format_hours(hours)}, {money(spent)}.")

    done = [r for r in forecast if r["finished"]]
    if done:
        steps = [r["step_hours"] for r in done]
        err = error_summary(
            [r["projected_hours"] for r in done],
            steps,
            [r["actual_hours"] for r in done],
            b["min_pairs"],
        )
        lines.append(f"Forecast correction (projected -> actual): {cal.words()}.")
        if err["later_runs"]:
            lines.append(
                f"Forecast error, median over the {err['later_runs']} later run(s) (each forecast "
                f"from the runs before it): {err['median_abs_error_projected']:.0%} as projected, "
                f"{err['median_abs_error_calibrated']:.0%} calibrated."
            )
    rest = [r for r in forecast if not r["finished"]]
    scenario = "rest" if rest else "kept plan"
    if rest:
        kept = sum(r["kept"] for r in rest)
        lines.append(
            f"The rest: {len(rest)} run(s) ({kept} kept, {len(rest) - kept} cut by the plan), "
            f"{format_hours(sum(r['forecast_hours'] for r in rest))} forecast on {reference.gpu}, "
            f"+{b['margin']:.0%} margin."
        )
    else:
        lines.append(
            "Nothing left: every planned run has finished. Below: the whole kept plan run again "
            f"on each offer, +{b['margin']:.0%} margin."
        )
    mine = [p for p in plans if p["scenario"] == scenario]
    best = next((p for p in mine if p["cheapest"]), None)
    if best is None:
        lines.append(f"No offer finishes it within the deadline of {b['deadline_hours']:g} h.")
    else:
        lines.append(
            f"Cheapest: {best['offer']} ({best['gpu']}), {best['pricing']}: {money(best['cost'])}, "
            f"done in {format_hours(best['wall_hours'])} (deadline {b['deadline_hours']:g} h; "
            f"hours {best['hours_from']})."
        )
    for name in dict.fromkeys(p["offer"] for p in mine):
        theirs = [p for p in mine if p["offer"] == name]
        if theirs and not any(p["meets_deadline"] for p in theirs):
            lines.append(f"Ruled out: {name}: {theirs[0]['why_not']}.")
    for name, gib in dict.fromkeys(
        (o["offer"], o["memory_gib"]) for o in offers if not o["fits_memory"]
    ):
        lines.append(f"Ruled out: {name}: the recipe does not fit in {gib:g} GiB.")
    for o in offers:
        if o["pricing"] == "hourly" or not o["fits_memory"]:
            continue
        lines.append(
            f"{o['offer']} {o['pricing']} ({money(o['price'])}): {o['verdict']} for "
            f"{o['work_card_hours']:.3g} card-hours (break-even "
            f"{o['break_even_card_hours']:.4g} card-hours)."
        )
    if not equal:
        lines.append("At equal quality: no variant reached the quality bar (no best cell).")
    else:
        keep = next((e for e in equal if e["cheapest"]), None)
        n = f"{b['predictions']:,}"
        if keep is None:
            lines.append("At equal quality: no variant has both a training and a serving cost.")
        else:
            lines.append(
                f"At equal quality, keep {keep['variant']}: {money(keep['train_cost'])} to train "
                f"+ {money(keep['serve_cost'])} to serve {n} predictions = "
                f"{money(keep['total_cost'])}."
            )
        for e in equal:
            if e is not keep:
                total = money(e["total_cost"])
                lines.append(f"  also at the bar: {e['variant']} ({e['kind']}): total {total}")
    return "\n".join(lines) + "\n"
