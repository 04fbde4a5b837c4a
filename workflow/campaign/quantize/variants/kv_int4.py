"""kv_int4: fp32 weights, and a generation cache quantized to 4 bits by optimum-quanto
(transformers' QuantizedCache; the newest tokens stay in full precision until a group fills).
Causal LM runs only: a classifier generates nothing."""

METHOD = "fp32 weights; transformers QuantizedCache(backend=quanto, nbits=4, q_group_size=16)"
LIBRARY = "optimum-quanto"
DEVICES = ("cpu", "cuda")
FORMAT = "safetensors"
NEEDS = ("kv_cache",)  # a model that decodes through a KV cache
CACHE = {"backend": "quanto", "nbits": 4, "q_group_size": 16, "residual_length": 4}


def apply(model, ctx):
    return model.to(ctx.device)
