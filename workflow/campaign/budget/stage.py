"""The budget stage: reads the plan table, the preflight's report and measurements, each finished
run's manifest, timings and Snakemake benchmark, the evaluation's decisions and metrics, the
floor's timings and (when there is one) the quantization table; writes
results/budget/{jobs,forecast,offers,plans,equal_quality} as CSV and Parquet, and summary.txt in
words.

- jobs: one row per finished run: wall hours, the cards it held (train.devices) and its
  card-hours (wall x cards), device, peak memory (the benchmark's max_rss), money at the
  reference offer's price per card-hour.
- forecast: one row per planned run, in the plan's order: the plan's projection, what it took
  (finished runs), the forecast each finished run got from the runs before it, and the
  calibrated forecast of every run (finished: what it took; the others: projection x factor),
  all wall hours of the run on its cards, and the cards.
- offers: per offer and pricing (hourly, each package): price per card-hour, the rest's
  card-hours on that card and how they were obtained, and whether the package beats hourly.
- plans: every way to buy the work (the rest, and the whole kept plan) on every offer, with its
  cost, wall hours and whether it meets the deadline; the cheapest feasible one is marked.
- to_decide: one row per open main effect: the seeds per cell the evaluation says would decide
  it, the runs that adds to the kept plan and their price at the reference offer
  (campaign.budget.questions), or the evaluation items that would.
- equal_quality: the variants at the quality bar (the chosen cell's runs, the quantized
  variants of them the evaluation adopted, and the reference floor when the evaluation's test
  shows it better than the chosen cell), each with its quality on the split the cell was not
  chosen on, and the cost to train and to serve budget.predictions (the floor's from
  floor_timings.json). The bar is the chosen cell's quality on that split, not the maximum of
  the cells' means on the split it was chosen on (the winner's curse).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from campaign.budget import calibrate, questions, serving, words
from campaign.budget.money import format_money
from campaign.budget.offers import (
    Offer,
    card_hours_of,
    cheapest,
    measured_on,
    options,
    package_vs_hourly,
    work_hours,
)
from campaign.core.defaults import train_key
from campaign.core.errors import CampaignError
from campaign.core.io import read_json, read_table
from campaign.core.io import read_plan as plan_table
from campaign.evaluate import ADOPT, BELOW, Decisions, read_decisions
from campaign.plan import CampaignRuns, campaign_runs

HOUR_S = 3600.0


def read_plan(path: Path) -> list[dict]:
    """The plan table's rows, columns read by name (others are kept as they are):
    projected_hours a float, kept a bool, cell_id the cell's stable id."""
    table = plan_table(path, ("run", "tier", "projected_hours", "kept"))
    rows = []
    for i, r in enumerate(table.rows):
        rows.append(r | {"projected_hours": table.number(i, "projected_hours"),
                         "kept": r["kept"] == "true"})  # fmt: skip
    return rows


def campaign_plan(plan: list[dict], campaign: CampaignRuns) -> tuple[list[dict], list[dict]]:
    """(the plan rows the budget prices, the adaptive candidates no look asked for). In an
    adaptive campaign a run is kept when the latest look lists it (the plan's kept runs and
    the appended ones); a candidate no look asked for is neither kept nor the rest (a later
    look may still ask for it: the summary says so)."""
    if not campaign.adaptive:
        return plan, []
    asked, left_out = set(campaign.runs), set(campaign.not_asked)
    rows = [r | {"kept": r["run"] in asked} for r in plan if r["run"] not in left_out]
    return rows, [r for r in plan if r["run"] in left_out]


