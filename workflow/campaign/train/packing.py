"""train.packing: the attention side of packed rows. Each token attends only to earlier tokens of
its own example (a block-diagonal causal mask built from the rows' segment ids), and a model is
refused in one line unless a packed row gives each example the logits it has alone.

The mask goes to the model as a 4-D mask, which transformers passes to the attention as it is:
boolean (True: attend) for SDPA, additive (0 or the dtype's minimum) for eager attention. Other
attention implementations (flash, flex) read no such mask, so they are refused.
"""

from __future__ import annotations

import inspect

import torch

from campaign.core.errors import CampaignError
from campaign.core.tasks import packing_refusal

MASKED_ATTENTION = ("eager", "sdpa")  # implementations that take a 4-D mask as given
# The check's tolerance on |packed - alone| logits, relative to the logits' largest magnitude.
CHECK_TOLERANCE = 1e-4


def block_causal(segment_ids: torch.Tensor) -> torch.Tensor:
    """(R, 1, W, W) bool: query i may attend key j when j <= i and both are in one segment.

    segment_ids: (R, W) int64, a row's examples numbered 1..k, its padding 0.
    """
    width = segment_ids.shape[-1]
    causal = torch.ones(width, width, dtype=torch.bool, device=segment_ids.device).tril()
    same = segment_ids[:, :, None] == segment_ids[:, None, :]
    return (same & causal)[:, None]


def attention_implementation(model) -> str:
    config = getattr(model, "config", None)
    return str(getattr(config, "_attn_implementation", None) or "eager")


def packed_mask(model, segment_ids: torch.Tensor) -> torch.Tensor:
    """The 4-D mask `model`'s attention takes for rows with these segment ids."""
    allowed = block_causal(segment_ids)
    if attention_implementation(model) == "sdpa":
        return allowed
    dtype = next(model.parameters()).dtype
    dtype = dtype if dtype.is_floating_point else torch.float32
    mask = torch.zeros(allowed.shape, dtype=dtype, device=segment_ids.device)
    return mask.masked_fill(~allowed, torch.finfo(dtype).min)


def packed_logits(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(R, W, V) token logits of packed rows (batches.collate_packed)."""
    return model(
        input_ids=batch["input_ids"],
        attention_mask=packed_mask(model, batch["segment_ids"]),
        position_ids=batch["position_ids"],
        use_cache=False,
    ).logits


def _forward_takes_positions(model) -> bool:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        return "position_ids" in inspect.signature(base.forward).parameters
    except (TypeError, ValueError):
        return False


def check_packing(model, task: str, device) -> None:
    """Refuse train.packing, in one line, where the model cannot keep packed examples apart.

    Beyond the task and the forward's arguments, two short sequences are run packed in one row
    and alone: the logits must agree (an architecture that ignored the mask or the positions
    would let the second sequence see the first, or shift its positions).
    """
    refusal = packing_refusal(task)
    if refusal is not None:
        raise CampaignError(f"train.packing: {refusal}; set false")
    arch = getattr(getattr(model, "config", None), "model_type", type(model).__name__)
    if not _forward_takes_positions(model):
        raise CampaignError(
            f"train.packing: this {arch} model's forward takes no position_ids; set false"
        )
    implementation = attention_implementation(model)
    if implementation not in MASKED_ATTENTION:
        raise CampaignError(
            f"train.packing: attention implementation {implementation!r} of this {arch} model "
            f"takes no 4-D mask (packing needs one of {', '.join(MASKED_ATTENTION)}); set false"
        )
    error = packing_error(model, device)
    if not error <= CHECK_TOLERANCE:
        raise CampaignError(
            f"train.packing: this {arch} model does not keep packed examples apart (logits "
            f"differ by {error:.2e} relative, over {CHECK_TOLERANCE:.0e}); set false"
        )


@torch.no_grad()
def packing_error(model, device) -> float:
    """max |logits packed - logits alone| / max |logits alone| over two sequences (3 and 2
    tokens) packed in one row with one padding token; dropout off for the call."""
    vocab = int(model.get_input_embeddings().num_embeddings)
    first = [1 % vocab, 2 % vocab, 3 % vocab]
    second = [4 % vocab, 5 % vocab]
    batch = {
        "input_ids": torch.tensor([first + second + [0]], device=device),
        "position_ids": torch.tensor([[0, 1, 2, 0, 1, 0]], device=device),
        "segment_ids": torch.tensor([[1, 1, 1, 2, 2, 0]], device=device),
    }
    was_training = model.training
    model.eval()
    try:
        packed = packed_logits(model, batch)[0].float()
        alone = [
            model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0].float()
            for ids in (first, second)
        ]
    finally:
        model.train(was_training)
    reference = torch.cat(alone)
    scale = float(reference.abs().max()) or 1.0
    return float((packed[:5] - reference).abs().max()) / scale
