"""The memory levers as train keys: gradient checkpointing trains the same weights bit for bit
(and keeps the run id), length grouping is a seeded, resumable order (and a new run id), a
low-bit optimizer stops on the CPU in one line, and the preflight's measured lever costs name
exactly keys a recipe accepts."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from trainkit import REPO, tiny_spec, write_splits

from campaign.core.errors import CampaignError
from campaign.memory.costs import LEVER_KEYS, lever_costs
from campaign.plan import run_id
from campaign.train import Recipe, Trainer, read_data
from campaign.train.batches import DataOrder, length_grouped


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return read_data(write_splits(tmp_path_factory.mktemp("splits"), n_train=48, n_eval=8))


def spec_with(**train) -> dict:
    # Two layers and dropout 0.1: checkpointing recomputes layer outputs and replays dropout.
    return tiny_spec(layers=2, max_steps=3, eval_every=3, checkpoint_every=3, **train)


def trained(spec: dict, data, work: Path) -> Trainer:
    trainer = Trainer(spec, data, work, root=REPO, stream=io.StringIO())
    trainer.run()
    return trainer


def saved_in_forward(trainer: Trainer) -> int:
    from campaign.train.batches import collate

    batch = collate(trainer.examples["train"][:8], trainer.pad_id)
    count = [0]

    def pack(tensor):
        count[0] += 1
        return tensor

    trainer.model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        trainer.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    return count[0]


def test_gradient_checkpointing_trains_bitwise_equal_weights_with_the_same_id(data, tmp_path):
    plain = trained(spec_with(), data, tmp_path / "a")
    spec = spec_with(gradient_checkpointing=True)
    checkpointed = trained(spec, data, tmp_path / "b")
    # Really on: a forward saves far fewer tensors for backward (77 -> 17 here).
    assert saved_in_forward(checkpointed) < saved_in_forward(plain) / 2
    a, b = plain.model.state_dict(), checkpointed.model.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert run_id(spec) == run_id(spec_with()) == run_id(spec_with(gradient_checkpointing=False))


def test_length_grouping_sorts_each_window_longest_first():
    perm = np.array([4, 0, 5, 1, 3, 2])
    lengths = np.array([1, 9, 3, 7, 5, 2])  # example i has lengths[i] tokens
    # windows [4, 0, 5] -> lengths 5, 1, 2 -> [4, 5, 0]; [1, 3, 2] -> 9, 7, 3 -> unchanged
    assert length_grouped(perm, lengths, 3).tolist() == [4, 5, 0, 1, 3, 2]
    assert length_grouped(perm, lengths, 6).tolist() == [1, 3, 4, 2, 5, 0]


def test_grouped_order_resumes_exactly_and_changes_the_run_id():
    lengths = list(np.random.default_rng(0).integers(2, 30, size=20))
    order = DataOrder(20, seed=3, lengths=lengths, group=8)
    order.take(13)
    state = order.state_dict()
    expected = order.take(30)
    resumed = DataOrder(20, seed=3, lengths=lengths, group=8)
    resumed.load_state_dict(state)
    assert resumed.take(30) == expected
    assert sorted(DataOrder(20, 3, lengths, 8).take(20)) == list(range(20))  # a permutation
    assert run_id(spec_with(group_by_length=True)) != run_id(spec_with())
    assert run_id(spec_with(group_by_length=False)) == run_id(spec_with())


def test_low_bit_optimizer_on_the_cpu_and_unknown_values_are_one_line(data, tmp_path):
    with pytest.raises(CampaignError, match=r"^train\.optimizer: adamw_8bit needs CUDA") as e:
        Trainer(spec_with(optimizer="adamw_8bit"), data, tmp_path, root=REPO)
    assert "\n" not in str(e.value)
    with pytest.raises(CampaignError, match=r"^train\.optimizer: 'sgd' is not one of"):
        Recipe.from_spec(spec_with(optimizer="sgd")["train"])
    with pytest.raises(CampaignError, match=r"^train\.group_by_length: expected true or false"):
        Recipe.from_spec(spec_with(group_by_length="yes")["train"])


def test_measured_lever_costs_name_keys_a_recipe_accepts(data, tmp_path):
    base = spec_with(max_length=32)

    def make(**overrides):
        spec = {**base, "train": {**base["train"], **overrides}}
        return Trainer(spec, data, tmp_path / "t", root=REPO, stream=io.StringIO())

    rows = {r["lever"]: r for r in lever_costs(make, base["train"], "cpu")}
    assert set(rows) == set(LEVER_KEYS)
    for row in rows.values():  # every suggestion is a train key the recipe takes
        keys = {k.removeprefix("train."): v for k, v in row["setting"].items()}
        Recipe.from_spec({**base["train"], **keys})
    ckpt = rows["gradient_checkpointing"]
    assert ckpt["saves_bytes"] > 0 and ckpt["step_time_ratio"] > 0 and not ckpt["enabled"]
    assert rows["optimizer"]["peak_bytes"] is None and "needs CUDA" in rows["optimizer"]["note"]
    assert rows["group_by_length"]["peak_bytes"] > 0
