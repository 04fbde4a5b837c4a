"""The contract helper a user's Trainer script imports (campaign.train.contract): a recipe key it
does not pass to the Trainer, set away from its default, stops the run instead of training a
cell under a label it never trained with."""

from __future__ import annotations

import signal

import pytest

from campaign.core.defaults import TRAIN_DEFAULTS
from campaign.train.contract import UNMAPPED, Contract


def _spec(**recipe) -> dict:
    base = {
        "max_steps": 4, "micro_batch": 2, "grad_accum": 1, "lr": 1e-3, "weight_decay": 0.0,
        "warmup_steps": 0, "schedule": "linear", "max_grad_norm": 1.0, "checkpoint_every": 2,
        "keep_checkpoints": 1, "precision": "fp32",
    }  # fmt: skip
    return {"recipe": {**base, **recipe}, "seed": 1, "checkpoint_dir": "ckpt"}


@pytest.fixture(autouse=True)
def _restore_signals():
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_an_unmapped_key_away_from_its_default_is_refused_unless_the_script_handles_it():
    assert Contract(_spec(optimizer="adamw", packing=False)).trainer_args()["learning_rate"] == 1e-3
    with pytest.raises(SystemExit, match="train.optimizer 'adafactor'"):
        Contract(_spec(optimizer="adafactor")).trainer_args()
    args = Contract(_spec(optimizer="adafactor")).trainer_args(handled=("optimizer",))
    assert args["max_steps"] == 4
    # every unmapped key is a train key with a default to compare against
    assert set(UNMAPPED) <= set(TRAIN_DEFAULTS)
