"""Measured memory of a real training step: tensor bytes per component and process peaks.

The measurement (`measure_memory`) counts the same components as tensor bytes and records the
process peaks per phase (CUDA: max_memory_allocated / max_memory_reserved; CPU: peak RSS).
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Callable, Iterable
from typing import Any


# ------------------------------------------------------------------ measurement
class SavedTensorBytes:
    """Bytes of the distinct storages autograd saves for backward inside this context.

    Storages of `exclude` (parameters, buffers, the batch) are not counted: they exist anyway.
    Only sizes and addresses are kept; the hook never prolongs a tensor's life.
    """

    def __init__(self, exclude: Iterable[Any] = ()):
        self._skip = {_storage(t)[0] for t in exclude}
        self._seen: dict[int, int] = {}
        self._hooks: Any = None

    def __enter__(self) -> SavedTensorBytes:
        import torch

        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)

    def _pack(self, tensor: Any) -> Any:
        ptr, nbytes = _storage(tensor)
        if ptr and ptr not in self._skip:
            self._seen.setdefault(ptr, nbytes)
        return tensor

    @property
    def nbytes(self) -> int:
        return sum(self._seen.values())

    @property
    def count(self) -> int:
        return len(self._seen)


def _unpack(tensor: Any) -> Any:
    return tensor


def _storage(tensor: Any) -> tuple[int, int]:
    """(address, bytes) of the memory behind a tensor (a view reports its whole base)."""
    try:
        storage = tensor.untyped_storage()
        return storage.data_ptr(), storage.nbytes()
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less layouts
        return id(tensor), tensor.nbytes


def _tensor_bytes(tensors: Iterable[Any]) -> int:
    return sum(t.nbytes for t in tensors)


_CLEAR_REFS = "/proc/self/clear_refs"


def _reset_rss_peak() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS; False where unsupported."""
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _rss_peak() -> int:
    """Peak resident set size: VmHWM (since the last reset), else ru_maxrss (since start)."""
    with contextlib.suppress(OSError):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _rss() -> int:
    import psutil

    return psutil.Process(os.getpid()).memory_info().rss


@contextlib.contextmanager
def _phase(device: Any, out: dict, name: str):
    """Record the memory peak of the enclosed code under out[name]."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        reserved_before = torch.cuda.memory_reserved(device)
        yield
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device)
        out[name] = {
            "allocated_before": before,
            "allocated_after": torch.cuda.memory_allocated(device),
            "peak_allocated": peak,
            "peak_over_before": peak - before,
            "reserved_before": reserved_before,
            "peak_reserved": torch.cuda.max_memory_reserved(device),
        }
        return
    resettable = _reset_rss_peak()
    before = _rss()
    yield
    peak = _rss_peak()
    out[name] = {
        "rss_before": before,
        "rss_after": _rss(),
        "rss_peak": peak,
        "peak_over_before": peak - before,
        "peak_since": "phase start" if resettable else "process start",
    }


def measure_memory(
    model: Any,
    batch: dict[str, Any],
    optimizer_factory: Callable[[list[Any]], Any],
    device: Any,
    *,
    loss_fn: Callable[[Any, dict[str, Any]], Any] | None = None,
    autocast: Callable[[], contextlib.AbstractContextManager] | None = None,
) -> dict[str, Any]:
    """Measured bytes per component of one training step: forward, backward, optimizer.step().

    Tensor bytes: weights = parameter bytes as loaded; gradients = .grad bytes after backward;
    optimizer_state = state tensor bytes after one step (optimizer_factory is called with the
    trainable parameters); activations = distinct storages saved for backward during the forward
    (SavedTensorBytes). Process peaks per phase: on CUDA max_memory_allocated / _reserved (peak
    stats reset between phases), on the CPU the RSS high-water mark (reset per phase where the
    kernel allows). `loss_fn(model, batch)` defaults to `model(**batch).loss`; the estimate
    models the campaign's loss, `lambda m, b: train.loss_sum(m, b, task)`. `autocast()` returns
    the forward's autocast context. The model takes one real step: pass a throwaway.
    """
    import torch

    device = torch.device(device)
    model.to(device)
    model.train()
    batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    params = list(model.parameters())  # tied weights appear once
    for p in params:
        p.grad = None
    trainable = [p for p in params if p.requires_grad]
    buffers = list(model.buffers())
    inputs = [v for v in batch.values() if isinstance(v, torch.Tensor)]
    phases: dict[str, dict] = {}
    start = torch.cuda.memory_allocated(device) if device.type == "cuda" else _rss()

    saved = SavedTensorBytes(exclude=[*params, *buffers, *inputs])
    context = autocast() if autocast is not None else contextlib.nullcontext()
    with _phase(device, phases, "forward"), saved, context:
        loss = loss_fn(model, batch) if loss_fn is not None else model(**batch).loss
    with _phase(device, phases, "backward"):
        loss.backward()
    del loss
    gradients = _tensor_bytes(p.grad for p in params if p.grad is not None)
    optimizer = optimizer_factory(trainable)
    with _phase(device, phases, "optimizer_step"):
        optimizer.step()
    optimizer_state = _tensor_bytes(
        t for state in optimizer.state.values() for t in state.values() if torch.is_tensor(t)
    )
    optimizer.zero_grad(set_to_none=True)
    del optimizer

    key = "peak_allocated" if device.type == "cuda" else "rss_peak"
    peak: dict[str, Any] = {"kind": "cuda_allocated" if device.type == "cuda" else "cpu_rss"}
    peak["bytes"] = max(p[key] for p in phases.values())
    peak["over_start"] = peak["bytes"] - start
    if device.type == "cuda":
        peak["reserved"] = max(p["peak_reserved"] for p in phases.values())
    return {
        "device": str(device),
        "bytes": {
            "weights": _tensor_bytes(params),
            "buffers": _tensor_bytes(buffers),
            "gradients": gradients,
            "optimizer_state": optimizer_state,
            "activations": saved.nbytes,
        },
        "saved_tensors": saved.count,
        "start": start,
        "phases": phases,
        "peak": peak,
    }


def cache_tensor_bytes(cache: Any) -> int:
    """Bytes of the key/value tensors of a transformers cache (5.x Cache, or legacy tuples)."""
    import torch

    if cache is None:
        return 0
    if torch.is_tensor(cache):
        return cache.nbytes
    if isinstance(cache, list | tuple):
        return sum(cache_tensor_bytes(x) for x in cache)
    if hasattr(cache, "layers"):  # transformers >= 4.56: Cache.layers[i].keys / .values
        return sum(
            cache_tensor_bytes(getattr(layer, "keys", None))
            + cache_tensor_bytes(getattr(layer, "values", None))
            for layer in cache.layers
        )
    if hasattr(cache, "key_cache"):  # older DynamicCache
        return cache_tensor_bytes(cache.key_cache) + cache_tensor_bytes(cache.value_cache)
    if hasattr(cache, "self_attention_cache"):  # encoder-decoder
        return cache_tensor_bytes(cache.self_attention_cache) + cache_tensor_bytes(
            getattr(cache, "cross_attention_cache", None)
        )
    raise TypeError(f"unknown cache type {type(cache).__name__}")


def measure_kv_cache(model: Any, input_ids: Any, attention_mask: Any = None) -> int:
    """Bytes of the cache a causal LM builds for one forward over `input_ids` (batch, context)."""
    import torch

    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=True)
    cache = out.get("past_key_values")
    if cache is None:
        cache = out.get("cache")
    return cache_tensor_bytes(cache)
