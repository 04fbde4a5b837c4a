"""Quantization variants, a registry: one module per variant, named after it
(`quantization.variants`, and `train.base_quantization` names some of them too).

A variant module defines
    METHOD       what it does, in words precise enough to tell two methods apart; part of the
                 content key of every job that runs it
    LIBRARY      the package that does the work; its installed version is part of the key
    DEVICES      where it can run, ("cpu", "cuda") or a subset. A job on a device the variant
                 cannot use runs it on the CPU if the CPU is listed, else writes a row with
                 status "skipped" and the reason ("needs CUDA")
    FORMAT       how its model is written: "safetensors" (save_pretrained: plain dtypes) or
                 "state_dict" (torch.save of the state dict: quantized tensor subclasses cannot
                 save_pretrained) or "onnx" (model.onnx, written by the model's save(folder):
                 campaign.quantize.onnxrt)
    apply(model, ctx) -> model
                 the quantized model, ready to score on ctx.device (the model arrives in fp32
                 on the CPU; ctx: campaign.quantize.variant.Context)
and optionally
    CALIBRATION  True when apply() reads ctx.calibration (batches of the train split only)
    NEEDS        what the run's model must have for it to apply (default: nothing, every task):
                 words a task's model offers (core/tasks.py TaskModule.model_offers), e.g.
                 ("classification_head",) for an ONNX export, ("kv_cache",) for a KV-cache
                 variant; it applies to the tasks whose model offers them all
    NEEDS_NOTE   why it does not apply to the other tasks (appended to the skipped row's reason)
    ALSO_LIBRARIES  other packages whose installed versions are part of its key (and that must
                 be installed for it to run), e.g. onnx beside onnxruntime
    CACHE        for a KV-cache variant: the `cache_config` of transformers' quantized cache used
                 when it generates (its weights stay fp32)
    make_cache(config) -> cache
                 for a KV-cache variant of another kind: the cache the generation engine uses
                 (kv_corrupt's deliberately broken one)
    INFERENCE    "no_grad" (default) or "inference_mode": the context it predicts under
    CANARY       True for a variant built to be rejected (kv_corrupt): the evaluation decides
                 it "canary rejected" or "canary not rejected" (a finding), never adopts it,
                 and the verdict and the budget never weigh it
Heavy libraries are imported inside apply(): listing the variants and building their keys (when
the Snakefile builds the DAG) imports nothing but these modules.
"""

from __future__ import annotations

from types import ModuleType

from campaign.core.errors import CampaignError
from campaign.core.registry import discover, member_names


def names() -> list[str]:
    """Variant names, from the module files (imports nothing)."""
    return member_names(__name__)


def get(name: str) -> ModuleType:
    found = discover(__name__)
    if name not in found:
        raise CampaignError(
            f"quantization.variants: unknown variant {name!r} (known: {', '.join(found)})"
        )
    return found[name]


def linear_layers(model) -> None:
    """Replace GPT-2's Conv1D modules (weight stored (in, out)) with the equivalent nn.Linear,
    in place, so that quantizers that act on nn.Linear (all of them) see its matmuls."""
    import torch
    from transformers.pytorch_utils import Conv1D

    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, Conv1D):
                n_in, n_out = child.weight.shape
                linear = torch.nn.Linear(n_in, n_out, bias=child.bias is not None)
                with torch.no_grad():
                    linear.weight.copy_(child.weight.t())
                    if child.bias is not None:
                        linear.bias.copy_(child.bias)
                setattr(parent, child_name, linear)


def on_device_linear(model, ctx):
    """The model ready for a quantizer that acts on nn.Linear: GPT-2's Conv1D made nn.Linear
    (linear_layers), then moved to ctx.device."""
    linear_layers(model)
    return model.to(ctx.device)


def torchao_linear(config: str):
    """apply(model, ctx) of a torchao variant: the model on the device with nn.Linear layers,
    then torchao's quantize_(model, <config>()) (torchao imported when it runs)."""

    def apply(model, ctx):
        from torchao import quantization

        model = on_device_linear(model, ctx)
        quantization.quantize_(model, getattr(quantization, config)())
        return model

    return apply


def quanto_weights(weights: str):
    """apply(model, ctx) of an optimum-quanto weight-only variant: the model on the device with
    nn.Linear layers, quantize(weights=<weights>), then frozen (the quantized weights
    materialized, not re-quantized at every forward)."""

    def apply(model, ctx):
        from optimum import quanto

        model = on_device_linear(model, ctx)
        quanto.quantize(model, weights=getattr(quanto, weights))
        quanto.freeze(model)
        return model

    return apply
