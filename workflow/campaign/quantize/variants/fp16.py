"""fp16: every weight cast to float16. CUDA only: CPU float16 matmuls are emulated (slow) and
not what a deployment would run."""

METHOD = "cast weights to torch.float16"
LIBRARY = "torch"
DEVICES = ("cuda",)
FORMAT = "safetensors"


def apply(model, ctx):
    import torch

    return model.to(device=ctx.device, dtype=torch.float16)
