"""Fine-tuning on a quantized base (`train.base_quantization`): the frozen base model's linear
weights are quantized, and LoRA adapters train in fp32 on top of them.

int8_weight_only   torchao `Int8WeightOnlyConfig` via `quantize_`: each nn.Linear weight of the
                   backbone becomes int8 with one fp32 scale and one int8 zero point per output
                   row (1 byte per weight + 5 per row); biases, embeddings, LayerNorms and the task
                   head stay fp32. Autograd runs through the quantized matmul (the gradient with
                   respect to its input), so adapters in earlier layers learn; peft wraps these
                   layers with its torchao LoRA layer. CPU and CUDA.
nf4                bitsandbytes 4-bit NormalFloat: CUDA only. Declared so that a run asking for it
                   on a machine without CUDA stops with the reason; the campaign has no NF4 path
                   yet, so on CUDA it stops too, naming that.

What is quantized: every nn.Linear except the task head (classifier / score / lm_head, and any
module tied to the output embeddings). GPT-2's blocks are transformers Conv1D modules, which torchao
does not quantize: such a model has nothing to quantize and the run stops with that reason.

The quantized base is a deterministic function of the fp32 base weights (built from the seed or
loaded from the base model folder), so a checkpoint holds only the trainable weights (adapters,
the head copy), the optimizer and the RNG states: `trainable_state` / `load_trainable_state`.

Saving (`merge_dequantized`): adapters cannot be merged exactly into int8 weights. The finished
model is the dequantized base (int8 x scale, as fp32) plus each adapter's delta: a plain fp32
transformers model. The run's predictions are computed with that merged model, so they equal the
predictions of the saved folder reloaded; the quantize phase can re-quantize it like any run.

torchao and peft are imported inside the functions (seconds each).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from campaign.core.errors import CampaignError

KEY = "train.base_quantization"
# Task heads stay in fp32: a classifier head is trained (peft's modules_to_save copy) and GPT-2's
# LM head is tied to the token embedding.
HEAD_MODULES = ("classifier", "score", "lm_head")
# Quantized weight bytes per output row besides the int8 weights: fp32 scale + int8 zero point.
INT8_ROW_BYTES = 4 + 1


@dataclass(frozen=True)
class Method:
    name: str
    library: str
    cuda_only: bool
    description: str


METHODS = {
    "int8_weight_only": Method(
        "int8_weight_only", "torchao", False, "int8 weights, fp32 scale per output row"
    ),
    "nf4": Method("nf4", "bitsandbytes", True, "4-bit NormalFloat weights (bitsandbytes)"),
}


def base_quantization_method(train: dict) -> str | None:
    """The method `train.base_quantization` names (None: a full-precision base), with one-line
    errors naming the key: an unknown method, or a quantized base without train.lora."""
    method = train.get("base_quantization")
    if method is None:
        return None
    if method not in METHODS:
        raise CampaignError(
            f"{KEY}: {method!r} is not one of {', '.join(METHODS)} (or null for an fp32 base)"
        )
    if not train.get("lora"):
        raise CampaignError(
            f"{KEY}: {method} needs train.lora (a quantized base is frozen; only LoRA adapters "
            "train on top of it)"
        )
    return method


def check_device(method: str, device_type: str) -> None:
    """A CUDA-only method on another device, or a method without an implementation, stops here."""
    spec = METHODS[method]
    if spec.cuda_only and device_type != "cuda":
        raise CampaignError(
            f"{KEY}: {method} needs CUDA ({spec.library} kernels); this run's device is "
            f"{device_type}"
        )
    if method == "nf4":
        raise CampaignError(
            f"{KEY}: nf4 is declared but not implemented in this campaign; use int8_weight_only"
        )


def is_quantized(tensor) -> bool:
    """A tensor subclass holding quantized data (torchao), not a plain torch.Tensor."""
    return hasattr(tensor, "__tensor_flatten__")


def tensor_bytes(tensor) -> int:
    """Bytes a tensor really holds: for a quantized subclass, the sum of its inner tensors
    (`nbytes` of a torchao tensor reports its logical fp32 size)."""
    if is_quantized(tensor):
        names, _ = tensor.__tensor_flatten__()
        return sum(tensor_bytes(getattr(tensor, name)) for name in names)
    return int(tensor.nbytes)


def quantized_linear_bytes(n_in: int, n_out: int) -> int:
    """Bytes of one int8 weight-only linear weight (out, in): int8 weights + per-row scale/zero."""
    return n_in * n_out + n_out * INT8_ROW_BYTES


def _targets(model) -> list[str]:
    import torch

    tied = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    names = []
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or module is tied:
            continue
        if name.split(".")[-1] in HEAD_MODULES:
            continue
        names.append(name)
    return names


def quantize_base(model, method: str, device_type: str):
    """Quantize the base model's linear weights in place (before LoRA wraps them); returns it."""
    check_device(method, device_type)
    targets = set(_targets(model))
    if not targets:
        arch = getattr(model.config, "model_type", type(model).__name__)
        raise CampaignError(
            f"{KEY}: {method} quantizes nn.Linear layers and this {arch} model has none outside "
            "its head (GPT-2's blocks are transformers Conv1D, which torchao does not quantize)"
        )
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    for p in model.parameters():
        p.requires_grad_(False)
    quantize_(model, Int8WeightOnlyConfig(), filter_fn=lambda _m, fqn: fqn in targets)
    return model


def trainable_state(model) -> dict:
    """The trainable tensors (adapters, the trained head copy) by parameter name: what a
    checkpoint of a quantized-base run holds of the model."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def load_trainable_state(model, state: dict) -> None:
    """Load `trainable_state` back; the set of names must be exactly the model's trainable ones."""
    import torch

    params = dict(model.named_parameters())
    wanted = {n for n, p in params.items() if p.requires_grad}
    if set(state) != wanted:
        extra = sorted(set(state) ^ wanted)
        raise CampaignError(f"{KEY}: checkpoint does not fit this model ({extra[0]})")
    with torch.no_grad():
        for name, value in state.items():
            params[name].copy_(value)


def merge_dequantized(model):
    """A plain fp32 transformers model: each quantized base weight dequantized, each adapter's
    delta added (`get_delta_weight`), the peft wrappers removed."""
    import torch
    from peft.tuners.lora import LoraLayer

    with torch.no_grad():
        for module in model.modules():
            if not isinstance(module, LoraLayer):
                continue
            base = module.get_base_layer()
            weight = base.weight
            dense = weight.dequantize() if is_quantized(weight) else weight.detach().clone()
            for adapter in module.active_adapters:
                if adapter in module.lora_A:
                    dense += module.get_delta_weight(adapter).to(dense.dtype)
            base.weight = torch.nn.Parameter(dense, requires_grad=False)
    return dequantize_all(model.unload())


def dequantize_all(model):
    """`model` with each quantized weight replaced, in place, by its fp32 dequantization (the
    saved model of a quantized-base run, and the zero-shot floor's copy of that base)."""
    import torch

    with torch.no_grad():
        for module in model.modules():
            weight = getattr(module, "weight", None)
            if weight is not None and is_quantized(weight):
                module.weight = torch.nn.Parameter(weight.dequantize(), requires_grad=False)
    return model


def quantized_weight_names(model) -> Iterable[str]:
    """Names of the quantized parameters of a model (for reports and tests)."""
    return [n for n, p in model.named_parameters() if is_quantized(p)]
