"""The contract helper a user's Trainer script imports (campaign.train.contract): a recipe key it
does not pass to the Trainer, set away from its default, stops the run instead of training a
cell under a label it never trained with."""

from __future__ import annotations

import signal

import pytest
import yaml
from trainkit import REPO

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
    # every unmapped key is a train key, compared against what the Trainer's arguments train
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "params.schema.yaml").read_text())
    assert set(UNMAPPED) <= set(schema["properties"]["train"]["properties"])
    assert all(UNMAPPED[k] == TRAIN_DEFAULTS[k] for k in set(UNMAPPED) & set(TRAIN_DEFAULTS))


LORA = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["query", "value"]}


def test_a_lora_the_script_does_not_apply_is_refused_and_one_it_applies_is_not():
    """train.lora set, or a factor over it, for a script that trains every weight would train
    one model under two run ids: refused in one line unless the script names it as handled."""
    assert Contract(_spec(lora=None)).trainer_args()["max_steps"] == 4
    with pytest.raises(SystemExit) as refused:
        Contract(_spec(lora=LORA)).trainer_args()
    assert str(refused.value).startswith("CAMPAIGN_RUN_SPEC: train.lora {'r': 4")
    assert "\n" not in str(refused.value) and "handled" in str(refused.value)
    assert Contract(_spec(lora=LORA)).trainer_args(handled=("lora",))["max_steps"] == 4
