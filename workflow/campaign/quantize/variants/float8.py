"""float8: torchao float8 (e4m3) weights and activations, scaled per row, dynamic; needs a CUDA
card with float8 tensor cores (compute capability 8.9 or newer: L4, H100, H200). Linear layers
whose shapes the float8 matmul cannot take (dimensions not multiples of 16) stay in bfloat16."""

METHOD = "torchao quantize_(Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()))"
LIBRARY = "torchao"
DEVICES = ("cuda",)
FORMAT = "state_dict"


def _fits(module, fqn: str) -> bool:
    import torch

    return (
        isinstance(module, torch.nn.Linear)
        and module.in_features % 16 == 0
        and module.out_features % 16 == 0
    )


def apply(model, ctx):
    import torch
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_

    from campaign.core.errors import CampaignError
    from campaign.quantize.variants import linear_layers

    if torch.cuda.get_device_capability(ctx.device) < (8, 9):
        name = torch.cuda.get_device_name(ctx.device)
        raise CampaignError(f"float8 needs compute capability 8.9 or newer; {name} has less")
    linear_layers(model)
    model = model.to(device=ctx.device, dtype=torch.bfloat16)
    quantize_(model, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()), _fits)
    return model
