"""Hand-sized memory estimates for the fit-table and lever tests, whose answers are arithmetic
in GiB: the same estimate built once, each test changing only what it tests."""

from __future__ import annotations

from campaign import memory

GIB = 2**30


def toy(grad_accum: int | None = None, source: str | None = None, **fields) -> dict:
    """An estimate (MemoryEstimate.to_dict) of 1 GiB weights, 1 GiB gradients, 2 GiB AdamW state
    and 0.5 GiB activations per example at micro_batch 4, no KV cache: a 6 GiB training step.
    fields: other MemoryEstimate fields (a cache: kv_cache, kv_cache_per_example, kv_batch...);
    grad_accum and source: the settings and the source a fit table's levers read."""
    est = memory.MemoryEstimate(
        **{
            "weights": GIB,
            "gradients": GIB,
            "optimizer_state": 2 * GIB,
            "activations": 2 * GIB,
            "kv_cache": 0,
            "activations_per_example": GIB // 2,
            "kv_cache_per_example": 0,
            "micro_batch": 4,
            **fields,
        }
    ).to_dict()
    if grad_accum is not None:
        est["settings"] = {"grad_accum": grad_accum}
    if source is not None:
        est["source"] = source
    return est
