"""kv_int2: fp32 weights, and a generation cache quantized to 2 bits by optimum-quanto
(transformers' QuantizedCache). Causal LM runs only."""

METHOD = "fp32 weights; transformers QuantizedCache(backend=quanto, nbits=2, q_group_size=16)"
LIBRARY = "optimum-quanto"
DEVICES = ("cpu", "cuda")
FORMAT = "safetensors"
NEEDS = ("kv_cache",)  # a model that decodes through a KV cache
CACHE = {"backend": "quanto", "nbits": 2, "q_group_size": 16, "residual_length": 4}


def apply(model, ctx):
    return model.to(ctx.device)
