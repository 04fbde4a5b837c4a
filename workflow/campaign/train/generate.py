"""Batched greedy generation with the KV cache: the one engine every generative phase calls
(the train stage's validation/test outputs, the zero-shot floor, the quantized and KV-cache
variants, the preflight's save → reload → generate), so they compare like with like.

Prompts are grouped by length (sorted, then cut into batches of `batch_size`), so a batch pads
little; padding is on the left, so every sequence's next token sits in the last column and the
cache grows by one position per step for the whole batch. Positions are counted from each
sequence's first real token (the attention mask's cumulative sum), so a padded prompt is fed the
same positions as the same prompt alone: batched greedy outputs equal one-at-a-time ones.
A sequence stops at one of `eos_token_ids` or after `max_new_tokens`; a finished sequence is fed
the pad token (masked) until its batch is done, and the batch stops as soon as all are done.

What it costs is measured here too: wall seconds per call and per item (its batch's seconds over
the batch size), generated tokens per second, and the bytes the cache holds after the largest
batch, next to the analytic estimate (campaign.memory.kv_cache_bytes) for the same batch and
cached positions: the two agree for the full-precision cache, which is what the test checks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from campaign.core.errors import CampaignError
from campaign.memory import kv_cache_bytes
from campaign.quantize.measure import tensor_bytes


@dataclass(frozen=True)
class Generated:
    """What one `generate` call produced, per prompt in input order, and what it cost."""

    texts: list[str]  # the new tokens decoded, special tokens skipped
    new_tokens: list[list[int]]  # the generated ids (EOS excluded)
    stopped_at_eos: list[bool]
    seconds: float  # wall seconds of the whole call
    item_seconds: list[float]  # its batch's wall seconds / batch size
    tokens_per_s: float  # generated tokens (all prompts) / seconds
    kv_cache_bytes: int  # measured after the largest batch (batch x cached positions)
    kv_cache_estimate: int  # analytic, same batch and positions (config and dtype)


def cache_bytes(cache) -> int:
    """Bytes of every tensor a transformers cache holds, layer by layer: keys and values of a
    DynamicCache; for a QuantizedCache the quantized keys/values (with their scales) plus the
    residual full-precision tokens not yet quantized."""
    if cache is None:
        return 0
    total = 0
    for layer in cache.layers:
        for value in vars(layer).values():
            if torch.is_tensor(value):
                total += tensor_bytes(value)
    return total


def head_dim(config) -> int:
    """Per-head width: the config's own `head_dim` where it declares one (Llama, Qwen), else
    hidden size / attention heads (GPT-2, BERT)."""
    declared = getattr(config, "head_dim", None)
    return int(declared) if declared else config.hidden_size // config.num_attention_heads


def cache_estimate(config, positions: int, batch: int = 1, dtype_bytes: int = 4) -> int:
    """The calculator's bytes for `positions` cached positions of `batch` sequences."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    return kv_cache_bytes(
        config.num_hidden_layers, kv_heads, head_dim(config), positions, batch, dtype_bytes
    )


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices of the prompts cut into batches of at most `batch_size`, shortest prompts first
    (a stable sort: equal lengths keep input order), so each batch pads as little as it can."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _left_pad(rows: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
        mask[i, width - len(row) :] = 1
    return ids.to(device), mask.to(device)


@dataclass
class _BatchOut:
    tokens: list[list[int]]
    eos: list[bool]
    cache: object
    positions: int  # cached positions per sequence when the batch ended


