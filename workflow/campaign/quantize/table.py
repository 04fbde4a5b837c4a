"""The variants table: one row per (run, variant) the phase ran, skipped ones included, with
what each costs and how often it agrees with its run's fp32 predictions.

results/quantize/variants.parquet columns: run, variant, status, reason, method, library,
library_version, device, threads, size_bytes, state_bytes, peak_memory_bytes, latency_ms_p50,
latency_ms_p95, throughput, agreement (test; validation in agreement_validation),
accuracy_validation, accuracy_test, weight_file (the model file a user would ship, in the
variant's model folder: model.safetensors, state_dict.pt or model.onnx; empty when skipped),
and against the run's fp32 row when there is one:
size_ratio (fp32 bytes / variant bytes) and speedup (fp32 p50 latency / variant p50 latency).
It holds measurements, so it is a volatile output; the deterministic numbers are in each
variant's result.json.
"""

from __future__ import annotations

import json
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.quantize.variant import WEIGHT_FILES

# The leading columns: what the row is (text; string dtype in the table, as weight_file).
TEXT_COLUMNS = (
    "run",
    "variant",
    "status",
    "reason",
    "method",
    "library",
    "library_version",
    "device",
)
COLUMNS = (
    *TEXT_COLUMNS,
    "threads",
    "size_bytes",
    "state_bytes",
    "peak_memory_bytes",
    "latency_ms_p50",
    "latency_ms_p95",
    "throughput",
    "agreement",
    "agreement_validation",
    "accuracy_validation",
    "accuracy_test",
    "weight_file",
    "size_ratio",
    "speedup",
)
REFERENCE = "fp32"


def _read(path: Path, name: str) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CampaignError(f"input '{name}': {path} is not readable JSON ({e})") from None


def row(result: dict, measured: dict) -> dict:
    """One table row from a variant's result.json and measurements.json."""
    timing = measured.get("timing") or {}
    agree = result.get("agreement") or {}
    acc = result.get("accuracy") or {}
    return {
        "run": result["run"],
        "variant": result["variant"],
        "status": result["status"],
        "reason": result.get("reason"),
        "method": result["method"],
        "library": result["library"],
        "library_version": result["library_version"],
        "device": measured.get("device", result.get("device")),
        "threads": measured.get("threads"),
        "size_bytes": result.get("size_bytes"),
        "state_bytes": result.get("state_bytes"),
        "peak_memory_bytes": measured.get("peak_memory_bytes"),
        "latency_ms_p50": timing.get("latency_ms_p50"),
        "latency_ms_p95": timing.get("latency_ms_p95"),
        "throughput": timing.get("throughput"),
        "agreement": (agree.get("test") or {}).get("rate"),
        "agreement_validation": (agree.get("validation") or {}).get("rate"),
        "accuracy_validation": acc.get("validation"),
        "accuracy_test": acc.get("test"),
        "weight_file": WEIGHT_FILES[result["format"]] if result["status"] == "ok" else None,
    }


def variants_table(results: list[Path], measurements: list[Path]):
    """The table (pandas DataFrame, sorted by run then variant) from paired result and
    measurements files."""
    import pandas as pd

    if len(results) != len(measurements):
        raise CampaignError(
            f"inputs 'results' and 'measurements': {len(results)} results but "
            f"{len(measurements)} measurements files"
        )
    rows = [
        row(_read(r, "results"), _read(m, "measurements"))
        for r, m in zip(results, measurements, strict=True)
    ]
    frame = pd.DataFrame(rows, columns=list(COLUMNS[:-2]))
    frame = frame.sort_values(["run", "variant"], kind="stable").reset_index(drop=True)
    ref = frame[(frame["variant"] == REFERENCE) & (frame["status"] == "ok")].set_index("run")
    base_size = frame["run"].map(ref["size_bytes"])
    base_latency = frame["run"].map(ref["latency_ms_p50"])
    frame["size_ratio"] = (base_size / frame["size_bytes"]).astype("float64")
    frame["speedup"] = (base_latency / frame["latency_ms_p50"]).astype("float64")
    for name in (*TEXT_COLUMNS, "weight_file"):
        frame[name] = frame[name].astype("string")
    for name in ("threads", "size_bytes", "state_bytes", "peak_memory_bytes"):
        frame[name] = frame[name].astype("Int64")
    return frame


def stage(ctx) -> None:
    """Stage entry: write results/quantize/variants.parquet."""
    from campaign.train import write_parquet

    frame = variants_table(ctx.inputs["results"], ctx.inputs["measurements"])
    write_parquet(frame, ctx.outputs["table"])
