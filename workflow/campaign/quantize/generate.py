"""Generation from a prompt for a causal LM variant, and the bytes of its KV cache measured
against the calculator the preflight uses (campaign.memory.kv_cache_bytes).

Prompts are the first `quantization.generation.prompts` validation texts in the run's prompt
format (text + separator), one at a time (no padding), greedy, `max_new_tokens` each: the same
prompts for every variant of a run, so their continuations can be compared token by token.
"""

from __future__ import annotations

import torch

from campaign.memory import kv_cache_bytes
from campaign.quantize.measure import tensor_bytes


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


def cache_estimate(config, tokens: int, dtype_bytes: int = 4) -> int:
    """The calculator's bytes for `tokens` cached positions of one sequence (fp32 by default)."""
    layers = config.num_hidden_layers
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = config.hidden_size // heads
    return kv_cache_bytes(layers, kv_heads, head_dim, tokens, 1, dtype_bytes)


def generate(model, saved, split, prompts: int, max_new_tokens: int, device, cache=None) -> list:
    """One row per prompt: its id, the generated token ids and text, and the cache's bytes
    (measured, and the fp32 calculator's for the same number of cached positions).

    cache: a quantized cache's `cache_config` (a KV-cache variant), or None (the default cache).
    """
    tok = saved.tokenizer
    text_ids = saved.fmt.text_ids(tok, split.texts[:prompts])
    rows = []
    for rid, ids in zip(split.ids[:prompts], text_ids, strict=True):
        prompt = (ids + saved.fmt.sep_ids)[-saved.fmt.prompt_budget :]
        input_ids = torch.tensor([prompt], device=device)
        kwargs = {}
        if cache is not None:
            kwargs = {"cache_implementation": "quantized", "cache_config": dict(cache)}
        out = model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            return_dict_in_generate=True,
            **kwargs,
        )
        tokens = out.sequences[0, len(prompt) :].tolist()
        past = getattr(out, "past_key_values", None)
        cached = int(past.get_seq_length()) if past is not None else 0
        rows.append(
            {
                "id": rid,
                "prompt_tokens": len(prompt),
                "tokens": tokens,
                "text": tok.decode(tokens, skip_special_tokens=True),
                "cache_positions": cached,
                "cache_bytes": cache_bytes(past),
                "cache_bytes_fp32_calculated": cache_estimate(model.config, cached),
            }
        )
    return rows
