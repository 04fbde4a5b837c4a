"""int4_weight_only: torchao int4 weights in groups of 32 along the input (bfloat16 scales and
zero points), bfloat16 activations; its kernels (tinygemm) are CUDA only. Linear layers whose
shapes the packing cannot hold (a 3-class head) stay in bfloat16."""

METHOD = "torchao quantize_(Int4WeightOnlyConfig(group_size=32)) on bfloat16 nn.Linear"
LIBRARY = "torchao"
DEVICES = ("cuda",)
FORMAT = "state_dict"
GROUP_SIZE = 32


def _packable(module, fqn: str) -> bool:
    import torch

    return (
        isinstance(module, torch.nn.Linear)
        and module.in_features % GROUP_SIZE == 0
        and module.out_features % 8 == 0
    )


def apply(model, ctx):
    import torch
    from torchao.quantization import Int4WeightOnlyConfig, quantize_

    from campaign.quantize.variants import linear_layers

    linear_layers(model)
    model = model.to(device=ctx.device, dtype=torch.bfloat16)
    quantize_(model, Int4WeightOnlyConfig(group_size=GROUP_SIZE), filter_fn=_packable)
    return model
