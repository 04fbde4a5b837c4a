"""results/budget/summary.txt: the verdict block (campaign.evaluate.verdict_block, with the
costs), then which variant to keep at equal quality (the reference floor when it is better than
the chosen cell and cheaper), what the campaign cost, what the rest will cost and on which
offer, in words."""

from __future__ import annotations

import math
from dataclasses import replace

from campaign.budget.calibrate import Calibration, error_summary
from campaign.budget.money import format_hours, format_money
from campaign.budget.serving import serving_lines
from campaign.evaluate import (
    NOT_SHOWN,
    Cost,
    Decisions,
    KeepOption,
    VerdictBlock,
    evaluation_verdict,
    level_words,
)


def bar_words(bar: dict) -> str:
    """The quality bar in one sentence: the chosen cell's quality on the split it was not
    chosen on, or a warning that it is the chosen split's (optimistic) number."""
    where = (
        f"{bar['split']} {bar['metric']} {level_words(bar['value'], bar['ci_low'], bar['ci_high'])}"
    )
    text = f"Quality bar: the chosen cell {bar['cell']} (chosen on {bar['chosen_on']}), {where}"
    if bar["optimistic"]:
        text += (
            " — on the split it was chosen on, so optimistic (the maximum of the cells' means; "
            "the evaluation reports no other split)"
        )
    return text + "."


def headline(
    bar: dict | None, equal: list[dict], predictions: int, money, decisions: Decisions | None = None
) -> str:
    """The first line: which variant to keep at equal quality (the verdict's, keep_row, given
    the evaluation's decisions; else the cheapest), and whenever the reference floor is better
    than the chosen cell or the cell is not shown above it, that it is (kept when cheaper, named
    when dearer)."""
    if bar is None or not equal:
        return "At equal quality: no variant reached the quality bar (no chosen cell)."
    keep = kept_option(decisions, equal)
    floors = [e for e in equal if e["kind"] == "floor"]
    if keep is None and not floors:
        return "At equal quality: no variant has both a training and a serving cost."
    n = f"{predictions:,}"

    def cost(e: dict) -> str:
        return (
            f"{money(e['train_cost'])} to train + {money(e['serve_cost'])} to serve {n} "
            f"predictions = {money(e['total_cost'])}"
        )

    verdict = decisions.verdict if decisions is not None else None
    against = verdict.against_floor if verdict is not None else None
    if against is not None and against.decision == NOT_SHOWN:
        below = f"the chosen cell {bar['cell']} is not shown above it by the evaluation's test"
    else:
        below = f"the chosen cell {bar['cell']} is below it by the evaluation's test"
    tuned = [e for e in equal if e["kind"] != "floor" and math.isfinite(e["total_cost"])]
    if keep is not None and keep["kind"] != "floor":
        line = f"At equal quality, keep {keep['variant']}: {cost(keep)}."
        for f in floors:
            line += (
                f" The reference floor {f['variant']} is better ({below}) but dearer: {cost(f)}."
            )
        return line
    floor = keep if keep is not None else floors[0]
    if tuned:
        cheapest = min(tuned, key=lambda e: (e["total_cost"], e["variant"]))
        dearer = floor["total_cost"] > cheapest["total_cost"]
        than = (
            f"{', though dearer' if dearer else ', and it is cheaper'}: {cost(floor)}, against "
            f"{money(cheapest['total_cost'])} for the cheapest fine-tune ({cheapest['variant']})"
        )
    else:
        than = f"; it costs {cost(floor)} (no fine-tune at the bar has a known serving cost)"
    return f"Keep the reference floor {floor['variant']}: {below}{than}."


def to_decide_words(r: dict, gpu: str, offer: str, money) -> str:
    """What deciding one open effect would take and cost, in one sentence."""
    why = r["decision"] + (f"; {r['dominant']} dominate its variance" if r["dominant"] else "")
    head = f"To decide {r['subject']} ({why}): "
    items = r["items_needed"]
    or_items = f"; or {items:,} evaluation items (labelling not priced)" if items else ""
    if not items and r.get("items_note"):
        or_items = f"; {r['items_note']}"
    if r["extra_runs"] is not None:
        low, high = r.get("seeds_needed_low"), r.get("seeds_needed_high")
        if r["n_seeds"] < 2:
            what = "a second seed per cell (it measures the seed spread)"
        elif low and high:
            what = f"{r['seeds_needed']} seeds per cell ({low} to {high} with the spread's error)"
        else:
            what = f"{r['seeds_needed']} seeds per cell"
        price = money(r["cost"])
        if math.isfinite(r.get("cost_low", math.nan)) and math.isfinite(
            r.get("cost_high", math.nan)
        ):
            price += f" ({money(r['cost_low'])} to {money(r['cost_high'])})"
        return (
            head + f"{what}: {r['extra_runs']:,} more run(s) ({r['cells']} cell(s)), "
            f"{format_hours(r['extra_hours'])} on {gpu}, {price} at {offer}{or_items}."
        )
    if items:
        return head + f"more seeds alone cannot; {items:,} evaluation items would (not priced)."
    if r.get("seeds_note"):
        return head + f"{r['seeds_note']}."
    if r.get("items_note"):
        return head + f"more seeds alone cannot; {r['items_note']}."
    return head + "neither more seeds nor more items would (the estimate sits at the bar)."


