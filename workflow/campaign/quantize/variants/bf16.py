"""bf16: every weight cast to bfloat16 (half the bytes); activations run in bfloat16 too."""

METHOD = "cast weights to torch.bfloat16"
LIBRARY = "torch"
DEVICES = ("cpu", "cuda")
FORMAT = "safetensors"


def apply(model, ctx):
    import torch

    return model.to(device=ctx.device, dtype=torch.bfloat16)
