"""What each planned run will cost, projected from the preflight's measurements, and whether the
plan fits: hours against `preflight.max_hours`, bytes against the free disk.

A run's time: its training steps at the preflight's measured step rate, scaled by its tokens per
step (micro_batch x grad_accum x devices x max_length, the effective batch) against the
baseline's, and split over its train.devices processes; its validation passes and final
predictions at the measured seconds per example; its checkpoint writes at the measured seconds
per write (those are rank 0's: the other processes wait). Its disk: the checkpoints it keeps, the
model, predictions and logs, at the sizes the preflight wrote, against the free disk measured
when the plan is made (`free_bytes`, from the caller): the preflight's own measurement is of the
day its entry was made, and a store hit brings it back unchanged after space was freed. One run
at a time on the preflight's device (a projection per target card needs each card's throughput,
which params do not give yet).

The hours are wall hours of a run on its cards: a run with train.devices N holds N cards for
them, N x its hours in card-hours (what the budget prices). The preflight measures the
baseline's effective batch on one process (preflight/bench.py), so the split over N processes
assumes the steps scale perfectly; the budget's calibration measures how far they do.

The plan is then cut: the kept runs are the first ones of the plan's order whose cumulative hours
fit `ablation.budget_hours` (and within `ablation.max_runs`, cut before).
"""

from __future__ import annotations

import math

from campaign.core.defaults import train_key
from campaign.core.errors import CampaignError

HOUR_S = 3600.0


def evaluations_per_run(max_steps: int, eval_every: int) -> int:
    """Validation passes of one run: every eval_every steps, and at the last step."""
    return max_steps // eval_every + (1 if max_steps % eval_every else 0)


def step_scale(recipe: dict, baseline: dict) -> float:
    """How much one step of `recipe` costs relative to one of the baseline's on one process
    (padded tokens of the effective batch; devices: 1 when absent)."""

    def tokens(r: dict) -> int:
        return r["micro_batch"] * r["grad_accum"] * train_key(r, "devices") * r["max_length"]

    return tokens(recipe) / tokens(baseline)


def run_cost(
    recipe: dict, baseline: dict, rates: dict, sizes: dict, timings_bytes: int = 0
) -> dict:
    """{seconds, bytes} of one run: seconds of wall time on its recipe["devices"] cards (1 when
    absent). rates: the throughput check's measured rates; sizes: the disk check's exact sizes
    (one checkpoint, the model, predictions, logs; example counts), and for a command's run
    `extra_bytes`: what else it writes while it runs (the command check's measure)."""
    steps = recipe["max_steps"]
    devices = train_key(recipe, "devices")
    per_example = rates["eval_seconds_per_example"]
    n_val, n_test = sizes["validation_examples"], sizes["test_examples"]
    seconds = {
        "train": steps / rates["steps_per_s"] * step_scale(recipe, baseline) / devices,
        "evaluation": evaluations_per_run(steps, recipe["eval_every"]) * n_val * per_example,
        "predictions": (n_val + n_test) * per_example,
        "checkpoints": math.ceil(steps / recipe["checkpoint_every"])
        * rates["checkpoint_save_seconds"],
    }
    # A run's outputs lie in the store and, copied, in results/ (checkpoints: the store only).
    disk = sizes["checkpoint_bytes"] * recipe["keep_checkpoints"] + 2 * (
        sizes["model_bytes"] + sizes["prediction_bytes"] + sizes["log_bytes"] + timings_bytes
    )
    disk += sizes.get("extra_bytes", 0)
    return {"seconds": sum(seconds.values()), "parts": seconds, "bytes": disk}


def command_sizes(sizes: dict, trainer: dict) -> dict:
    """The disk check's sizes for a command's run: its own checkpoint and model as the command
    check measured them, and everything else it wrote (`extra_bytes`); the built-in loop's
    sizes where the command was not measured."""
    disk = trainer.get("disk")
    if not disk:
        return sizes
    return {
        **sizes,
        "checkpoint_bytes": disk["checkpoint_bytes"],
        "model_bytes": disk["model_bytes"],
        "extra_bytes": sum(disk["undeclared"].values()),
    }