def on_cards(rows: list[dict], hours_key: str) -> str:
    """ " (N card-hours: runs on several cards)" where a run holds more than one card (its
    hours are wall hours; its money counts every card), else nothing."""
    if all(r.get("cards", 1) == 1 for r in rows):
        return ""
    total = sum(r[hours_key] * r["cards"] for r in rows if math.isfinite(r[hours_key]))
    return f" ({total:.3g} card-hours: runs on several cards)"


def measured(jobs: list[dict], money) -> str:
    """What the finished jobs took: wall hours (and card-hours, where a run held several cards)
    and money."""
    spent = sum(j["cost"] for j in jobs if math.isfinite(j["cost"]))
    hours = sum(j["wall_hours"] for j in jobs if math.isfinite(j["wall_hours"]))
    held = on_cards(jobs, "wall_hours")
    return f"Measured: {len(jobs)} finished run(s), {format_hours(hours)}{held}, {money(spent)}."


def kept_option(decisions: Decisions | None, equal: list[dict]) -> dict | None:
    """The equal_quality row the budget's words keep: the verdict's (keep_row) given the
    evaluation's decisions, else the cheapest in total."""
    if decisions is not None:
        return keep_row(decisions, equal)
    return next((e for e in equal if e["cheapest"]), None)


def bar_lines(bar: dict | None, equal: list[dict], decisions: Decisions | None, money) -> list[str]:
    """The quality bar, and every option at it but the one kept, with its total cost."""
    if bar is None:
        return []
    keep = kept_option(decisions, equal)
    lines = [bar_words(bar)]
    for e in equal:
        if e is not keep:
            total = money(e["total_cost"])
            lines.append(f"  also at the bar: {e['variant']} ({e['kind']}): total {total}")
    return lines


def adaptive_words(campaign, not_asked: list[dict]) -> str | None:
    """Which runs an adaptive campaign's budget counts (campaign: campaign.plan.look_runs'
    CampaignRuns; not_asked: the plan rows of the candidates no look asked for, left out of
    the kept plan and the rest); None for a fixed campaign."""
    if not campaign.adaptive:
        return None
    n, j = len(campaign.runs), campaign.looks
    others = (
        f"{len(not_asked)} adaptive run(s) "
        f"({format_hours(sum(r['projected_hours'] for r in not_asked))} projected)"
    )
    appended = f"({len(campaign.appended)} appended by the looks)"
    if campaign.final:
        return (
            f"Adaptive campaign, last look ({j}) taken: the kept plan is the {n} run(s) it "
            f"lists {appended}; {others} no look asked for are left out."
        )
    if j == 0:
        return (
            f"Adaptive campaign before its first look: the kept plan is the plan's {n} kept "
            f"run(s); the looks may ask for any of {others}, left out here."
        )
    return (
        f"Adaptive campaign between looks ({j} taken, not the last): the kept plan is the {n} "
        f"run(s) look {j} lists {appended}; a later look may ask for any of {others} not asked "
        "for yet, left out here."
    )


