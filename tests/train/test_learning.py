"""What the built-in loop learns (issue 35): length grouping keeps every micro-batch's label mix
(a length sort alone makes label-homogeneous batches where length and label go together), and the
base model's dropout is a recipe key (train.base_dropout) that is really off when false, keeps
LoRA's own dropout, is an ablation factor the plan accepts and is in the run id only when moved
off its default."""

from __future__ import annotations

import copy
import io

import numpy as np
import pytest
import torch
from trainkit import REPO, preflight_config, run_preflight, tiny_spec, write_splits

from campaign.core.errors import CampaignError
from campaign.core.params import load_params, validate
from campaign.plan import run_id
from campaign.plan.planner import plan_runs
from campaign.train import Recipe, Trainer, read_data
from campaign.train.batches import DataOrder, collate, label_mixed, length_grouped


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


def _correlated(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Labels 0..3 whose lengths barely overlap: label k is 10k..10k+12 tokens long."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, size=n)
    return labels * 10 + rng.integers(0, 13, size=n), labels


def test_grouped_micro_batches_keep_the_label_mix():
    lengths, labels = _correlated()
    micro = 16
    order = DataOrder(len(labels), seed=5, lengths=lengths, group=micro * 10, labels=labels)
    batches = np.array(order.take(len(labels))).reshape(-1, micro)
    share = np.bincount(labels, minlength=4) / len(labels)
    for batch in batches:
        counts = np.bincount(labels[batch], minlength=4)
        # Each label about micro x its share (a window's share differs from the whole by a bit).
        assert np.all(np.abs(counts - micro * share) <= 3), counts
    # The length sort alone put one label in nearly every batch: what the order must not do.
    alone = length_grouped(DataOrder(len(labels), seed=5).permutation(0), lengths, micro * 10)
    homogeneous = [np.bincount(labels[b], minlength=4).max() for b in alone.reshape(-1, micro)]
    assert np.median(homogeneous) >= 12


def test_label_mixed_grouping_still_saves_padding():
    """Within labels the windows still fall from longest to shortest: on lengths independent of
    the label the padded width is as low as the plain length sort's, far below unsorted."""
    rng = np.random.default_rng(1)
    lengths, labels = rng.integers(4, 64, size=800), rng.integers(0, 5, size=800)
    perm = rng.permutation(800)

    def padded(order):
        return sum(lengths[b].max() for b in np.asarray(order).reshape(-1, 16))

    mixed, plain = padded(length_grouped(perm, lengths, 800, labels)), padded(perm)
    assert mixed < 0.7 * plain
    assert mixed <= 1.15 * padded(length_grouped(perm, lengths, 800))


def test_label_mixed_hand_computed():
    # a: 9, 8 (quantile keys .25, .75); b: 2, 1 (.25, .75) -> a9, b2, a8, b1.
    assert label_mixed(np.array([9, 8, 2, 1]), np.array([0, 0, 1, 1])).tolist() == [0, 2, 1, 3]
    # One label: the plain longest-first sort, ties in window order.
    assert label_mixed(np.array([3, 5, 3, 1]), np.zeros(4, int)).tolist() == [1, 0, 2, 3]


def test_grouped_label_order_resumes_exactly():
    lengths, labels = _correlated(60)
    order = DataOrder(60, seed=2, lengths=lengths, group=24, labels=labels)
    order.take(37)
    state, expected = order.state_dict(), order.take(50)
    resumed = DataOrder(60, seed=2, lengths=lengths, group=24, labels=labels)
    resumed.load_state_dict(state)
    assert resumed.take(50) == expected


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return read_data(write_splits(tmp_path_factory.mktemp("splits"), n_train=48, n_eval=8))


def test_trainer_groups_by_length_within_labels(data, tmp_path):
    spec = tiny_spec(group_by_length=True, micro_batch=8, grad_accum=1)
    trainer = Trainer(spec, data, tmp_path, root=REPO, stream=io.StringIO())
    assert trainer.order.labels is not None
    ids = [trainer.label_ids[v] for v in data.train.labels]
    assert trainer.order.labels.tolist() == ids


def _dropout_ps(model) -> list[float]:
    return [m.p for m in model.modules() if isinstance(m, torch.nn.modules.dropout._DropoutNd)]


def _two_train_forwards(trainer: Trainer) -> tuple[torch.Tensor, torch.Tensor]:
    batch = collate(trainer.examples["train"][:8], trainer.pad_id)
    trainer.model.train()
    with torch.no_grad():
        out = [
            trainer.model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).logits
            for _ in range(2)
        ]
    return out[0], out[1]


