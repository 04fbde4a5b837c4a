"""KV-cache variants judged on what they generate: each variant's cache goes through the shared
engine (campaign.train.engine) on the same prompts, and its per-item scores against the
full-precision model's outputs show a broken cache for what it is."""

from __future__ import annotations

import dataclasses
import random
import types

import pytest
from genkit import WORDS, tiny_llama, tiny_tokenizer
from transformers import DynamicCache

from campaign.quantize.variant import get_variant, placement
from campaign.tasks.generation.quantized import judged_generation
from campaign.tasks.generation.text_scores import score_items
from campaign.train.engine import generate


class CorruptValues(DynamicCache):
    """A deliberately broken cache: every value vector it stores comes back reversed and
    negated (keys intact), as a bad quantizer or an indexing bug would return them."""

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        return super().update(key_states, -value_states.flip(-1), layer_idx, *args, **kwargs)


def broken_variant():
    """A registry-shaped variant whose module defines make_cache: the corrupt cache above."""
    module = types.SimpleNamespace(make_cache=lambda config: CorruptValues(config=config))
    return dataclasses.replace(get_variant("fp32"), name="kv_broken", module=module)


@pytest.fixture(scope="module")
def setup():
    rng = random.Random(0)
    prompts = [
        [4 + rng.randrange(len(WORDS)) for _ in range(rng.randrange(3, 12))] for _ in range(32)
    ]
    model, tok = tiny_llama(), tiny_tokenizer()
    settings = {"max_new_tokens": 8, "batch_size": 8, "eos_token_ids": [2]}
    # The references: what the full-precision model generates (a variant is judged on keeping it).
    reference = generate(model, tok, prompts, **settings)
    return model, tok, prompts, settings, reference.texts


def test_a_cache_that_corrupts_values_is_caught_by_the_generated_scores(setup):
    model, tok, prompts, settings, refs = setup
    int4 = get_variant("kv_int4")
    assert placement(int4, "cpu", "generation") == ("cpu", None)
    judged = {
        v.name: judged_generation(model, tok, prompts, v, **settings)
        for v in (get_variant("fp32"), int4, broken_variant())
    }
    mean = {
        name: score_items("exact_match", list(frame["prediction"]), refs).mean()
        for name, (frame, _) in judged.items()
    }
    # The full-precision cache reproduces itself; 4-bit keeps most answers on this tiny random
    # model; the corrupt cache loses nearly all of them: the drop a decision on these scores sees.
    assert mean["fp32"] == 1.0
    assert mean["kv_int4"] >= 0.5
    assert mean["kv_broken"] <= 0.2
    assert mean["kv_int4"] - mean["kv_broken"] >= 0.4
    fp32, q4, bad = (judged[n][1] for n in ("fp32", "kv_int4", "kv_broken"))
    # What each cost: the full-precision cache is as large as the calculator says; the quantized
    # one is smaller for the same batch and positions.
    assert fp32["kv_cache_bytes"] == fp32["kv_cache_estimate"] > 0
    assert 0 < q4["kv_cache_bytes"] < q4["kv_cache_estimate"] == fp32["kv_cache_estimate"]
    assert q4["kv_cache"] == "kv_cache" and fp32["kv_cache"] == "weights"
    assert bad["tokens_per_s"] > 0 and len(judged["kv_broken"][0]) == len(prompts)


def test_variant_cache_factories():
    assert get_variant("fp32").cache_factory() is None  # the engine's default cache
    config = tiny_llama().config
    cache = get_variant("kv_int2").cache_factory()(config)
    assert type(cache).__name__ == "QuantizedCache"
    assert cache.layers[0].nbits == 2
