"""The optimizer a recipe names (`train.optimizer`): torch's AdamW, or a memory-saving low-bit
AdamW from torchao where its kernels run.

adamw        torch.optim.AdamW: two fp32 moments per trainable weight (8 bytes each).
adamw_8bit   torchao.optim.AdamW8bit: block-quantized 8-bit moments (about 2 bytes per weight
             plus a scale per block of 256). CUDA only: its kernels are Triton / CUDA; on
             another device the run stops with that reason.
adamw_4bit   torchao.optim.AdamW4bit: 4-bit moments (about 1 byte per weight). CUDA only.

A low-bit optimizer changes the result (its moments are rounded), so the key is part of a run's
id; `adamw`, the default, is left out of it (core/defaults.py TRAIN_DEFAULTS).
"""

from __future__ import annotations

from dataclasses import dataclass

from campaign.core.errors import CampaignError

KEY = "train.optimizer"


@dataclass(frozen=True)
class Optimizer:
    name: str
    cuda_only: bool
    # Optimizer-state bytes per trainable weight (the memory estimate's figure).
    state_bytes_per_param: float
    description: str


OPTIMIZERS = {
    "adamw": Optimizer("adamw", False, 8.0, "torch AdamW, fp32 moments"),
    "adamw_8bit": Optimizer("adamw_8bit", True, 2.0 + 8 / 256, "torchao AdamW8bit"),
    "adamw_4bit": Optimizer("adamw_4bit", True, 1.0 + 8 / 128, "torchao AdamW4bit"),
}


def check_name(name: str) -> None:
    if name not in OPTIMIZERS:
        raise CampaignError(f"{KEY}: {name!r} is not one of {', '.join(OPTIMIZERS)}")


def optimizer_unavailable(name: str, device_type: str) -> str | None:
    """Why `name` cannot run on `device_type` (None: it can)."""
    check_name(name)
    if OPTIMIZERS[name].cuda_only and device_type != "cuda":
        return (
            f"{KEY}: {name} needs CUDA (torchao's low-bit AdamW kernels); this run's device is "
            f"{device_type}"
        )
    return None


def make_optimizer(name: str, groups: list[dict], lr: float, device_type: str):
    """The optimizer over `groups` (steps.param_groups), or a one-line CampaignError."""
    reason = optimizer_unavailable(name, device_type)
    if reason is not None:
        raise CampaignError(reason)
    if name == "adamw":
        import torch

        return torch.optim.AdamW(groups, lr=lr)
    from torchao.optim import AdamW4bit, AdamW8bit

    return (AdamW8bit if name == "adamw_8bit" else AdamW4bit)(groups, lr=lr)
