"""What each planned run will cost, projected from the preflight's measurements, and whether the
plan fits: hours against `preflight.max_hours`, bytes against the free disk.

A run's time: its training steps at the preflight's measured step rate, scaled by its tokens per
step (micro_batch x grad_accum x max_length) against the baseline's; its validation passes and
final predictions at the measured seconds per example; its checkpoint writes at the measured
seconds per write. Its disk: the checkpoints it keeps, the model, predictions and logs, at the
sizes the preflight wrote. One run at a time on the preflight's device.
"""

from __future__ import annotations

import math

from campaign.core.errors import CampaignError

HOUR_S = 3600.0
COST_COLUMNS = ("projected_hours", "cumulative_hours", "projected_bytes")


def evaluations_per_run(max_steps: int, eval_every: int) -> int:
    """Validation passes of one run: every eval_every steps, and at the last step."""
    return max_steps // eval_every + (1 if max_steps % eval_every else 0)


def step_scale(recipe: dict, baseline: dict) -> float:
    """How much one step of `recipe` costs relative to one of the baseline's (padded tokens)."""

    def tokens(r: dict) -> int:
        return r["micro_batch"] * r["grad_accum"] * r["max_length"]

    return tokens(recipe) / tokens(baseline)


def run_cost(
    recipe: dict, baseline: dict, rates: dict, sizes: dict, timings_bytes: int = 0
) -> dict:
    """{seconds, bytes} of one run. rates: the throughput check's measured rates; sizes: the disk
    check's exact sizes (one checkpoint, the model, predictions, logs; example counts)."""
    steps = recipe["max_steps"]
    per_example = rates["eval_seconds_per_example"]
    n_val, n_test = sizes["validation_examples"], sizes["test_examples"]
    seconds = {
        "train": steps / rates["steps_per_s"] * step_scale(recipe, baseline),
        "evaluation": evaluations_per_run(steps, recipe["eval_every"]) * n_val * per_example,
        "predictions": (n_val + n_test) * per_example,
        "checkpoints": math.ceil(steps / recipe["checkpoint_every"])
        * rates["checkpoint_save_seconds"],
    }
    disk = (
        sizes["checkpoint_bytes"] * recipe["keep_checkpoints"]
        + sizes["model_bytes"]
        + sizes["prediction_bytes"]
        + sizes["log_bytes"]
        + timings_bytes
    )
    return {"seconds": sum(seconds.values()), "parts": seconds, "bytes": disk}


def project(spec: dict, report: dict, measurements: dict) -> list[dict]:
    """One row per run (spec["rows"] order) with projected_hours, cumulative_hours and
    projected_bytes. Raises CampaignError (one line) when the plan exceeds max_hours or the
    free disk with its margin."""
    rates = measurements["throughput"]["details"]["rates"]
    sizes = report["disk"]["details"]
    free = measurements["disk"]["details"]["free_bytes"]
    timings_bytes = measurements["disk"]["details"].get("timings_bytes", 0)
    rows, total_s, total_bytes = [], 0.0, 0
    for row in spec["rows"]:
        cost = run_cost(spec["recipes"][row["run"]], spec["baseline"], rates, sizes, timings_bytes)
        total_s += cost["seconds"]
        total_bytes += cost["bytes"]
        rows.append(
            {
                **row,
                "projected_hours": round(cost["seconds"] / HOUR_S, 6),
                "cumulative_hours": round(total_s / HOUR_S, 6),
                "projected_bytes": int(cost["bytes"]),
            }
        )
    max_hours = spec["max_hours"]
    if max_hours is not None and total_s / HOUR_S > max_hours:
        raise CampaignError(
            f"preflight.max_hours: the plan of {len(rows)} runs is projected at "
            f"{total_s / HOUR_S:.2f} h on this device, over {max_hours:g} h; trim the plan or "
            f"raise max_hours"
        )
    need = int(total_bytes * (1 + spec["disk_margin"]))
    if need > free:
        raise CampaignError(
            f"preflight.disk_margin: the plan of {len(rows)} runs needs {need / 2**30:.2f} GiB "
            f"with its margin and {free / 2**30:.2f} GiB are free"
        )
    return rows
