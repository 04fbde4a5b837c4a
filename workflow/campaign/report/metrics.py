"""The campaign's headline numbers for `dvc metrics show`: data identity, plan size, each trained
run's final validation accuracy, and the evaluation's verdict: the best cell (mean over seeds,
with its interval, on validation and test), the decisions, how many cells are below the floor
and how many are not shown above it."""

from __future__ import annotations

import csv
import json

from campaign.core.io import read_json
from campaign.evaluate import BELOW, NOT_SHOWN
from campaign.plan import COST_COLUMNS, ID_COLUMNS


def stage(ctx) -> None:
    summary = read_json(ctx.inputs["summary"][0])
    with open(ctx.inputs["runs"][0], encoding="utf-8", newline="") as f:
        runs = list(csv.DictReader(f, delimiter="\t"))
    not_factors = {*ID_COLUMNS, *COST_COLUMNS}
    factor_columns = [c for c in (runs[0] if runs else {}) if c not in not_factors]
    trained = {}
    for path in ctx.inputs.get("run_manifests", []):
        manifest = read_json(path)
        final = manifest.get("final_validation") or {}
        trained[path.parent.name] = final.get("accuracy")
    scored = {k: v for k, v in trained.items() if v is not None}
    best = max(scored, key=scored.get) if scored else None
    metrics = {
        "data": {
            "dataset_hash": summary["dataset_hash"],
            "records": summary["records"],
            "labels": len(summary["per_label"]),
        },
        "plan": {
            "runs": len(runs),
            "seeds": len({r["seed"] for r in runs}),
            "cells": len({tuple(r[c] for c in factor_columns) for r in runs}),
        },
        "training": {
            "runs_trained": len(trained),
            "validation_accuracy": dict(sorted(trained.items())),
            "best_run": best,
            "best_validation_accuracy": scored[best] if best else None,
        },
    }
    if ctx.inputs.get("decisions"):
        from campaign.evaluate import read_decisions, record_dict

        decisions = read_decisions(ctx.inputs["decisions"][0])
        best = decisions.best_cell
        metrics["evaluation"] = {
            "decide_on": decisions.decide_on,
            "metric": decisions.metric,
            "best_cell": record_dict(best) if best is not None else None,
            # below_floor lists every cell not shown above the floor; only those the test
            # puts below it are below: the two are different statements.
            "below_floor": sum(f.verdict == BELOW for f in decisions.below_floor),
            "not_shown_above_floor": sum(f.verdict == NOT_SHOWN for f in decisions.below_floor),
            "decisions": {d.subject: d.decision for d in decisions.decisions},
        }
    ctx.outputs["metrics"].write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
