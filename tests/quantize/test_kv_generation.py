"""KV-cache variants judged on what they generate: each variant's cache goes through the shared
engine (campaign.train.generate) on the same prompts, and its per-item scores against the
full-precision model's outputs show a broken cache for what it is."""

from __future__ import annotations

import random

import pytest
from genkit import WORDS, tiny_llama, tiny_tokenizer
from transformers import DynamicCache

from campaign.evaluate.text_scores import score_items
from campaign.quantize.variant import get_variant, placement
from campaign.train.generate import generate


class CorruptValues(DynamicCache):
    """A deliberately broken cache: every value vector it stores comes back reversed and
    negated (keys intact), as a bad quantizer or an indexing bug would return them."""

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        return super().update(key_states, -value_states.flip(-1), layer_idx, *args, **kwargs)


@pytest.fixture(scope="module")
def setup():
    rng = random.Random(0)
    prompts = [
        [4 + rng.randrange(len(WORDS)) for _ in range(rng.randrange(3, 12))] for _ in range(32)
    ]
    model, tok = tiny_llama(), tiny_tokenizer()
    settings = {"max_new_tokens": 8, "batch_size": 8, "eos_token_ids": [2]}
    reference = generate(model, tok, prompts, **settings)
    return model, tok, prompts, settings, reference


def test_a_cache_that_corrupts_values_is_caught_by_the_generated_scores(setup):
    model, tok, prompts, settings, reference = setup
    broken = generate(
        model, tok, prompts, cache_factory=lambda c: CorruptValues(config=c), **settings
    )
    int4 = get_variant("kv_int4")
    assert placement(int4, "cpu", "generation") == ("cpu", None)
    quantized = generate(model, tok, prompts, cache_factory=int4.cache_factory(), **settings)

    def score(out):
        return score_items("exact_match", out.texts, reference.texts)

    # The full-precision cache reproduces itself; 4-bit keeps most answers on this tiny random
    # model; the corrupt cache loses nearly all of them: the drop a decision on these scores sees.
    assert score(reference).mean() == 1.0
    assert score(quantized).mean() >= 0.5
    assert score(broken).mean() <= 0.2
    assert score(quantized).mean() - score(broken).mean() >= 0.4
    # The quantized cache is smaller than the full-precision one it replaces, for the same batch.
    assert 0 < quantized.kv_cache_bytes < reference.kv_cache_bytes
    assert broken.kv_cache_bytes == broken.kv_cache_estimate == reference.kv_cache_estimate


def test_variant_cache_factories():
    assert get_variant("fp32").cache_factory() is None  # the engine's default cache
    config = tiny_llama().config
    cache = get_variant("kv_int2").cache_factory()(config)
    assert type(cache).__name__ == "QuantizedCache"
    assert cache.layers[0].nbits == 2