def run_costs(spec: dict, report: dict, measurements: dict) -> list[dict]:
    """run_cost of each row of spec["rows"], in order: the built-in loop's runs at the
    throughput check's rates, a command's at the steps/s and sizes its own check measured."""
    rates = measurements["throughput"]["details"]["rates"]
    # The preflight's command check: each outside trainer's own steps/s (absent: not measured).
    trainers = (measurements.get("command") or {}).get("details", {}).get("runs") or {}
    sizes = report["disk"]["details"]
    timings_bytes = measurements["disk"]["details"].get("timings_bytes", 0)
    costs = []
    for row in spec["rows"]:
        recipe = spec["recipes"][row["run"]]
        trainer = trainers.get(recipe.get("trainer")) or {}
        own = trainer.get("steps_per_s")
        run_rates = rates if not own else {**rates, "steps_per_s": own}
        costs.append(run_cost(recipe, spec["baseline"], run_rates,
                              command_sizes(sizes, trainer), timings_bytes))  # fmt: skip
    return costs


def project(
    spec: dict,
    report: dict,
    measurements: dict,
    free_bytes: int,
    price_per_hour: float | None = None,
) -> list[dict]:
    """One row per run (spec["rows"], in plan order) with projected_hours, cumulative_hours
    (over every row so far), projected_bytes and kept: the rows the max_runs cut kept
    (row["kept"]) whose cumulative hours fit ablation.budget_hours, a prefix of the order.

    Raises CampaignError (one line) when the budget does not hold even the control, or the kept
    runs exceed preflight.max_hours or `free_bytes` (the free disk now) with its margin."""
    budget = spec.get("budget_hours")
    rows, total_s = [], 0.0
    kept_s, kept_bytes = 0.0, 0
    for row, cost in zip(spec["rows"], run_costs(spec, report, measurements), strict=True):
        total_s += cost["seconds"]
        kept = bool(row.get("kept", True)) and (budget is None or total_s / HOUR_S <= budget)
        if kept:
            kept_s += cost["seconds"]
            kept_bytes += cost["bytes"]
        rows.append(
            {
                **{k: v for k, v in row.items() if k != "kept"},
                "projected_hours": round(cost["seconds"] / HOUR_S, 6),
                "cumulative_hours": round(total_s / HOUR_S, 6),
                "projected_bytes": int(cost["bytes"]),
                "kept": kept,
            }
        )
    n_kept = sum(r["kept"] for r in rows)
    if rows and budget is not None and not rows[0]["kept"]:
        raise CampaignError(
            f"ablation.budget_hours: the control run alone is projected at "
            f"{rows[0]['projected_hours']:.3g} h on this device, over the budget of {budget:g} h; "
            f"raise budget_hours or make the recipe cheaper"
        )
    max_hours = spec["max_hours"]
    if max_hours is not None and kept_s / HOUR_S > max_hours:
        raise CampaignError(
            f"preflight.max_hours: the plan's {n_kept} kept runs are projected at "
            f"{kept_s / HOUR_S:.2f} h on this device, over {max_hours:g} h; trim the plan, set "
            f"ablation.budget_hours or raise max_hours"
        )
    need = int(kept_bytes * (1 + spec["disk_margin"]))
    if need > free_bytes:
        raise CampaignError(
            f"preflight.disk_margin: the plan's {n_kept} kept runs need {need / 2**30:.2f} GiB "
            f"with its margin and {free_bytes / 2**30:.2f} GiB are free now"
        )
    return priced(rows, price_per_hour)


def priced(rows: list[dict], price_per_hour: float | None) -> list[dict]:
    """The hook for money. The budget section (offers, currency) arrives with a later issue: it
    will choose a price per hour of this device (or per target card) and pass it here, and each
    row gains projected_cost and cumulative_cost in that currency. Without a price (today) the
    rows stay in hours."""
    if price_per_hour is None:
        return rows
    return [
        {
            **r,
            "projected_cost": round(r["projected_hours"] * price_per_hour, 6),
            "cumulative_cost": round(r["cumulative_hours"] * price_per_hour, 6),
        }
        for r in rows
    ]
