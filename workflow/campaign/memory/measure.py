"""Measured memory of a real training step: tensor bytes per component and process peaks.

The measurement (`measure_memory`) counts the same components as tensor bytes and records the
process peaks per phase (CUDA: max_memory_allocated / max_memory_reserved; CPU: peak RSS).

`LiveTensorBytes` follows every tensor the operators create and free inside it, op by op (a
torch dispatch mode), so `step_peak` and `eval_peak` give the peak bytes of what a training step
or an evaluation batch holds beyond the weights, for any architecture. These are exact tensor
bytes: on the CPU two identical runs give the same numbers (process and allocator peaks do not).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import resource
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode


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
    # A quantized weight (torchao subclass) counts the bytes of its inner tensors.
    from campaign.train import tensor_bytes

    return sum(tensor_bytes(t) for t in tensors)


# ------------------------------------------------------------------ live tensor bytes
class LiveTensorBytes(TorchDispatchMode):
    """The tensors created inside this context, alive op by op: an allocation ledger.

    Every operator call (forward, and backward: autograd runs its operators under the same mode)
    is seen; a storage an operator returns that none of its inputs holds is a new allocation
    (views and in-place results share an input's storage), and a weak reference on the storage
    records when it is freed. `peak(exclude)` replays the ledger without some allocations (the
    gradients that stay on the parameters). Tensors made before the context (weights, buffers,
    the batch) are never counted; neither are a kernel's internal workspaces nor the caching
    allocator's rounding, so this is the floor of what CUDA's max_memory_allocated reports.
    """

    def __init__(self) -> None:
        super().__init__()
        self._events: list[tuple[int, int]] = []  # (allocation id, +bytes or -bytes)
        self._by_ptr: dict[int, tuple[int, Any]] = {}  # address -> (allocation id, weakref)
        self._refs: dict[int, Any] = {}  # allocation id -> weakref (its callback logs the free)
        self._open = False

    def __enter__(self) -> LiveTensorBytes:
        self._open = True  # frees are logged from the first entry until close()
        return super().__enter__()

    def close(self) -> None:
        """Stop following frees (drops the weak references)."""
        self._open = False
        self._refs.clear()
        self._by_ptr.clear()

    def _freed(self, aid: int, ptr: int, nbytes: int, _ref: Any) -> None:
        if self._open:
            self._events.append((aid, -nbytes))
        entry = self._by_ptr.get(ptr)
        if entry is not None and entry[0] == aid:
            del self._by_ptr[ptr]
        self._refs.pop(aid, None)

    def _tracked(self, storage: Any) -> bool:
        entry = self._by_ptr.get(storage.data_ptr())
        return entry is not None and entry[1]() is storage

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from torch.utils._pytree import tree_leaves

        out = func(*args, **(kwargs or {}))
        inputs = {
            storage.data_ptr()
            for t in tree_leaves((args, kwargs))
            if (storage := _untyped_storage(t)) is not None
        }
        for t in tree_leaves(out):
            storage = _untyped_storage(t)
            if storage is None:
                continue
            ptr, nbytes = storage.data_ptr(), storage.nbytes()
            if not ptr or ptr in inputs or self._tracked(storage):
                continue
            aid = len(self._events)
            ref = weakref.ref(storage, functools.partial(self._freed, aid, ptr, nbytes))
            self._by_ptr[ptr] = (aid, ref)
            self._refs[aid] = ref
            self._events.append((aid, nbytes))
        return out

    def ids(self, tensors: Iterable[Any]) -> set[int]:
        """Allocation ids of the (still alive) storages behind `tensors`."""
        out = set()
        for t in tensors:
            storage = _untyped_storage(t)
            entry = None if storage is None else self._by_ptr.get(storage.data_ptr())
            if entry is not None and entry[1]() is storage:
                out.add(entry[0])
        return out

    def peak(self, exclude: Iterable[int] = ()) -> int:
        """The most bytes alive at once, leaving out the allocations `exclude`."""
        skip, live, peak = set(exclude), 0, 0
        for aid, delta in self._events:
            if aid not in skip:
                live += delta
                peak = max(peak, live)
        return peak

    @property
    def allocations(self) -> int:
        return sum(1 for _, delta in self._events if delta > 0)


def _untyped_storage(t: Any) -> Any:
    """The storage behind a dense tensor in memory; None for anything else (meta, sparse)."""
    import torch

    if not isinstance(t, torch.Tensor) or t.device.type == "meta":
        return None
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError):
        return None


@contextlib.contextmanager
def no_cycle_collection():
    """Frees in reference order only: a cyclic collection mid-measure would move them (and what
    the cycles held is then counted as alive until the end, the same on every run); it keeps
    the collector's pauses out of timed code too (campaign.quantize.stage)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def step_peak(
    model: Any,
    batch: dict[str, Any],
    loss_fn: Callable[[Any, dict[str, Any]], Any],
    autocast: Callable[[], contextlib.AbstractContextManager] | None = None,
) -> dict[str, int]:
    """Peak bytes one forward + backward holds beyond weights, batch and the final gradients.

    The loss is taken under `autocast()` and backward runs outside it, as in training. Returns
    {activations: the peak of every tensor but the parameters' gradients, gradients: the bytes
    of those, allocations: how many tensors were made}. The model runs in training mode (dropout
    on; a model loaded with from_pretrained starts in eval mode); its mode is restored and its
    .grad cleared after.
    """
    params = list(model.parameters())
    for p in params:
        p.grad = None
    was_training = model.training
    model.train()
    context = autocast() if autocast is not None else contextlib.nullcontext()
    with no_cycle_collection():
        live = LiveTensorBytes()
        with live:
            with context:
                loss = loss_fn(model, batch)
            loss.backward()
            del loss
        grads = [p.grad for p in params if p.grad is not None]
        out = {
            "activations": live.peak(exclude=live.ids(grads)),
            "gradients": _tensor_bytes(grads),
            "allocations": live.allocations,
        }
        live.close()
        del grads
    for p in params:
        p.grad = None
    model.train(was_training)
    return out