def read_benchmark(path: Path) -> dict:
    """Snakemake's benchmark file: the last repeat's seconds and max_rss (MiB -> bytes)."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows or "s" not in rows[-1]:
        raise CampaignError(f"{path}: expected a Snakemake benchmark table with a column 's'")
    row = rows[-1]

    def number(key: str) -> float:
        try:
            return float(row.get(key, "nan"))
        except ValueError:
            return math.nan  # Snakemake writes NA where it could not measure

    rss = number("max_rss")
    rss_bytes = rss * 2**20 if math.isfinite(rss) else math.nan
    return {"seconds": number("s"), "max_rss_bytes": rss_bytes}


def _by_run(paths: list[Path], what: str) -> dict[str, Path]:
    """{run: path} for results/runs/<run>/<file> (or logs/benchmarks/train/<run>.tsv)."""
    out = {}
    for p in paths:
        run = p.stem if p.suffix == ".tsv" else p.parent.name
        if run in out:
            raise CampaignError(f"{p}: a second {what} for run {run}")
        out[run] = p
    return out


def model_size(report: dict, measurements: dict) -> tuple[float, float]:
    """(parameters, trainable parameters) of the baseline model, from the preflight."""
    model = report.get("memory", {}).get("details", {}).get("estimate_for_cards", {}).get("model")
    if model and model.get("n_params"):
        return float(model["n_params"]), float(model.get("n_trainable", model["n_params"]))
    weights = measurements.get("memory", {}).get("details", {}).get("measured", {})
    weight_bytes = weights.get("bytes", {}).get("weights")
    if weight_bytes:
        return weight_bytes / 4.0, weight_bytes / 4.0  # fp32 weights: 4 bytes a parameter
    return math.nan, math.nan


def run_flops(recipe: dict, n_params: float, n_trainable: float, eval_examples: int) -> float:
    """FLOPs of one run: 2N per token forward, 2N backward through activations, 2 x trainable
    per token for weight gradients (6N for a full fine-tune, ~4N with LoRA), on every padded
    token trained; 2N per token for each validation pass and the final predictions."""
    steps = recipe["max_steps"]
    per_step = recipe["micro_batch"] * recipe["grad_accum"] * train_key(recipe, "devices")
    train_tokens = steps * per_step * recipe["max_length"]
    passes = steps // recipe["eval_every"] + (1 if steps % recipe["eval_every"] else 0) + 1
    eval_tokens = passes * eval_examples * recipe["max_length"]
    return (4 * n_params + 2 * n_trainable) * train_tokens + 2 * n_params * eval_tokens


def _check_measured(measured: list[str], plan: list[dict], not_asked: list[dict]) -> None:
    """A measured run must be one of the campaign's: in the plan table and, in an adaptive
    campaign, asked for by a look."""
    planned, asked_not = {r["run"] for r in plan}, {r["run"] for r in not_asked}
    for run in measured:
        if run in asked_not:
            raise CampaignError(f"run {run}: measured but no look of the campaign asked for it")
        if run not in planned:
            raise CampaignError(f"run {run}: measured but not in the plan table")


def stage_budget(ctx) -> None:
    b = ctx.spec["budget"]
    recipes = ctx.spec["recipes"]
    campaign = campaign_runs(ctx.inputs["runs"][0], ctx.inputs.get("looks", []))
    plan, not_asked = campaign_plan(read_plan(ctx.inputs["runs"][0]), campaign)
    report = read_json(ctx.inputs["preflight_report"][0])
    measurements = read_json(ctx.inputs["preflight_measurements"][0])
    manifests = _by_run(ctx.inputs.get("run_manifests", []), "run manifest")
    timings = _by_run(ctx.inputs.get("timings", []), "timings file")
    benchmarks = _by_run(ctx.inputs.get("benchmarks", []), "benchmark file")
    _check_measured([*manifests, *timings, *benchmarks], plan, not_asked)
    offers = [Offer.from_params(o) for o in b["offers"]]
    reference = next(o for o in offers if o.name == b["reference_offer"])

    jobs = _jobs(plan, manifests, timings, benchmarks, reference, b["currency"], recipes)
    n_params, n_trainable = model_size(report, measurements)
    disk = report.get("disk", {}).get("details", {})
    eval_examples = int(disk.get("validation_examples", 0)) + int(disk.get("test_examples", 0))
    cal, forecast = _forecast(plan, jobs, b, recipes, n_params, n_trainable, eval_examples)
    guards = guard_jobs(forecast, cal, jobs, ctx.spec.get("guards", []))
    offer_rows, plan_rows = _price_plans(
        forecast + guards, jobs, offers, reference, _peak_bytes(report), b
    )
    # The evaluation's decisions, read once (campaign.evaluate.records); None without one.
    paths = ctx.inputs.get("decisions", [])
    decisions = read_decisions(paths[0]) if paths else None
    bar, equal = _equal_quality(ctx, decisions, jobs, b, reference)
    price = reference.hourly if reference.hourly is not None else math.nan
    metric = bar["metric"] if bar is not None else None
    quality = _quality(ctx.inputs.get("metrics", []), metric, bar and bar["split"])
    requests = serving.price_requests(ctx.inputs, decisions, bar, equal, b, price, quality)
    to_decide = (
        questions.price_to_decide(
            decisions, forecast, {r["run"]: r["cell_id"] for r in plan}, jobs_price(reference), b
        )
        if decisions is not None
        else []
    )
    _write_tables(
        ctx,
        {
            "jobs": jobs,
            "forecast": forecast,
            "offers": offer_rows,
            "plans": plan_rows,
            "equal_quality": equal,
            "to_decide": to_decide,
            "serving": requests,
        },
    )
    text = words.summary(b, reference, jobs, forecast, cal, plan_rows, offer_rows, bar, equal,
                         to_decide, decisions,
                         words.adaptive_words(campaign, not_asked), requests)  # fmt: skip
    block = _verdict_block(ctx, decisions, b, reference, equal, to_decide)
    text += words.guard_words(guards, plan_rows, ctx.spec.get("guards", []))
    ctx.outputs["summary"].write_text("\n".join([*block, "", text]) if block else text)


GUARD = "guard"  # the tier of a guard job's row in the plans' scenarios (never in forecast)


def guard_jobs(forecast: list[dict], cal, jobs: list[dict], tasks: list[str]) -> list[dict]:
    """The guard benchmarks' jobs (evaluation.guards): one per planned run and guard task, and
    one per task for the base model, as rows the plans price beside the runs. A guard job
    loads a model and scores the guard's items, as a run's own wrap-up does (loading, the
    validation and test predictions, saving): each is priced at one job's overhead, the
    calibration's per-job overhead (wall - step hours), else the median of the finished
    jobs' wall - train hours; none before a job finished. Its compute is in that overhead (flops
    0), so every offer prices it alike. A run's guard jobs are finished with it (the
    evaluation waits for them); the base's with any run."""
    if not tasks:
        return []
    hours = cal.overhead_hours.value if cal.overhead_hours.n else math.nan
    if not math.isfinite(hours):
        spare = [j["wall_hours"] - j["train_hours"] for j in jobs]
        spare = [h for h in spare if math.isfinite(h)]
        hours = float(np.median(spare)) if spare else math.nan
    if not math.isfinite(hours):
        return []  # nothing measured yet to price a job by (guard_words says so)
    hours = max(hours, 0.0)  # a calibrated overhead below zero prices a job at nothing
    base = {"run": "base", "kept": True, "finished": any(r["finished"] for r in forecast)}
    runs = [base, *({k: r[k] for k in ("run", "kept", "finished")} for r in forecast)]
    return [
        r | {"run": f"{r['run']} {GUARD} {task}", "tier": GUARD, "forecast_hours": hours,
             "flops": 0.0, "overhead_hours": hours, "cards": 1}
        for r in runs
        for task in tasks
    ]  # fmt: skip


