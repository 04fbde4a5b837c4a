"""Bytes of tensors and of a generation cache: what a tensor really holds (a quantized subclass by
its inner tensors), and the analytic size of a KV cache. Shared by the phases that measure memory
(train's generation engine, quantize, memory) without importing one another; torch is imported
inside.
"""

from __future__ import annotations


# ------------------------------------------------------------------ KV cache
def kv_cache_bytes(
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    context_len: int,
    batch: int,
    dtype_bytes: int,
) -> int:
    """Bytes of a generation cache: 2 (K, V) x layers x kv_heads x head_dim x context x batch x B.

    Grouped-query attention stores num_key_value_heads < num_attention_heads heads, hence its use.
    """
    return 2 * num_layers * num_kv_heads * head_dim * context_len * batch * dtype_bytes


def tensor_bytes(t) -> int:
    """Bytes a tensor holds: its elements, or for a quantized tensor subclass (torchao, quanto)
    the bytes of the inner tensors it is made of (int data, scales, zero points)."""
    import torch

    if t is None:
        return 0
    if hasattr(t, "__tensor_flatten__") and type(t) is not torch.nn.Parameter:
        inner, _ = t.__tensor_flatten__()
        if inner:
            return sum(tensor_bytes(getattr(t, name)) for name in inner)
    if getattr(t, "is_quantized", False):  # torch's own quantized tensors (qint8)
        n = t.numel() * t.element_size()
        if t.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
            n += t.q_per_channel_scales().nbytes + t.q_per_channel_zero_points().nbytes
        return n
    return t.numel() * t.element_size()