def eval_peak(
    model: Any,
    batch: dict[str, Any],
    score_fn: Callable[[Any, dict[str, Any]], Any],
    autocast: Callable[[], contextlib.AbstractContextManager] | None = None,
) -> int:
    """Peak bytes of scoring one batch without gradients (eval mode), beyond weights and batch."""
    import torch

    was_training = model.training
    model.eval()
    context = autocast() if autocast is not None else contextlib.nullcontext()
    try:
        with no_cycle_collection(), torch.no_grad():
            live = LiveTensorBytes()
            with live:
                with context:
                    result = score_fn(model, batch)
                del result
            peak = live.peak()
            live.close()
    finally:
        model.train(was_training)
    return peak


def parameter_bytes(model: Any) -> dict[str, int]:
    """Exact bytes of weights, gradients (trainable parameters) and AdamW state of a model.

    AdamW keeps exp_avg and exp_avg_sq in each trainable parameter's dtype and a 4-byte `step`
    per trainable tensor. Works on a model on the meta device (no memory is touched).
    """
    params = list(model.parameters())  # tied weights once
    trainable = [p for p in params if p.requires_grad]
    grads = _tensor_bytes(trainable)
    return {
        "n_params": sum(p.numel() for p in params),
        "n_trainable": sum(p.numel() for p in trainable),
        "tensors": len(params),
        "trainable_tensors": len(trainable),
        "weights": _tensor_bytes(params),
        "gradients": grads,
        "optimizer_state": 2 * grads + 4 * len(trainable),
    }


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


@contextlib.contextmanager
def track_peak(device: Any, out: dict, name: str):
    """The memory peak of the enclosed code under out[name]: on CUDA allocated and reserved
    (peak stats reset at entry), on the CPU the RSS high-water mark (reset at entry where the
    kernel allows; `peak_since` says which)."""
    import torch

    with _phase(torch.device(device), out, name):
        yield


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
    (SavedTensorBytes); activations_peak = the most bytes forward + backward held at once beyond
    weights, batch and final gradients (LiveTensorBytes). Process peaks per phase: on CUDA
    max_memory_allocated / _reserved (peak stats reset between phases), on the CPU the RSS
    high-water mark (reset per phase where the kernel allows). `loss_fn(model, batch)` defaults to
    `model(**batch).loss`; the estimate models the campaign's loss, `lambda m, b: train.loss_sum(m,
    b, task)`. `autocast()` returns the forward's autocast context. The model takes one real step:
    pass a throwaway.
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
    live = LiveTensorBytes()
    with no_cycle_collection():
        with live, _phase(device, phases, "forward"), saved, context:
            loss = loss_fn(model, batch) if loss_fn is not None else model(**batch).loss
        with live, _phase(device, phases, "backward"):
            loss.backward()
        del loss
    grads = [p.grad for p in params if p.grad is not None]
    gradients = _tensor_bytes(grads)
    activations_peak = live.peak(exclude=live.ids(grads))
    live.close()
    del grads
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
            "activations_peak": activations_peak,
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