def _price_plans(forecast, jobs, offers, reference, peak_bytes, b) -> tuple[list, list]:
    """(offers rows, plans rows): every way to buy the rest and the whole kept plan on every
    offer whose card holds the preflight's peak memory, the cheapest of each scenario marked.
    `forecast` holds the guard jobs' rows too (guard_jobs; counted apart in the plans)."""
    scenarios = {
        "rest": [r for r in forecast if not r["finished"]],
        "kept plan": [r for r in forecast if r["kept"]],
    }
    offer_rows, plan_rows = [], []
    for offer in offers:
        measured = measured_on(offer, reference, {j["device"] for j in jobs})
        fits = peak_bytes is None or peak_bytes <= offer.memory_gib * 2**30
        for scenario, rows in scenarios.items():
            hours, how = work_hours(rows, offer, measured, b["utilization"], b["margin"])
            cards = [r["cards"] for r in rows]
            opts = options(offer, hours, b["deadline_hours"], cards) if fits else []
            guard = [h for h, r in zip(hours, rows, strict=True) if r.get("tier") == GUARD]
            for o in opts:
                plan_rows.append(
                    {
                        "scenario": scenario,
                        "offer": o.offer,
                        "gpu": offer.gpu,
                        "pricing": o.pricing,
                        "runs": len(hours) - len(guard),
                        "guard_jobs": len(guard),
                        "guard_card_hours": sum(guard),
                        "card_hours": card_hours_of(hours, cards),
                        "hours_from": how,
                        "cost": o.cost,
                        "currency": b["currency"],
                        "wall_hours": o.wall_hours,
                        "hourly_card_hours": o.hourly_hours,
                        "meets_deadline": o.feasible,
                        "why_not": o.why,
                        "cheapest": False,
                    }
                )
            if scenario == ("rest" if scenarios["rest"] else "kept plan"):
                offer_rows += _offer_rows(offer, hours, cards, how, fits, peak_bytes, b, scenario)
    for scenario in scenarios:
        rows = [r for r in plan_rows if r["scenario"] == scenario]
        best = cheapest([_as_option(r) for r in rows])
        for r in rows:
            r["cheapest"] = best is not None and (r["offer"], r["pricing"]) == (
                best.offer,
                best.pricing,
            )
    return offer_rows, plan_rows


