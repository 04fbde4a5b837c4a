"""Generation from a prompt for a causal LM variant, and the bytes of its KV cache measured
against the calculator the preflight uses (campaign.memory.kv_cache_bytes).

Prompts are the first `quantization.generation.prompts` validation texts in the run's prompt
format (text + separator), one at a time (no padding), greedy, `max_new_tokens` each: the same
prompts for every variant of a run, so their continuations can be compared token by token.
"""

from __future__ import annotations

import torch

# The cache's measured bytes and the calculator's estimate: one definition, the engine's.
from campaign.train import cache_bytes, cache_estimate


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
    variant,
    *,
    max_new_tokens: int,
    batch_size: int,
    eos_token_ids: list[int],
):
    """A variant of a generative run judged on what it generates: its per-item outputs (the
    evaluation scores them against the references, the same items for every variant) and what
    the generation cost (tokens/s, seconds per item, KV cache bytes measured next to the
    estimate).

    Returns (frame with columns prediction, new_tokens, stopped_at_eos; the measurements dict
    the variant's measurements.json holds under "generation")."""
    import pandas as pd

    from campaign.train import generate as run_engine

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


def generation_variant(spec: dict, inputs: dict, ctx, variant, root) -> tuple:
    """A generation run's variant, judged on what it generates (the stage body for a task
    whose runs generate): the variant applied to the run's model generates on every
    validation and test prompt with the run's template and settings (the evaluation scores
    each output by the runs' metric). Returns ({split: predictions frame with the run's
    columns}, the model, result fields, measurements fields): result holds the agreement with
    the run's own outputs and the KV cache bytes measured beside the
    analytic estimate; measurements the tokens/s and seconds per item (volatile). ctx: the
    stage's Context (device, the saved run; calibration batches are added here)."""
    import numpy as np
    import pandas as pd

    from campaign.tasks.generation import chat as gen

    saved, device = ctx.saved, ctx.device
    tok = saved.tokenizer
    run = gen.setup(spec["model"], tok, root)
    if variant.calibration:
        ctx.calibration = calibration_batches(spec, inputs, tok, run.template, device)
    model = variant.apply(saved.load(), ctx)
    model.eval()
    frames, result, measured = {}, {"agreement": {}}, {}
    for split in ("validation", "test"):
        talks = gen.read_conversations(inputs[split], split)
        refs = [gen.reference(m) for m in talks.messages]
        frame, cost = judged_generation(
            model,
            tok,
            [gen.prompt_ids(tok, run.template, m, run.escape) for m in talks.messages],
            variant,
            max_new_tokens=run.max_new_tokens,
            batch_size=run.batch_size,
            eos_token_ids=gen.eos_token_ids(tok, model),
        )
        frame.insert(0, "id", pd.array(talks.ids, dtype="str"))
        frame.insert(1, "reference", pd.array(refs, dtype="str"))
        frames[split] = frame[list(gen.PREDICTION_COLUMNS)]
        own = pd.read_parquet(inputs[f"predictions_{split}"][0])
        same = own.set_index(own["id"].astype(str))["prediction"].reindex(talks.ids)
        agree = float(np.mean(same.astype(str).to_numpy() == frame["prediction"].to_numpy()))
        result["agreement"][split] = {"rate": agree, "items": len(frame)}
        measured[split] = cost
    test = measured["test"]
    # The cache's bytes are the same on every run of the job (shapes and dtypes): the result.
    result["kv_cache"] = {
        "kind": variant.kind,
        "batch_size": run.batch_size,
        "bytes": test["kv_cache_bytes"],
        "estimate_fp32": test["kv_cache_estimate"],
    }
    timing = {
        "latency_ms_p50": 1000 * test["seconds_per_item"] if test["seconds_per_item"] else None,
        "latency_ms_p95": None,
        "throughput": len(frames["test"]) / test["seconds"] if test["seconds"] else None,
        "tokens_per_s": test["tokens_per_s"],
        "what": "greedy generation of every test item, batched (items/s; ms per item)",
    }
    return frames, model, result, {"timing": timing, "generation": measured}


def calibration_batches(spec: dict, inputs: dict, tok, template: str, device) -> list[dict]:
    """quantization.calibration's sample of the train split's conversations (never evaluation
    data), formatted as training formats them, in batches of the run's micro-batch."""
    import numpy as np

    from campaign.core.defaults import special_tokens_policy
    from campaign.tasks.generation import chat as gen
    from campaign.train import collate

    train = gen.read_conversations(inputs["train"], "train")
    cal = spec["calibration"]
    rng = np.random.default_rng(cal["seed"])
    picked = np.sort(rng.choice(len(train), size=min(cal["size"], len(train)), replace=False))
    escape = special_tokens_policy(spec.get("model") or {}) == "escape"
    examples = [
        gen.encode(tok, template, train.messages[i], spec["max_length"], escape) for i in picked
    ]
    rows = [{"input_ids": e.input_ids, "labels": e.labels} for e in examples]
    out = []
    for j in range(0, len(rows), spec["batch_size"]):
        batch = collate(rows[j : j + spec["batch_size"]], tok.pad_token_id)
        out.append({k: batch[k].to(device) for k in ("input_ids", "attention_mask")})
    return out


def judged_variant(job) -> tuple:
    """A generation run's variant in a quantize job (campaign.quantize's Job): it generates every
    validation and test answer under the variant's inference context, its memory peak tracked
    while it does; returns (frames, model, result fields, measurements fields). No score here:
    the evaluation scores what the variant generated (chat.PREDICTION_COLUMNS)."""
    from campaign.memory import track_peak

    torch.manual_seed(0)
    with job.inference(), track_peak(job.ctx.device, memory := {}, "generate"):
        frames, model, fields, measured = generation_variant(
            job.spec, job.inputs, job.ctx, job.variant, job.root
        )
    fields["accuracy"] = None
    measured.update(
        device=job.ctx.device.type,
        memory=memory["generate"],
        peak_memory_bytes=job.peak_bytes(memory["generate"]),
    )
    return frames, model, fields, measured