def summary(b, reference, jobs, forecast, cal: Calibration, plans, offers, bar, equal,
            to_decide=(), decisions: Decisions | None = None,
            adaptive: str | None = None, requests=()) -> str:  # fmt: skip
    """summary.txt after the verdict block. `decisions`: the evaluation's records, so
    that the option kept here is the verdict's; `adaptive`: adaptive_words' line, before the
    rest's; `requests`: the serving table's rows (campaign.budget.serving), their lines after
    the quality bar's."""
    cur = b["currency"]
    money = lambda x: format_money(x, cur)  # noqa: E731
    lines = [headline(bar, equal, b["predictions"], money, decisions)]
    lines += bar_lines(bar, equal, decisions, money)
    if bar is not None:
        lines += serving_lines(list(requests), reference.name, reference.gpu, bar["metric"], cur)
    lines.append(
        f"Budget in {cur}; the jobs ran on the offer '{reference.name}' ({reference.gpu})."
    )
    lines.append(measured(jobs, money))

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
    if adaptive:
        lines.append(adaptive)
    rest = [r for r in forecast if not r["finished"]]
    scenario = "rest" if rest else "kept plan"
    if rest:
        kept = sum(r["kept"] for r in rest)
        lines.append(
            f"The rest: {len(rest)} run(s) ({kept} kept, {len(rest) - kept} cut by the plan), "
            f"{format_hours(sum(r['forecast_hours'] for r in rest))}"
            f"{on_cards(rest, 'forecast_hours')} forecast on {reference.gpu}, "
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
        work = o["work_card_hours"]
        size = (
            f" ({o['hours_from']})"
            if math.isnan(work)
            else f" for {work:.3g} card-hours (break-even {o['break_even_card_hours']:.4g} "
            "card-hours)"
        )
        lines.append(f"{o['offer']} {o['pricing']} ({money(o['price'])}): {o['verdict']}{size}.")
    for r in to_decide:
        lines.append(to_decide_words(r, reference.gpu, reference.name, money))
    return "\n".join(lines) + "\n"


def keep_row(decisions: Decisions, equal: list[dict]) -> dict | None:
    """The equal_quality row to keep: the floor when the evaluation keeps it (the chosen cell is
    below it by the test: quality first), else the chosen cell's representative run (the one its
    variants were judged against) or one of its adopted quantized variants, the cheapest to
    serve (equal quality; what a seed cost to train is spent and says nothing of the seed's
    worth). Without the representative run among the rows, the cheapest of the cell's rows.
    None when no row qualifies."""
    floor = decisions.verdict is not None and decisions.verdict.kind == "floor"
    rows = [e for e in equal if (e["kind"] == "floor") == floor and math.isfinite(e["total_cost"])]
    rep = decisions.best_cell.representative_run if decisions.best_cell is not None else None
    if not floor and rep:
        mine = [e for e in rows if e["variant"] == rep or e["variant"].startswith(f"{rep}/")]
        if mine:
            return min(mine, key=lambda e: (e["serve_cost"], e["variant"]))
    return min(rows, key=lambda e: (e["total_cost"], e["variant"])) if rows else None


def verdict_values(
    decisions: Decisions,
    equal: list[dict],
    to_decide: list[dict],
    ship: dict[str, str],
    findings: list[str],
    predictions: int,
    offer: str,
) -> VerdictBlock:
    """The verdict block's values (campaign.evaluate.verdict_block) with the budget's costs: the
    option to keep across the chosen cell's runs, its adopted quantized variants and the floor
    (keep_row), its cost to train and to serve `predictions` at `offer`, the file to ship
    (ship: {variant: path}), each open question priced from the to_decide rows."""
    values = replace(
        evaluation_verdict(decisions, findings, costs_at="not measured"), price_at=None
    )
    row = keep_row(decisions, equal)
    if row is not None:
        cell = decisions.best_cell.cell if decisions.best_cell is not None else None
        values = replace(
            values,
            keep=KeepOption(
                kind=row["kind"],
                name=row["variant"],
                cell=cell,
                quality=row["quality"],
                low=row["quality_low"],
                high=row["quality_high"],
            ),
            split=row["quality_split"],
            cost=Cost(
                train=row["train_cost"],
                serve=row["serve_cost"],
                total=row["total_cost"],
                predictions=predictions,
                offer=f"offer {offer}",
            ),
            ship=ship.get(row["variant"]),
            also=(),
        )
    priced = {r["subject"]: r for r in to_decide}
    opened = tuple(
        q.priced(r["seeds_needed"], r["extra_runs"], r["cost"], r["items_needed"])
        if (r := priced.get(q.subject)) is not None
        else q
        for q in values.open
    )
    return replace(values, open=opened)


def guard_words(guards: list[dict], plans: list[dict], tasks: list[str]) -> str:
    """The guard benchmarks' cost in one line (campaign.budget.stage.guard_jobs); "" without
    evaluation.guards."""
    if not tasks:
        return ""
    if not guards:
        return (
            f"Guard benchmarks ({len(tasks)} task(s)): not priced yet, no job has finished to "
            "measure a job's overhead by.\n"
        )
    kept = next((p for p in plans if p["scenario"] == "kept plan"), None)
    size = (
        f"{kept['guard_jobs']} job(s) in the kept plan, {kept['guard_card_hours']:.3g} "
        "card-hours with the margin, in the plans' costs"
        if kept
        else "no offer holds the work"
    )
    return (
        f"Guard benchmarks ({len(tasks)} task(s): one lm-eval job per run and task, and one per "
        f"task for the base): {size}; each priced at one job's overhead "
        f"({format_hours(guards[0]['forecast_hours'])}: loading a model and scoring items, as "
        "a run's wrap-up does).\n"
    )