def _write_tables(ctx, tables: dict[str, list[dict]]) -> None:
    """Each table as CSV and Parquet, its columns in _COLUMNS' order."""
    import pandas as pd

    for name, rows in tables.items():
        frame = pd.DataFrame(rows, columns=_COLUMNS[name])
        frame.to_csv(ctx.outputs[f"{name}_csv"], index=False, float_format="%.10g")
        frame.to_parquet(ctx.outputs[f"{name}_parquet"], index=False)


def _verdict_block(ctx, decisions, b, reference, equal, to_decide) -> list[str]:
    """The verdict block with the costs: the first lines of summary.txt (and of the report,
    which renders them); without an evaluation, nothing."""
    from campaign.evaluate import evaluation_flags, verdict_block

    if decisions is None:
        return []
    findings = evaluation_flags(decisions)  # the report's block adds the other phases'
    values = words.verdict_values(
        decisions,
        equal,
        to_decide,
        _ship(ctx),
        findings,
        b["predictions"],
        reference.name,
    )
    return verdict_block(values, lambda x: format_money(x, b["currency"]))


def _ship(ctx) -> dict[str, str]:
    """{variant: what a user would ship}: a quantized variant's weight file (variants.parquet
    weight_file, in <quantize folder>/<run>/<variant>/model/), a run's model folder."""
    out = {
        p.parent.name: (p.parent / "model").as_posix() + "/"
        for p in ctx.inputs.get("run_manifests", [])
    }
    paths = ctx.inputs.get("variants", [])
    if paths:
        import pandas as pd

        frame = pd.read_parquet(paths[0])
        for needed in ("run", "variant", "status", "weight_file"):
            if needed not in frame.columns:
                raise CampaignError(f"{paths[0]}: expected a column '{needed}'")
        for r in frame[frame["status"].astype(str) == "ok"].itertuples():
            if r.weight_file:
                model = paths[0].parent / str(r.run) / str(r.variant) / "model"
                out[f"{r.run}/{r.variant}"] = (model / str(r.weight_file)).as_posix()
    return out


_COLUMNS = {
    "jobs": [
        "run", "tier", "seed", "device", "wall_hours", "cards", "card_hours", "train_hours",
        "benchmark_seconds", "peak_memory_bytes", "resumed_from_step", "offer", "price_per_hour",
        "cost", "currency",
    ],
    "forecast": [
        "run", "tier", "kept", "finished", "projected_hours", "actual_hours", "step_hours", "ratio",
        "forecast_from_earlier_hours", "abs_error_projected", "abs_error_calibrated",
        "step_factor", "step_factor_low", "step_factor_high", "overhead_hours",
        "overhead_hours_low", "overhead_hours_high", "forecast_hours", "cards", "flops",
    ],
    "offers": [
        "offer", "gpu", "memory_gib", "fits_memory", "measured", "hours_from", "scenario",
        "pricing", "days", "gpus", "price", "price_per_card_hour", "hourly",
        "break_even_card_hours", "work_card_hours", "hourly_cost_of_work", "holds_work",
        "verdict", "currency",
    ],
    "plans": [
        "scenario", "offer", "gpu", "pricing", "runs", "guard_jobs", "guard_card_hours",
        "card_hours", "hours_from", "cost", "currency", "wall_hours", "hourly_card_hours",
        "meets_deadline", "why_not", "cheapest",
    ],
    "equal_quality": [
        "variant", "run", "kind", "decision", "quality_split", "quality", "quality_low",
        "quality_high", "train_hours", "train_cost", "throughput", "throughput_of",
        "serve_hours", "serve_cost", "total_cost", "currency", "cheapest", *serving.TOKENS,
    ],
    "serving": serving.COLUMNS,
    "to_decide": [
        "subject", "decision", "dominant", "n_seeds", "seeds_needed", "seeds_needed_low",
        "seeds_needed_high", "cells", "extra_runs", "hours_per_run", "extra_hours", "cost",
        "cost_low", "cost_high", "currency", "items_needed",
    ],
}  # fmt: skip


