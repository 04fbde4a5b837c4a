"""The loss and its gradients: per-target sums over micro-batches, normalized over the whole
accumulated batch, so k micro-batches give the gradient of one batch holding all of them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import torch

from campaign.core.errors import CampaignError
from campaign.core.tasks import module_of
from campaign.train.batches import count_targets
from campaign.train.packing import packed_logits


def logits_of(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, C) class logits or (B, L, V) token logits of one batch; packed rows (train.packing:
    segment ids present) through their block-diagonal mask and per-example positions."""
    if "segment_ids" in batch:
        return packed_logits(model, batch)
    # use_cache=False: a decoder would otherwise build a KV cache it never reads (memory, time).
    return model(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False
    ).logits


def loss_sum(model, batch: dict[str, torch.Tensor], task: str) -> torch.Tensor:
    """Sum (not mean) of per-target cross-entropies of one micro-batch, as a scalar tensor: the
    task's loss_sum (a classifier's over its class logits, a decoder's over the next tokens)."""
    logits = logits_of(model, batch)
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # the loss in fp32 even under autocast
    return module_of(task).loss_sum(logits, batch["labels"])


def accumulate(
    model,
    batches: Sequence[dict[str, torch.Tensor]],
    task: str,
    normalize: bool = True,
    autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
    scale: Callable[[torch.Tensor], torch.Tensor] | None = None,
    total: int | None = None,
    before: Callable[[int], object] | None = None,
) -> tuple[torch.Tensor, int]:
    """Backward over k micro-batches into .grad; returns (detached loss sum, target count).

    total: the target count to normalize by when `batches` are this process's share of a
    global batch over several devices (default: their own count). before(i): called before
    micro-batch i's forward pass (the loop seeds dropout there).

    normalize=True: every micro-batch's loss sum is divided by the target count of the WHOLE
    accumulated batch, so the gradient equals that of one batch holding all k micro-batches.
    normalize=False: the common shortcut, mean of per-micro-batch means (biased when the
    micro-batches hold different numbers of targets) — kept to show the difference.
    """
    counts = [count_targets(b) for b in batches]
    total = sum(counts) if total is None else total
    if total == 0:
        raise CampaignError("a training step has no target tokens (all labels are masked)")
    loss_total = torch.zeros((), dtype=torch.float64)
    for i, (batch, count) in enumerate(zip(batches, counts, strict=True)):
        if before is not None:
            before(i)
        with autocast():
            s = loss_sum(model, batch, task)
        if normalize:
            loss = s / total
        else:
            loss = s / max(count, 1) / len(batches)
        (scale(loss) if scale is not None else loss).backward()
        loss_total += s.detach().to("cpu", torch.float64)
    return loss_total, total


def accumulated_gradients(
    model, batches: Sequence[dict[str, torch.Tensor]], task: str, normalize: bool = True
) -> dict[str, torch.Tensor]:
    """Gradients {parameter name: grad} after accumulating `batches`, for equivalence checks.

    Dropout is switched off (eval mode) for the call so that k micro-batches and one batch of
    all of them are the same computation; the model's mode and .grad are restored after.
    """
    was_training = model.training
    saved = {n: p.grad for n, p in model.named_parameters()}
    model.eval()
    try:
        for p in model.parameters():
            p.grad = None
        accumulate(model, batches, task, normalize=normalize)
        return {
            n: p.grad.detach().clone()
            for n, p in model.named_parameters()
            if p.requires_grad and p.grad is not None
        }
    finally:
        for n, p in model.named_parameters():
            p.grad = saved[n]
        model.train(was_training)


def param_groups(model, weight_decay: float) -> list[dict]:
    """Decay matrices and embeddings; not biases or LayerNorm weights (nanoGPT's split)."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
