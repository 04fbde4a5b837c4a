"""What a variant costs: bytes on disk, bytes of its tensors, latency and throughput on fixed
batches of held-out items, and the agreement of its predictions with the reference's.

Latency: `warmup_batches` forwards first (kernels chosen, caches warm), then `repeats` timed
passes over the same batches; each pass gives p50 and p95 of its per-batch latencies and its
throughput (examples per second), and the reported value is the median over the passes, so one
disturbed pass does not move it. On CUDA every batch is synchronized before its clock stops.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from campaign.core.errors import CampaignError
from campaign.core.tensors import tensor_bytes  # noqa: F401 (its public home here)


def state_bytes(model) -> int:
    """Bytes of every tensor in the model's state dict (weights as the variant keeps them)."""
    total = 0
    for value in model.state_dict().values():
        if torch.is_tensor(value):
            total += tensor_bytes(value)
        elif isinstance(value, tuple):  # torch dynamic quantization's (packed weight, bias)
            total += sum(tensor_bytes(v) for v in value if torch.is_tensor(v))
    return total


def file_sizes(folder: Path, names: Sequence[str]) -> dict[str, int]:
    return {name: (Path(folder) / name).stat().st_size for name in names}


def inference_context(kind: str):
    """torch.no_grad (default) or torch.inference_mode, as the variant declares."""
    return torch.inference_mode() if kind == "inference_mode" else torch.no_grad()


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def time_batches(
    forward,
    batches: Sequence[dict],
    device,
    warmup_batches: int,
    repeats: int,
) -> dict:
    """Latency (ms) per batch p50/p95 and throughput (examples/s): medians over `repeats` timed
    passes over `batches`, after `warmup_batches` untimed forwards. forward(batch) runs one.
    """
    if not batches:
        raise CampaignError("quantization.timing: no held-out items to time (empty splits)")
    for i in range(warmup_batches):
        forward(batches[i % len(batches)])
    _sync(device)
    passes = []
    for _ in range(repeats):
        seconds = []
        for batch in batches:
            t0 = time.perf_counter()
            forward(batch)
            _sync(device)
            seconds.append(time.perf_counter() - t0)
        ms = np.array(seconds) * 1e3
        examples = sum(int(b["input_ids"].shape[0]) for b in batches)
        passes.append(
            {
                "latency_ms_p50": float(np.percentile(ms, 50)),
                "latency_ms_p95": float(np.percentile(ms, 95)),
                "throughput": examples / float(np.sum(seconds)),
            }
        )
    return {
        "latency_ms_p50": float(np.median([p["latency_ms_p50"] for p in passes])),
        "latency_ms_p95": float(np.median([p["latency_ms_p95"] for p in passes])),
        "throughput": float(np.median([p["throughput"] for p in passes])),
        "passes": passes,
        "batches": len(batches),
        "batch_shapes": sorted({tuple(b["input_ids"].shape) for b in batches}),
    }


def agreement(variant_frame, reference_frame, where: str) -> dict:
    """Share of items whose predicted label equals the reference's, aligned by id, and the
    largest absolute difference of a class probability.

    Both frames must hold the same ids (the same held-out items); anything else is an error.
    """
    if len(variant_frame) == 0:
        return {"items": 0, "agree": 0, "rate": None, "max_abs_score_diff": None}
    ref = reference_frame.set_index("id")
    ours = variant_frame.set_index("id")
    if set(ref.index) != set(ours.index):
        missing = sorted(set(ours.index) ^ set(ref.index))[:3]
        raise CampaignError(
            f"input '{where}': the reference predictions are not on the same items "
            f"(e.g. id {', '.join(map(str, missing))})"
        )
    ref = ref.loc[ours.index]
    same = (ours["prediction"] == ref["prediction"]).to_numpy()
    scores = [c for c in ours.columns if c.startswith("score_")]
    if scores != [c for c in ref.columns if c.startswith("score_")]:
        raise CampaignError(f"input '{where}': the reference has other label columns")
    diff = np.abs(ours[scores].to_numpy() - ref[scores].to_numpy())
    return {
        "items": int(len(same)),
        "agree": int(same.sum()),
        "rate": float(same.mean()),
        "max_abs_score_diff": float(diff.max()) if diff.size else 0.0,
    }


def accuracy(frame) -> float | None:
    if len(frame) == 0:
        return None
    return float((frame["prediction"] == frame["label"]).mean())