def jobs_price(reference: Offer) -> float:
    """The reference offer's price per card-hour: hourly, else its cheapest package's."""
    if reference.hourly is not None:
        return reference.hourly
    return min((p.price_per_card_hour for p in reference.packages), default=math.nan)


def cards_of(recipes: dict, run: str) -> int:
    """The cards a run holds: its train.devices (one when the recipe does not say)."""
    return int(train_key((recipes.get(run) or {}), "devices"))


def _jobs(plan, manifests, timings, benchmarks, reference: Offer, currency: str, recipes) -> list:
    """One row per finished run; its money is its wall hours x its cards at the reference
    offer's price per card-hour (every card of the job is paid while the job holds it)."""
    rows = []
    price = jobs_price(reference)
    for r in plan:
        run = r["run"]
        if run not in manifests and run not in timings:
            continue
        t = read_json(timings[run]) if run in timings else {}
        bench = read_benchmark(benchmarks[run]) if run in benchmarks else {}
        device = t.get("device") or {}
        wall_s = t.get("wall_seconds", bench.get("seconds", math.nan))
        cards = cards_of(recipes, run)
        rows.append(
            {
                "run": run,
                "tier": r["tier"],
                "seed": r.get("seed"),
                "device": str(device.get("name") or device.get("type") or "unknown"),
                "wall_hours": wall_s / HOUR_S,
                "cards": cards,
                "card_hours": wall_s / HOUR_S * cards,
                "train_hours": t.get("train_seconds", math.nan) / HOUR_S,
                "benchmark_seconds": bench.get("seconds", math.nan),
                "peak_memory_bytes": t.get(
                    "peak_memory_bytes", bench.get("max_rss_bytes", math.nan)
                ),
                "resumed_from_step": t.get("resumed_from_step"),
                "offer": reference.name,
                "price_per_hour": price,
                "cost": wall_s / HOUR_S * cards * price,
                "currency": currency,
            }
        )
    return rows


def _forecast(plan, jobs, b, recipes, n_params, n_trainable, eval_examples):
    measured = {j["run"]: j for j in jobs if math.isfinite(j["wall_hours"])}
    done = [r for r in plan if r["run"] in measured]
    projected = np.array([r["projected_hours"] for r in done])
    steps = np.array([measured[r["run"]]["train_hours"] for r in done])
    wall = np.array([measured[r["run"]]["wall_hours"] for r in done])
    earlier = calibrate.sequential_forecasts(projected, steps, wall, b["min_pairs"])
    cal = (
        calibrate.fit(projected, steps, wall, np.random.default_rng(b["seed"]), b["resamples"])
        if len(done) >= b["min_pairs"]
        else calibrate.NO_CALIBRATION
    )
    by_run = {r["run"]: i for i, r in enumerate(done)}
    rows = []
    for r in plan:
        i = by_run.get(r["run"])
        recipe = recipes.get(r["run"])
        flops = run_flops(recipe, n_params, n_trainable, eval_examples) if recipe else math.nan
        actual = math.nan if i is None else float(wall[i])
        from_earlier = math.nan if i is None else float(earlier[i])
        rows.append(
            {
                "run": r["run"],
                "tier": r["tier"],
                "kept": r["kept"],
                "finished": i is not None,
                "projected_hours": r["projected_hours"],
                "actual_hours": actual,
                "step_hours": math.nan if i is None else float(steps[i]),
                "ratio": actual / r["projected_hours"] if r["projected_hours"] > 0 else math.nan,
                "forecast_from_earlier_hours": from_earlier,
                "abs_error_projected": abs(r["projected_hours"] - actual) / actual,
                "abs_error_calibrated": abs(from_earlier - actual) / actual,
                "step_factor": cal.steps.value,
                "step_factor_low": cal.steps.low,
                "step_factor_high": cal.steps.high,
                "overhead_hours": cal.overhead_hours.value,
                "overhead_hours_low": cal.overhead_hours.low,
                "overhead_hours_high": cal.overhead_hours.high,
                "forecast_hours": actual if i is not None else cal.forecast(r["projected_hours"]),
                "cards": cards_of(recipes, r["run"]),
                "flops": flops,
            }
        )
    return cal, rows


