"""A run's training recipe (the `train` section of its spec), checked, and its lr schedule."""

from __future__ import annotations

import math
from dataclasses import dataclass

from campaign.core.defaults import TRAIN_DEFAULTS, with_train_defaults
from campaign.core.errors import CampaignError
from campaign.train import models, optim
from campaign.train.select import SELECT_MODES

PRECISIONS = ("fp32", "bf16", "fp16")
SCHEDULES = ("constant", "linear", "cosine")
# group_by_length: examples are sorted by length within windows of this many micro-batches of
# each epoch's permutation (as transformers' LengthGroupedSampler's "megabatches").
GROUP_MICRO_BATCHES = 50


@dataclass(frozen=True)
class Recipe:
    """The `train` section of a run spec, checked."""

    lr: float
    weight_decay: float
    max_steps: int
    micro_batch: int
    grad_accum: int
    max_length: int
    precision: str
    schedule: str
    warmup_steps: int
    max_grad_norm: float | None
    eval_every: int
    checkpoint_every: int
    keep_checkpoints: int
    lora: dict | None
    # Optional (older specs lack them): their defaults are core/defaults.py TRAIN_DEFAULTS.
    # the frozen base's quantization, train/basequant.py;
    base_quantization: str | None
    # recompute each layer's activations in backward (the same weights, bit for bit: not part
    # of a run's id, plan/ids.py OPERATIONAL_TRAIN_KEYS);
    gradient_checkpointing: bool
    # each epoch's order sorted by length within windows of GROUP_MICRO_BATCHES micro-batches;
    group_by_length: bool
    # causal_lm, generation: each micro-batch's examples packed into rows of max_length, every
    # example attending only within itself (batches.collate_packed, packing.py); in a run's id;
    packing: bool
    # torch AdamW or a low-bit AdamW (train/optim.py).
    optimizer: str
    # processes (devices) one run trains on, each taking grad_accum micro-batches of every
    # global batch (train/distributed.py); run ids count the effective batch, not its split.
    devices: int
    # the base model's own dropout during training (models.set_base_dropout): on, as
    # transformers and peft train it; false sets it to 0 (LoRA's dropout is train.lora.dropout).
    base_dropout: bool
    # your own training command instead of this loop (train/command.py), or its name in
    # commands; null or builtin: this loop.
    command: dict | str | None
    commands: dict | None
    # which step's model the run keeps (select.py): the last, or the best generated one.
    select: str

    @classmethod
    def from_spec(cls, train: dict) -> Recipe:
        fields = cls.__dataclass_fields__
        missing = [k for k in fields if k not in train and k not in TRAIN_DEFAULTS]
        if missing:
            raise CampaignError(f"train.{missing[0]}: missing (the training stage reads it)")
        unknown = sorted(set(train) - set(fields))
        if unknown:
            raise CampaignError(f"train.{unknown[0]}: not a key the training stage knows")
        train = with_train_defaults(train)
        recipe = cls(**{k: train[k] for k in fields})
        recipe.check()
        return recipe

    def check(self) -> None:
        positive = (
            *("max_steps", "micro_batch", "grad_accum", "eval_every", "checkpoint_every"),
            "devices",
        )
        for key in (*positive, "keep_checkpoints"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise CampaignError(f"train.{key}: expected a whole number >= 1")
        if not 0 < self.lr <= 1:
            raise CampaignError(f"train.lr: {self.lr} is not in (0, 1]")
        if self.precision not in PRECISIONS:
            raise CampaignError(
                f"train.precision: {self.precision!r} is not one of fp32, bf16, fp16"
            )
        if self.schedule not in SCHEDULES:
            raise CampaignError(f"train.schedule: {self.schedule!r} is not one of {SCHEDULES}")
        if not 0 <= self.warmup_steps <= self.max_steps:
            raise CampaignError(
                f"train.warmup_steps: {self.warmup_steps} must be >= 0 and at most max_steps"
            )
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise CampaignError("train.max_grad_norm: expected a number > 0, or null for none")
        if self.max_length < 2:
            raise CampaignError("train.max_length: expected at least 2 tokens")
        for key in ("gradient_checkpointing", "group_by_length", "packing", "base_dropout"):
            if not isinstance(getattr(self, key), bool):
                raise CampaignError(f"train.{key}: expected true or false")
        if self.select not in SELECT_MODES:
            raise CampaignError(
                f"train.select: {self.select!r} is not one of {', '.join(SELECT_MODES)}"
            )
        optim.check_name(self.optimizer)
        if self.lora is not None:
            models.check_lora(self.lora)
        models.check_base_quantization(self.lora, self.base_quantization)

    @property
    def batch_examples(self) -> int:
        """Examples of one optimizer step over all devices (the effective batch)."""
        return self.micro_batch * self.grad_accum * self.devices


def lr_factor(step: int, schedule: str, warmup_steps: int, max_steps: int) -> float:
    """Multiplier of the peak lr for optimizer step `step` (0-based).

    Linear warm-up over the first warmup_steps steps ((s+1)/(w+1), so no step is wasted at lr
    0), then constant, linear decay or cosine decay towards 0 at max_steps.
    """
    if step < warmup_steps:
        return (step + 1) / (warmup_steps + 1)
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    if schedule == "constant":
        return 1.0
    if schedule == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))
