"""The preflight's overfit check flags a recipe that does not learn (issue 35): on the pretrained
MiniLM with the demo's LoRA, a learning lr passes and lr 1e-9 fails the preflight in one line
that names train.lr; the rule's tiers on hand-computed losses."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainkit import REPO, preflight_config, run_preflight, tiny_spec, write_splits

from campaign.core.errors import CampaignError
from campaign.preflight import report as preflight_report
from campaign.preflight.checks import overfit

MINILM = REPO / "models" / "all-MiniLM-L6-v2"
CONFIG = preflight_config(
    ["overfit"],
    sample={"train_examples": 32, "validation_examples": 8},
    # 4 examples, 16 full-batch steps: the learning lr below gets there in about 9.
    overfit={"examples": 4, "steps": 16, "max_final_loss": 0.1},
)


def minilm_spec(lr: float) -> dict:
    """The demo's model and LoRA (r 8 on query/value, the base's dropout on) at `lr`."""
    spec = tiny_spec(
        lr=lr,
        warmup_steps=0,
        micro_batch=8,
        grad_accum=1,
        max_length=32,
        lora={"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["query", "value"]},
        base_dropout=True,
    )
    spec["model"] = {
        "task": "sequence_classification",
        "source": str(MINILM),
        "config": {"architecture": "bert"},
        "tokenizer": {"source": "model"},
    }
    return spec


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, list[Path]]:
    if not (MINILM / "config.json").exists():
        pytest.skip(f"the pretrained MiniLM is not at {MINILM} (scripts/setup.sh copies it)")
    splits = write_splits(tmp_path_factory.mktemp("splits"), n_train=32, n_eval=8)
    return {**splits, "base_model": [MINILM]}


def preflight(inputs, tmp_path, lr: float) -> dict:
    """The stage's own path: run_preflight, then check_report (the one line a stage raises)."""
    return run_preflight(minilm_spec(lr), inputs, CONFIG, tmp_path)


def test_a_learning_recipe_passes(inputs, tmp_path):
    report = preflight(inputs, tmp_path, lr=1.0e-2)
    check = report["overfit"]
    assert check["passed"], check["summary"]
    d = check["details"]
    assert d["final_loss"] <= 0.1 < d["initial_loss"] and d["reached_at_step"] <= 16
    preflight_report.check_report(report)  # raises nothing


def test_a_recipe_that_does_not_learn_fails_in_one_line_naming_train_lr(inputs, tmp_path):
    report = preflight(inputs, tmp_path, lr=1.0e-9)
    check = report["overfit"]
    assert not check["passed"] and check["details"]["reached_at_step"] is None
    with pytest.raises(CampaignError) as e:
        preflight_report.check_report(report)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("preflight failed (1 blocking): overfit: does not learn: ")
    assert "train.lr 1e-09 is too small" in message


@pytest.mark.parametrize(
    ("final", "starts"),
    [
        (1.6, "does not learn: loss fell by 20% (from 2 to 1.6 in 100 steps on 8 examples"),
        (2.0, "does not learn: loss fell by 0% "),
        (2.2, "does not learn: loss fell by 0% "),  # a 10 % rise is no movement either
        (1.5, "learns too slowly: loss fell by 25% "),
        (0.4, "learns too slowly: loss fell by 80% "),
        (2.5, "loss rose by 25% (from 2 to 2.5 in 100 steps on 8 examples; must fall below 0.1)"),
    ],
)
def test_the_rule_tiers_by_how_far_the_loss_fell(final, starts):
    line = overfit._not_reached(2.0, final, steps=100, n=8, threshold=0.1, lr=3e-4)
    assert line.startswith(starts), line
    assert "train.lr 0.0003" in line or "train.lr (0.0003)" in line
