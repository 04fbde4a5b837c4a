"""fp32: the reference. The trained model as it is, scored by the quantize phase's code on the
same items as every other variant."""

METHOD = "none: the trained fp32 weights"
LIBRARY = "torch"
DEVICES = ("cpu", "cuda")
FORMAT = "safetensors"


def apply(model, ctx):
    return model.to(ctx.device)
