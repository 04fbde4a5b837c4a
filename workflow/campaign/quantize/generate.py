"""Generation from a prompt for a causal LM variant, and the bytes of its KV cache measured
against the calculator the preflight uses (campaign.memory.kv_cache_bytes).

Prompts are the first `quantization.generation.prompts` validation texts in the run's prompt
format (text + separator), one at a time (no padding), greedy, `max_new_tokens` each: the same
prompts for every variant of a run, so their continuations can be compared token by token.
"""

from __future__ import annotations

import torch

# The cache's measured bytes and the calculator's estimate: one definition, the engine's.
from campaign.train.generate import cache_bytes, cache_estimate


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


def judged_generation(
    model,
    tokenizer,
    prompt_ids: list[list[int]],
    references: list[str],
    variant,
    *,
    metric: str,
    max_new_tokens: int,
    batch_size: int,
    eos_token_ids: list[int],
):
    """A variant of a generative run judged on what it generates: its per-item outputs and
    scores (`metric` against the references, the same items for every variant) and what the
    generation cost (tokens/s, seconds per item, KV cache bytes measured next to the estimate).

    Returns (frame with columns prediction, new_tokens, stopped_at_eos, score; the measurements
    dict the variant's measurements.json holds under "generation")."""
    import pandas as pd

    from campaign.evaluate.text_scores import score_items
    from campaign.train.generate import generate as run_engine

    out = run_engine(
        model,
        tokenizer,
        prompt_ids,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        eos_token_ids=eos_token_ids,
        cache_factory=variant.cache_factory(),
    )
    frame = pd.DataFrame(
        {
            "prediction": pd.Series(out.texts, dtype="string"),
            "new_tokens": [len(t) for t in out.new_tokens],
            "stopped_at_eos": out.stopped_at_eos,
            "score": score_items(metric, out.texts, references),
        }
    )
    measured = {
        "batch_size": batch_size,
        "seconds": out.seconds,
        "tokens_per_s": out.tokens_per_s,
        "seconds_per_item": out.seconds / len(prompt_ids) if prompt_ids else None,
        "kv_cache_bytes": out.kv_cache_bytes,
        "kv_cache_estimate": out.kv_cache_estimate,
        "kv_cache": variant.kind,
    }
    return frame, measured
