"""int8_dynamic: torch's dynamic quantization. nn.Linear weights int8 (per tensor), activations
quantized per batch at run time; the CPU's fbgemm/x86 kernels. Deprecated in torch in favour of
torchao, and still the fastest int8 path on a CPU here (see benchmarks/bench_quant.py)."""

import warnings

METHOD = "torch.ao.quantization.quantize_dynamic({nn.Linear}, dtype=torch.qint8)"
LIBRARY = "torch"
DEVICES = ("cpu",)
FORMAT = "state_dict"


def apply(model, ctx):
    import torch

    from campaign.quantize.variants import linear_layers

    linear_layers(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the deprecation notice, on every call
        return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
