"""The track stage: the experiment index (results/index.parquet) logged to MLflow, one run per
row under a parent run for the campaign, and each trained run's curves (its metrics.parquet)
as TensorBoard event files; a small record of what was logged (results/tracking/logged.json)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.fsutil import atomic_write_text
from campaign.core.io import read_json
from campaign.evaluate import read_decisions
from campaign.track.curves import read_curves
from campaign.track.mlflow_log import (
    LOCAL_URI,
    TAG,
    open_logger,
    row_metrics,
    row_params,
    row_tags,
    safe_uri,
    track_key,
)

# Index columns before the factor levels, and the first one after them (campaign.index.stage).
INDEX_HEAD = ("name", "kind", "run", "variant")
INDEX_AFTER_FACTORS = "cell"
# Parent-run artifacts: folder in the run -> the stage inputs it holds.
ARTIFACTS = {
    "report": ("report_html", "report_markdown", "decisions"),
    "budget": ("budget_summary", "jobs", "plans", "forecast"),
}


# What a generated-text campaign's runs produced (results/evaluation/errors/), logged with the
# parent run under samples/: the items each variant generated, its worst items, JSON fields.
SAMPLE_FILES = ("samples.parquet", "worst.parquet", "fields.parquet")


def sample_files(errors: list[Path]) -> list[Path]:
    """The generated samples in the evaluation's errors folder (none for a label task)."""
    return [Path(f) / name for f in errors for name in SAMPLE_FILES if (Path(f) / name).is_file()]


def _one(inputs: dict[str, list[Path]], name: str) -> Path:
    if len(inputs.get(name, [])) != 1:
        raise CampaignError(f"track: expected one file for input '{name}' (--in {name}=PATH)")
    return Path(inputs[name][0])


def read_index(path: Path) -> tuple[list[str], list[dict]]:
    """(factor names, rows) of the experiment index."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises several types for a file that is not Parquet
        raise CampaignError(f"{path}: not a readable Parquet table ({type(e).__name__})") from None
    columns = list(table.column_names)
    for needed in (*INDEX_HEAD, INDEX_AFTER_FACTORS, "metric", "store_key", "split_hash"):
        if needed not in columns:
            raise CampaignError(f"{path}: expected a column '{needed}'")
    factors = columns[len(INDEX_HEAD) : columns.index(INDEX_AFTER_FACTORS)]
    # pyarrow's rows keep the column types: a seed stays a whole number, a missing value None.
    rows = table.to_pylist()
    return factors, rows


def _by_run(paths: list[Path], what: str) -> dict[str, Path]:
    """{run: path} for results/runs/<run>/<file>."""
    out: dict[str, Path] = {}
    for p in map(Path, paths):
        if p.parent.name in out:
            raise CampaignError(f"{p}: a second {what} for {p.parent.name}")
        out[p.parent.name] = p
    return out


def _verdict(decisions: Path) -> str:
    best = read_decisions(decisions).best_cell
    return best.cell if best is not None else "no cell shown best"


def stage_track(ctx) -> None:
    spec = ctx.spec
    campaign, experiment = spec["campaign"], spec["mlflow"]["experiment"]
    index = _one(ctx.inputs, "index")
    factors, rows = read_index(index)
    metrics_files = _by_run(ctx.inputs.get("run_metrics", []), "metrics table")
    spec_files = _by_run(ctx.inputs.get("run_specs", []), "run spec")
    curves = {}
    for row in rows:
        if row["kind"] != "run":
            continue
        if row["name"] not in metrics_files:
            raise CampaignError(
                f"{index}: run {row['name']} has no metrics.parquet among the inputs"
            )
        curves[row["name"]] = read_curves(metrics_files[row["name"]], row["metric"])

    tensorboard = Path(ctx.outputs["tensorboard"])
    tensorboard.mkdir(parents=True, exist_ok=True)
    if spec["tensorboard"]:
        from campaign.track.tensorboard_log import write_run

        for run, run_curves in curves.items():
            write_run(tensorboard / run, run_curves)

    logger = open_logger(spec["mlflow"]["uri"], experiment, campaign, ctx.root)
    hours = sum(r["hours"] for r in rows if r.get("hours") is not None)
    cost = sum(r["cost"] for r in rows if r.get("cost") is not None)
    parent_tags = {f"{TAG}name": campaign, f"{TAG}kind": "campaign", "mlflow.runName": campaign,
                   f"{TAG}verdict": _verdict(_one(ctx.inputs, "decisions"))}  # fmt: skip
    totals = {k: v for k, v in (("hours", hours), ("cost", cost)) if not math.isnan(v)}
    parent, parent_action = logger.upsert(f"campaign:{campaign}", parent_tags, {}, totals)
    files = {folder: [_one(ctx.inputs, n) for n in names] for folder, names in ARTIFACTS.items()}
    files["samples"] = sample_files(ctx.inputs.get("errors", []))
    logger.artifacts(parent, files)
    logged = []
    for row in rows:
        recipe = None
        if row["kind"] != "floor" and row["run"] in spec_files:
            recipe = read_json(spec_files[row["run"]])
        run_id, action = logger.upsert(
            track_key(row),
            row_tags(row, campaign),
            row_params(row, factors, recipe),
            row_metrics(row),
            curves.get(row["name"]),
            parent=parent,
        )
        logged.append({"name": row["name"], "kind": row["kind"], "run_id": run_id,
                       "action": action})  # fmt: skip
    uri = spec["mlflow"]["uri"]
    record = {
        "tracking_uri": LOCAL_URI if uri is None else safe_uri(uri),
        "experiment": experiment,
        "experiment_id": logger.experiment_id,
        "parent": {"run_id": parent, "action": parent_action},
        "runs": logged,
        "tensorboard": sorted(curves) if spec["tensorboard"] else [],
    }
    atomic_write_text(ctx.outputs["logged"], json.dumps(record, indent=2, sort_keys=True) + "\n")
    created = sum(r["action"] == "created" for r in logged)
    print(
        f"track: {len(logged)} run(s) in experiment '{experiment}' at {record['tracking_uri']} "
        f"({created} new, {len(logged) - created} updated)",
        flush=True,
    )
