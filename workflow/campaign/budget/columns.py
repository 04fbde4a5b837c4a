"""The budget's columns of the experiment index (Phase.index): what each trained run cost, from
results/budget/jobs.parquet, at the budget's reference offer."""

from __future__ import annotations

from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.io import number_or_none, read_table

JOBS_COLUMNS = ("run", "wall_hours", "cost", "currency", "offer")
# Why a row that is not a trained run has no cost.
NOT_COSTED = {
    "quantized": "quantize jobs are not costed in the budget's jobs table",
    "floor": "the floor is not costed in the budget's jobs table",
}
NOT_IN_JOBS = "not in the budget's jobs table"


def cost_columns(inputs: dict[str, list[Path]], rows: list[dict]) -> list[dict]:
    """{hours, cost, currency, cost_offer, cost_reason} per index row: a run's from its
    budget job, the others null with the reason."""
    if len(inputs.get("jobs") or []) != 1:
        raise CampaignError("index: expected one file for input 'jobs' (--in jobs=PATH)")
    table = read_table(inputs["jobs"][0], JOBS_COLUMNS)
    jobs = {r["run"]: r for r in table.to_dict("records")}
    out = []
    for row in rows:
        job = jobs.get(row.get("run")) if row["kind"] == "run" else None
        if job is None:
            out.append({"cost_reason": NOT_COSTED.get(row["kind"], NOT_IN_JOBS)})
            continue
        out.append(
            {
                "hours": number_or_none(job["wall_hours"]),
                "cost": number_or_none(job["cost"]),
                "currency": job["currency"],
                "cost_offer": job["offer"],
                "cost_reason": None,
            }
        )
    return out
