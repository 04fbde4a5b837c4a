"""train.packing: packed rows keep each causal example to itself (its logits and loss are those it
has alone), carry fewer pad tokens for the same examples, change the run id, and are refused in
one line where they cannot hold (a classifier)."""

from __future__ import annotations

import io

import pytest
import torch
from trainkit import REPO, tiny_spec, write_splits

from campaign.core.errors import CampaignError
from campaign.plan import run_id
from campaign.train import PHASE, Recipe, Trainer, read_data
from campaign.train.batches import (
    IGNORE,
    collate,
    collate_packed,
    first_fit_decreasing,
    micro_batches,
    pack_rows,
)
from campaign.train.packing import block_causal, check_packing
from campaign.train.steps import accumulated_gradients, logits_of, loss_sum


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return read_data(write_splits(tmp_path_factory.mktemp("splits"), n_train=48, n_eval=8))


# The demo texts run 50-150 tokens: at max_length 160 a row holds two or three examples.
LENGTH = 160


def causal_spec(dropout: float = 0.1, **train) -> dict:
    spec = tiny_spec(
        task="causal_lm",
        architecture="gpt2",
        layers=2,
        max_steps=3,
        eval_every=3,
        max_length=LENGTH,
        **train,
    )
    spec["model"]["config"].update(dropout=dropout, max_position_embeddings=LENGTH)
    return spec


@pytest.fixture(scope="module")
def trainer(data, tmp_path_factory):
    spec = causal_spec(packing=True)
    return Trainer(spec, data, tmp_path_factory.mktemp("w"), root=REPO, stream=io.StringIO())


def test_pack_rows_holds_the_fewest_token_cells_by_hand():
    assert first_fit_decreasing([5, 3, 4, 2], 8) == [[0, 1], [2, 3]]  # 5+3, 4+2
    assert first_fit_decreasing([9, 1], 8) == [[0], [1]]  # too long: a row of its own, alone
    # Capacities 5..8: 5 -> 3 rows x 5 = 15 cells; 6 -> 3 x 6; 7 -> [5+2, 4+3] 2 x 7 = 14; 8 -> 16.
    assert pack_rows([5, 3, 4, 2], 8) == [[0, 3], [2, 1]]
    assert pack_rows([2, 2, 2], 8) == [[0], [1], [2]]  # 6 cells either way: the narrower
    assert pack_rows([2, 2, 1], 8) == [[0, 1, 2]]  # one row of 5 cells < 3 rows x 2
    assert pack_rows([6, 6], 8) == [[0], [1]]
    # Never more cells than padding to the longest: [7, 2, 6] at 8 packs 7 | 6+2 (2 x 8 = 16 <
    # 3 x 7 = 21); [7, 6, 6] stays one a row at 7 (21 cells, as unpadded).
    assert pack_rows([7, 2, 6], 8) == [[0], [2, 1]]
    assert pack_rows([7, 6, 6], 8) == [[0], [1], [2]]


def test_collate_packed_positions_segments_and_labels_by_hand():
    a = {"input_ids": [11, 12, 13], "labels": [IGNORE, IGNORE, 13]}
    b = {"input_ids": [21, 22], "labels": [21, 22]}  # a first label is never a target
    c = {"input_ids": [31, 32, 33, 34], "labels": [IGNORE, IGNORE, 33, 34]}
    batch = collate_packed([a, b, c], pad_id=0, max_length=6)
    # capacity 5 (2 rows x 5 cells; 4 -> 3 x 4 = 12, 6 -> [c+b, a] 2 x 6 = 12): c, 1 pad; a + b
    assert batch["input_ids"].tolist() == [[31, 32, 33, 34, 0], [11, 12, 13, 21, 22]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 3, 0], [0, 1, 2, 0, 1]]
    assert batch["segment_ids"].tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 2, 2]]
    assert batch["labels"].tolist() == [
        [IGNORE, IGNORE, 33, 34, IGNORE],
        [IGNORE, IGNORE, 13, IGNORE, 22],
    ]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 0], [1] * 5]
    mask = block_causal(torch.tensor([[1, 1, 2, 0]]))[0, 0].int().tolist()
    assert mask == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]


