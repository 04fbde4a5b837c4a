"""The campaign's headline numbers for `dvc metrics show`: data identity and plan size."""

from __future__ import annotations

import csv
import json


def stage(ctx) -> None:
    summary = json.loads(ctx.inputs["summary"][0].read_text(encoding="utf-8"))
    with open(ctx.inputs["runs"][0], encoding="utf-8", newline="") as f:
        runs = list(csv.DictReader(f, delimiter="\t"))
    factor_columns = [c for c in (runs[0] if runs else {}) if c not in ("run", "roles", "seed")]
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
    }
    ctx.outputs["metrics"].write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