def _peak_bytes(report: dict) -> float | None:
    est = report.get("memory", {}).get("details", {}).get("estimate_for_cards", {})
    return float(est["peak_bytes"]) if est.get("peak_bytes") else None


def _offer_rows(offer, hours, cards, how, fits, peak_bytes, b, scenario) -> list[dict]:
    base = {
        "offer": offer.name,
        "gpu": offer.gpu,
        "memory_gib": offer.memory_gib,
        "fits_memory": fits,
        "measured": how == "measured",
        "hours_from": how,
        "scenario": scenario,
        "currency": b["currency"],
    }
    rows = []
    if offer.hourly is not None:
        rows.append(
            base
            | {
                "pricing": "hourly",
                "days": math.nan,
                "gpus": offer.hourly_gpus,
                "price": offer.hourly,
                "price_per_card_hour": offer.hourly,
                "hourly": offer.hourly,
                "break_even_card_hours": math.nan,
                "work_card_hours": card_hours_of(hours, cards),
                "hourly_cost_of_work": card_hours_of(hours, cards) * offer.hourly,
                "holds_work": True,
                "verdict": "hourly",
            }
        )
    for p in offer.packages:
        row = package_vs_hourly(offer, p, hours, b["deadline_hours"], cards)
        rows.append(base | row)
    return rows


def _as_option(r: dict):
    from campaign.budget.offers import Option

    return Option(
        r["offer"], r["pricing"], r["cost"], r["wall_hours"], r["hourly_card_hours"],
        r["meets_deadline"], r["why_not"],
    )  # fmt: skip


def quality_bar(decisions: Decisions) -> dict | None:
    """The bar every candidate at equal quality is held to: the kept cell's quality on the
    split it was not chosen on (its `reported` level, else its by_split entry for that split;
    no winner's curse), or, from an evaluation that has neither, its quality on the split it
    was chosen on, marked optimistic. None without a kept cell."""
    best = decisions.best_cell
    if best is None:
        return None
    chosen_on = best.chosen_on or decisions.decide_on
    other = {s: q for s, q in best.by_split.items() if s != chosen_on}
    if best.reported.value is not None:
        split, q, optimistic = best.reported_on, best.reported, False
    elif len(other) == 1 and next(iter(other.values())).value is not None:
        (split, q), optimistic = next(iter(other.items())), False
    else:
        split, q, optimistic = chosen_on, best, True
    return {
        "cell": best.cell,
        "chosen_on": chosen_on,
        "split": split,
        "metric": decisions.metric,
        "value": q.value,
        "ci_low": q.ci_low,
        "ci_high": q.ci_high,
        "optimistic": optimistic,
        "representative_run": best.representative_run,
    }


def floors_at_bar(decisions: Decisions) -> list[str]:
    """The floor variants shown at least as good as the kept cell: the verdict's floor when
    the evaluation keeps one (the kept cell is below it by its test, or not shown above it);
    from an evaluation without a verdict, the floors its floor test put the kept cell below. A
    floor the test does not show to be better is not a candidate (its quality is not shown)."""
    verdict = decisions.verdict
    if verdict is not None:
        return [verdict.keep] if verdict.kind == "floor" else []
    cell = decisions.best_cell.cell if decisions.best_cell is not None else None
    return sorted({f.floor for f in decisions.below_floor if f.cell == cell and f.verdict == BELOW})


