"""kv_corrupt: a canary, not a compression. fp32 weights and a generation cache that returns
every stored value vector reversed and negated (keys intact), as a bad quantizer or an indexing
bug would. Add it to quantization.variants to see the campaign reject a variant on what it
generates: its generated scores fall, and the non-inferiority test against its run says so.
Generation runs only: label scoring reads no cache, so a broken one could not show there."""

METHOD = "fp32 weights; a DynamicCache returning each stored value vector reversed and negated"
LIBRARY = "torch"
DEVICES = ("cpu", "cuda")
FORMAT = "safetensors"
NEEDS = ("judged_on_generation",)  # scored on what it generates
NEEDS_NOTE = "label scoring reads no KV cache, so a broken cache cannot show there"
# Built to be rejected: never adopted, kept or priced; a canary the scores do not catch is a
# finding (the metric cannot tell a broken model from a working one).
CANARY = True


def apply(model, ctx):
    return model.to(ctx.device)


def make_cache(config):
    """The broken cache for one generate call (campaign.train.engine's cache_factory)."""
    from transformers import DynamicCache

    class CorruptValues(DynamicCache):
        def update(self, key_states, value_states, layer_idx, *args, **kwargs):
            return super().update(key_states, -value_states.flip(-1), layer_idx, *args, **kwargs)

    return CorruptValues(config=config)