def _greedy_batch(model, rows, *, max_new_tokens, pad_id, eos_ids, cache) -> _BatchOut:
    """Greedy decoding of one left-padded batch; the cache is filled in place."""
    device = next(model.parameters()).device
    ids, mask = _left_pad(rows, pad_id, device)
    eos = torch.tensor(sorted(eos_ids), device=device)
    done = torch.zeros(len(rows), dtype=torch.bool, device=device)
    tokens: list[list[int]] = [[] for _ in rows]
    stopped = [False] * len(rows)
    step_ids = ids
    for _ in range(max_new_tokens):
        # Positions from each sequence's first real token: padding shifts nothing.
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, -step_ids.shape[1] :]
        out = model(
            input_ids=step_ids,
            attention_mask=mask,
            position_ids=positions,
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        nxt = out.logits[:, -1, :].argmax(dim=-1)
        hit = torch.isin(nxt, eos) & ~done
        for i in torch.nonzero(~done & ~hit).flatten().tolist():
            tokens[i].append(int(nxt[i]))
        for i in torch.nonzero(hit).flatten().tolist():
            stopped[i] = True
        done = done | hit
        if bool(done.all()):
            break
        nxt = torch.where(done, torch.full_like(nxt, pad_id), nxt)
        step_ids = nxt[:, None]
        # A finished row keeps attending (HF generate does the same); its tokens are dropped.
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
    return _BatchOut(tokens, stopped, cache, int(cache.get_seq_length()))


def _dtype_bytes(model) -> int:
    return torch.empty((), dtype=next(model.parameters()).dtype).element_size()


def generate(
    model,
    tokenizer,
    prompt_ids: list[list[int]],
    *,
    max_new_tokens: int,
    batch_size: int,
    eos_token_ids: list[int],
    cache_factory: Callable[[object], object] | None = None,
) -> Generated:
    """Greedy continuations of `prompt_ids` (already formatted and tokenized), in input order.

    cache_factory: `config -> Cache` for each batch (a KV-cache variant's quantized cache);
    None gives transformers' DynamicCache in the model's dtype.
    """
    if batch_size < 1 or max_new_tokens < 1:
        raise CampaignError(
            f"generation: batch_size and max_new_tokens must be >= 1 "
            f"(got {batch_size} and {max_new_tokens})"
        )
    if not eos_token_ids:
        raise CampaignError("generation: no EOS token id given (the tokenizer declares none?)")
    for i, row in enumerate(prompt_ids):
        if not row:
            raise CampaignError(f"generation: prompt {i} is empty (no token to start from)")
    pad_id = tokenizer.pad_token_id
    pad_id = int(eos_token_ids[0] if pad_id is None else pad_id)
    make_cache = cache_factory or (lambda config: _dynamic_cache(config))
    n = len(prompt_ids)
    tokens: list[list[int]] = [[] for _ in range(n)]
    eos = [False] * n
    item_seconds = [0.0] * n
    largest = (-1, 0, 0)  # (batch x positions, measured bytes, estimated bytes)
    dtype_bytes = _dtype_bytes(model)
    was_training = model.training
    model.eval()  # dropout off: greedy outputs are a function of the weights alone
    start = time.perf_counter()
    with torch.inference_mode():
        for batch in length_batches([len(p) for p in prompt_ids], batch_size):
            t0 = time.perf_counter()
            out = _greedy_batch(
                model,
                [list(prompt_ids[i]) for i in batch],
                max_new_tokens=max_new_tokens,
                pad_id=pad_id,
                eos_ids=eos_token_ids,
                cache=make_cache(model.config),
            )
            took = time.perf_counter() - t0
            for j, i in enumerate(batch):
                tokens[i], eos[i] = out.tokens[j], out.eos[j]
                item_seconds[i] = took / len(batch)
            size = len(batch) * out.positions
            if size > largest[0]:
                estimate = cache_estimate(model.config, out.positions, len(batch), dtype_bytes)
                largest = (size, cache_bytes(out.cache), estimate)
    seconds = time.perf_counter() - start
    model.train(was_training)
    texts = [tokenizer.decode(t, skip_special_tokens=True) for t in tokens]
    total = sum(len(t) for t in tokens)
    return Generated(
        texts=texts,
        new_tokens=tokens,
        stopped_at_eos=eos,
        seconds=seconds,
        item_seconds=item_seconds,
        tokens_per_s=total / seconds if seconds > 0 else 0.0,
        kv_cache_bytes=max(largest[1], 0),
        kv_cache_estimate=max(largest[2], 0),
    )


def _dynamic_cache(config):
    from transformers import DynamicCache

    return DynamicCache(config=config)