def test_base_dropout_off_is_deterministic_in_train_mode_and_keeps_lora_dropout(data, tmp_path):
    lora = {"r": 4, "alpha": 8, "dropout": 0.2, "target_modules": ["query", "value"]}
    on = Trainer(tiny_spec(lora=lora), data, tmp_path / "on", root=REPO, stream=io.StringIO())
    off = Trainer(
        tiny_spec(lora=lora, base_dropout=False),
        data,
        tmp_path / "off",
        root=REPO,
        stream=io.StringIO(),
    )
    a, b = _two_train_forwards(on)
    assert not torch.equal(a, b)  # the default: the base's dropout draws new masks
    lora_p = [
        m.p
        for name, m in off.model.named_modules()
        if "lora_dropout" in name and isinstance(m, torch.nn.Dropout)
    ]
    assert lora_p and all(p == 0.2 for p in lora_p)  # the adapters' own dropout stays
    base_p = [
        m.p
        for name, m in off.model.named_modules()
        if "lora_dropout" not in name and isinstance(m, torch.nn.Dropout)
    ]
    assert base_p and all(p == 0.0 for p in base_p)
    assert max(_dropout_ps(on.model)) == pytest.approx(0.2)
    # Without LoRA's dropout, a train-mode forward is then the same twice.
    plain = Trainer(
        tiny_spec(base_dropout=False), data, tmp_path / "plain", root=REPO, stream=io.StringIO()
    )
    a, b = _two_train_forwards(plain)
    assert torch.equal(a, b)


def test_base_dropout_is_a_checked_key_in_the_run_id_only_when_off():
    assert Recipe.from_spec(tiny_spec()["train"]).base_dropout is True
    with pytest.raises(CampaignError, match=r"^train\.base_dropout: expected true or false"):
        Recipe.from_spec(tiny_spec(base_dropout="no")["train"])
    assert run_id(tiny_spec(base_dropout=True)) == run_id(tiny_spec())
    assert run_id(tiny_spec(base_dropout=False)) != run_id(tiny_spec())


def test_base_dropout_is_an_ablation_factor_the_plan_accepts():
    params = copy.deepcopy(load_params(REPO / "params.yaml"))
    params["ablation"]["factors"] = {"train": {"base_dropout": [True, False]}}
    params = validate(params, "params")
    runs = plan_runs(params)
    levels = {r.spec["train"]["base_dropout"] for r in runs}
    assert levels == {True, False}
    assert len({r.run_id for r in runs}) == len(runs) == 2 * len(params["ablation"]["seeds"])


def test_memory_check_measures_what_base_dropout_false_saves(tmp_path):
    """The memory estimate keeps no dropout masks when the base's dropout is off, so the
    preflight's memory check (estimate against a measured step, 2 % tolerance) still passes."""
    inputs = write_splits(tmp_path / "splits", n_train=64, n_eval=16)
    config = preflight_config(["memory"], sample={"train_examples": 64, "validation_examples": 16})
    saved = {}
    for on in (True, False):
        report = run_preflight(tiny_spec(base_dropout=on), inputs, config, tmp_path / str(on))
        check = report["memory"]
        assert check["passed"], check["summary"]
        details = check["details"]
        assert details["activation_relative_error"] <= config["activation_tolerance"]
        act = next(r for r in details["comparison"] if r["component"].startswith("activations"))
        saved[on] = act["measured"]
    assert saved[False] < saved[True]