def _equal_quality(
    ctx, decisions: Decisions | None, jobs, b, reference: Offer
) -> tuple[dict | None, list[dict]]:
    """The quality bar, and the variants at it with the cost to train and to serve."""
    if decisions is None:
        return None, []
    bar = quality_bar(decisions)
    if bar is None:
        return None, []
    best_runs = list(decisions.best_cell.runs)
    speeds = _serving(ctx.inputs.get("variants", []))
    split = bar["split"]
    floor_paths = ctx.inputs.get("floor_timings", [])
    floor_cost = read_json(floor_paths[0]).get("floors", {}) if floor_paths else {}
    quality = _quality(ctx.inputs.get("metrics", []), bar["metric"], bar["split"])
    cost = {j["run"]: j for j in jobs}
    price = reference.hourly if reference.hourly is not None else math.nan
    candidates = [(run, run, "run", "chosen cell") for run in best_runs]
    for d in decisions.of_kind("quantized"):
        if d.reference in best_runs:
            candidates.append((d.subject, d.reference, "quantized", d.decision))
    for name in floors_at_bar(decisions):
        candidates.append((name, None, "floor", "better than the chosen cell"))
    rows = []
    for name, run, kind, decision in candidates:
        if kind == "quantized" and decision != ADOPT:
            continue  # not shown within evaluation.max_quality_loss of its run
        if kind == "floor":
            row = serving.floor_option(name, floor_cost.get(name, {}), price, b, quality, split)
            rows.append(row | {"decision": decision})
            continue
        variant = name.partition("/")[2] if kind == "quantized" else "fp32"
        throughput, measured_on_run = speeds.get((run, variant), math.nan), run
        if not math.isfinite(throughput):
            # Serving speed is the model's shape and the variant's, not the seed's: another
            # run of the chosen cell measured with this variant stands in.
            others = [(speeds[(r, variant)], r) for r in best_runs if (r, variant) in speeds]
            if others:
                throughput, measured_on_run = sorted(others)[len(others) // 2]
        measured_on_run = f"{measured_on_run}/{variant}"
        job = cost.get(run, {})
        train_hours = job.get("wall_hours", math.nan)
        train_cost = job.get("cost", math.nan)
        serve_hours = b["predictions"] / throughput / HOUR_S if throughput > 0 else math.nan
        q = quality.get(name, (math.nan, math.nan, math.nan))
        rows.append(
            {
                "variant": name,
                "run": run,
                "kind": kind,
                "decision": decision,
                "quality_split": bar["split"],
                "quality": q[0],
                "quality_low": q[1],
                "quality_high": q[2],
                "train_hours": train_hours,
                "train_cost": train_cost,
                "throughput": throughput,
                "throughput_of": measured_on_run,
                "serve_hours": serve_hours,
                "serve_cost": serve_hours * price,
                "total_cost": train_cost + serve_hours * price,
                "currency": b["currency"],
                "cheapest": False,
            }
        )
    known = [r for r in rows if math.isfinite(r["total_cost"])]
    if known:
        min(known, key=lambda r: (r["total_cost"], r["variant"]))["cheapest"] = True
    return bar, rows


def _number(value) -> float:
    return math.nan if value is None else float(value)


def _quality(paths: list[Path], metric: str | None, split: str | None) -> dict:
    """{variant: (value, ci_low, ci_high)} of the evaluation's metric on `split` (optional
    table: results/evaluation/metrics.parquet)."""
    if not paths or metric is None or split is None:
        return {}
    frame = read_table(paths[0], ("variant", "split", "metric", "value", "ci_low", "ci_high"))
    frame = frame[(frame["split"] == split) & (frame["metric"] == metric)]
    return {
        str(r.variant): (_number(r.value), _number(r.ci_low), _number(r.ci_high))
        for r in frame.itertuples()
    }


def _serving(paths: list[Path]) -> dict[tuple[str, str], float]:
    """{(run, variant): predictions per second} of the measured variants (optional table)."""
    if not paths:
        return {}
    frame = read_table(paths[0], ("run", "variant", "throughput"))
    if "status" in frame.columns:
        frame = frame[frame["status"].astype(str) == "ok"]
    return {
        (str(r.run), str(r.variant)): float(r.throughput)
        for r in frame.itertuples()
        if r.throughput is not None and math.isfinite(float(r.throughput))
    }