def test_a_packed_example_has_the_logits_and_loss_it_has_alone(trainer):
    """The test that proves the mask: each example packed with others gets, at its tokens, the
    logits it gets alone (positions from 0), so the packed loss and gradients are the
    unpacked ones."""
    model, task, pad = trainer.model, trainer.task, trainer.pad_id
    examples = trainer.examples["train"][:8]
    packed = collate_packed(examples, pad, trainer.recipe.max_length)
    assert packed["input_ids"].shape[0] < len(examples)  # really packed: several per row
    model.eval()
    with torch.no_grad():
        logits = logits_of(model, packed)
        naive = model(input_ids=packed["input_ids"], use_cache=False).logits  # one causal row
    seen_second = False
    for r, seg in enumerate(packed["segment_ids"]):
        start = 0
        for k in range(1, int(seg.max()) + 1):
            n = int((seg == k).sum())
            row_ids = packed["input_ids"][r, start : start + n].tolist()
            e = next(e for e in examples if e["input_ids"] == row_ids)
            with torch.no_grad():
                alone = logits_of(model, collate([e], pad))[0]
            torch.testing.assert_close(logits[r, start : start + n], alone, atol=1e-5, rtol=1e-5)
            if start > 0:  # without the block mask, a later example sees the earlier ones
                assert (naive[r, start : start + n] - alone).abs().max() > 1e-3
                seen_second = True
            start += n
    assert seen_second
    with torch.no_grad():
        alone_sum = sum(float(loss_sum(model, collate([e], pad), task)) for e in examples)
        assert float(loss_sum(model, packed, task)) == pytest.approx(alone_sum, rel=1e-5)
    got = accumulated_gradients(model, [packed], task)
    want = accumulated_gradients(model, [collate(examples, pad)], task)
    for name, grad in want.items():
        torch.testing.assert_close(got[name], grad, atol=1e-6, rtol=1e-4)


def test_packing_fills_batches_with_tokens_not_padding(trainer):
    examples, pad = trainer.examples["train"], trainer.pad_id
    indices = list(range(32))
    plain = micro_batches(examples, indices, 8, pad)
    packed = micro_batches(examples, indices, 8, pad, pack_length=trainer.recipe.max_length)
    tokens = sum(len(examples[i]["input_ids"]) for i in indices)

    def real(batches):
        return sum(int(b["attention_mask"].sum()) for b in batches)

    def cells(batches):
        return sum(b["input_ids"].numel() for b in batches)

    assert real(plain) == real(packed) == tokens  # the same examples, the same tokens
    # Tokens per batch cell rise: fewer rows, fewer pad tokens.
    assert sum(len(b["input_ids"]) for b in packed) < len(indices)
    assert cells(packed) - tokens < cells(plain) - tokens
    assert tokens / cells(packed) > tokens / cells(plain)
    assert all(b["input_ids"].shape[1] <= trainer.recipe.max_length for b in packed)
    assert sum(int((b["labels"] != IGNORE).sum()) for b in packed) == sum(
        int((b["labels"][:, 1:] != IGNORE).sum()) for b in plain
    )  # the same targets: the loss is normalized alike


def test_packed_training_matches_unpacked_without_dropout(data, tmp_path):
    """Same examples per step, same loss: with dropout off, three steps packed and unpacked
    give the same losses and weights to float tolerance (not bit for bit: other shapes)."""
    runs = {}
    for packing in (False, True):
        spec = causal_spec(dropout=0.0, packing=packing)
        t = Trainer(spec, data, tmp_path / str(packing), root=REPO, stream=io.StringIO())
        losses = [t.train_step()["loss"] for _ in range(3)]
        runs[packing] = (losses, t.model.state_dict())
    assert runs[True][0] == pytest.approx(runs[False][0], rel=1e-5)
    for name, weight in runs[False][1].items():
        torch.testing.assert_close(runs[True][1][name], weight, atol=1e-5, rtol=1e-4)
    assert run_id(causal_spec(packing=True)) != run_id(causal_spec())
    assert run_id(causal_spec(packing=False)) == run_id(causal_spec())


def test_packing_is_refused_in_one_line_for_a_classifier(data, tmp_path):
    spec = tiny_spec(packing=True)  # bert sequence_classification
    with pytest.raises(
        CampaignError, match=r"^train\.packing: packs causal_lm, generation examples only"
    ) as e:
        Trainer(spec, data, tmp_path, root=REPO, stream=io.StringIO())
    assert "\n" not in str(e.value)
    with pytest.raises(
        CampaignError, match=r"^train\.packing: packs causal_lm, generation examples only"
    ):
        PHASE.check_params({"model": spec["model"], "train": spec["train"]})  # at validation
    with pytest.raises(CampaignError, match=r"^train\.packing: expected true or false"):
        Recipe.from_spec({**spec["train"], "packing": "yes"})


def test_an_attention_that_ignores_the_mask_is_refused(trainer):
    model = trainer.model
    check_packing(model, "causal_lm", "cpu")  # the tiny gpt2 (sdpa) keeps examples apart
    saved = model.config._attn_implementation
    try:
        model.config._attn_implementation = "flash_attention_2"
        with pytest.raises(CampaignError, match=r"^train\.packing: attention implementation"):
            check_packing(model, "causal_lm", "cpu")
    finally:
        model.config._attn_implementation = saved
