"""train.packing for the generation task: conversations of different lengths, multi-turn ones
among them, packed into shared rows of a tiny from-config Llama (grouped-query attention, rotary
positions) each keep to themselves: the packed loss on the assistant's tokens and its gradients
are the unpacked ones, under SDPA and eager attention alike, and a packed run (full or LoRA)
trains as the unpacked one does."""

from __future__ import annotations

import io

import pytest
import torch
from trainkit import QA_PAIRS, REPO, tiny_generation_spec, write_conversations

from campaign.data import conversations as conv
from campaign.train import PHASE, Trainer, read_data
from campaign.train.batches import IGNORE, collate, collate_packed
from campaign.train.packing import packed_mask
from campaign.train.steps import accumulated_gradients, logits_of, loss_sum

pytestmark = pytest.mark.usefixtures("one_thread")

MAX_LENGTH = 128
# Float32 on CPU: the packed loss sum and logits against the unpacked ones.
LOSS_RTOL = 1e-5
LOGITS_ATOL = 1e-5


def _talks() -> list[list[dict]]:
    """Single-turn pairs, a system message, and multi-turn conversations (every assistant turn a
    target), from a few tokens to several times the shortest."""
    pairs = [conv.from_prompt_response(q, a) for q, a in QA_PAIRS]
    multi = [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Capital of Peru?"},
        {"role": "assistant", "content": "Lima."},
        {"role": "user", "content": "Which tool lists files? And which tool copies files?"},
        {"role": "assistant", "content": "ls and cp"},
    ]
    longer = [
        {"role": "user", "content": "Capital of France? Capital of Italy? Capital of Spain?"},
        {"role": "assistant", "content": "Paris. Rome. Madrid."},
        {"role": "user", "content": "Capital of Peru?"},
        {"role": "assistant", "content": "Lima."},
        {"role": "user", "content": "Which tool copies files?"},
        {"role": "assistant", "content": "cp"},
    ]
    return pairs + [multi, longer, conv.from_prompt_response("Which tool?", "ls")] + pairs[:3]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("splits")
    talks = _talks()
    ids = [f"t{i}" for i in range(len(talks))]
    return read_data(
        {
            "train": write_conversations(folder, "train", ids, talks),
            "validation": write_conversations(folder, "validation", ids[:4], talks[:4]),
            "test": write_conversations(folder, "test", ids[4:8], talks[4:8]),
        }
    )


def _spec(packing: bool, **train) -> dict:
    settings = dict(max_length=MAX_LENGTH, micro_batch=6, max_steps=8, eval_every=8)
    return tiny_generation_spec(packing=packing, **{**settings, **train})


@pytest.fixture(scope="module")
def trainer(data, tmp_path_factory):
    return Trainer(_spec(True), data, tmp_path_factory.mktemp("w"), root=REPO, stream=io.StringIO())


def _segments(packed: dict, examples: list[dict]):
    """(row, start, length, example) of every conversation in the packed rows."""
    for r, seg in enumerate(packed["segment_ids"]):
        start = 0
        for k in range(1, int(seg.max()) + 1):
            n = int((seg == k).sum())
            ids = packed["input_ids"][r, start : start + n].tolist()
            yield r, start, n, next(e for e in examples if e["input_ids"] == ids)
            start += n


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_a_packed_conversation_has_the_logits_loss_and_gradients_it_has_alone(trainer, attention):
    """Every conversation packed with others gets, at its tokens, the logits it has alone; so the
    loss on the assistant's tokens and the gradients equal the unpacked batch's. Without the
    block mask a later conversation's logits change. The restarting positions are what Llama's
    rotary embedding receives (a rotary score depends on the distance between two positions only,
    so under the block mask positions running on would give the same logits; positions that are
    wrong within a conversation do not)."""
    model, task, pad = trainer.model, trainer.task, trainer.pad_id
    examples = trainer.examples["train"][:12]
    assert any(len(e["example"].labels) > 30 for e in examples)  # multi-turn ones among them
    packed = collate_packed(examples, pad, MAX_LENGTH)
    assert packed["input_ids"].shape[0] < len(examples) / 2  # really packed
    saved = model.config._attn_implementation
    model.config._attn_implementation = attention
    try:
        assert packed_mask(model, packed["segment_ids"]).dtype == (
            torch.bool if attention == "sdpa" else torch.float32
        )
        model.eval()
        with torch.no_grad():
            logits = logits_of(model, packed)
            wrong = logits_of(model, {**packed, "position_ids": packed["position_ids"] * 0})
            naive = model(input_ids=packed["input_ids"], use_cache=False).logits
        later, worst = 0, 0.0
        for r, start, n, e in _segments(packed, examples):
            with torch.no_grad():
                alone = logits_of(model, collate([e], pad))[0]
            worst = max(worst, float((logits[r, start : start + n] - alone).abs().max()))
            if start > 0:
                later += 1
                assert (naive[r, start : start + n] - alone).abs().max() > 1e-3
            assert (wrong[r, start + 1 : start + n] - alone[1:]).abs().max() > 1e-3
        assert later >= 3 and worst <= LOGITS_ATOL, worst
        seen = []
        hook = model.model.rotary_emb.register_forward_pre_hook(
            lambda _module, args, kwargs: seen.append(kwargs.get("position_ids", args[-1])),
            with_kwargs=True,
        )
        try:
            with torch.no_grad():
                logits_of(model, packed)
        finally:
            hook.remove()
        assert len(seen) == 1 and torch.equal(seen[0], packed["position_ids"])
        # The targets are the assistant's tokens, the same ones unpacked.
        unpacked = collate(examples, pad)
        assert (
            int((packed["labels"] != IGNORE).sum())
            == int((unpacked["labels"][:, 1:] != IGNORE).sum())
            == sum(e["example"].targets for e in examples)
        )
        with torch.no_grad():
            got, want = float(loss_sum(model, packed, task)), float(loss_sum(model, unpacked, task))
        assert got == pytest.approx(want, rel=LOSS_RTOL)
        grads = accumulated_gradients(model, [packed], task)
        for name, grad in accumulated_gradients(model, [unpacked], task).items():
            torch.testing.assert_close(grads[name], grad, atol=1e-6, rtol=1e-4)
    finally:
        model.config._attn_implementation = saved


def test_a_packed_generation_run_validates_trains_and_matches_the_unpacked_run(data, tmp_path):
    """train.packing: true with model.task generation passes the params check; the built-in loop
    packs (fewer rows than examples), its loss falls, and step for step it equals the unpacked
    run's (dropout off: the same examples, the same loss) to float tolerance."""
    spec = _spec(True)
    PHASE.check_params({"model": spec["model"], "train": spec["train"]})
    runs = {}
    for packing in (False, True):
        t = Trainer(_spec(packing), data, tmp_path / str(packing), root=REPO, stream=io.StringIO())
        r = t.recipe
        first = t.order.permutation(0)[: r.micro_batch]
        rows = collate_packed([t.examples["train"][i] for i in first], t.pad_id, r.max_length)
        if packing:
            assert rows["input_ids"].shape[0] < r.micro_batch
        runs[packing] = [t.train_step()["loss"] for _ in range(8)]
    assert runs[True] == pytest.approx(runs[False], rel=1e-4)
    assert runs[True][-1] < 0.8 * runs[True][0]


def test_a_packed_lora_run_matches_the_unpacked_one(data, tmp_path):
    """LoRA adapters (peft) take the packed rows' mask and positions through to the Llama: four
    steps packed and unpacked give the same losses to float tolerance."""
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    runs = {}
    for packing in (False, True):
        spec = _spec(packing, lora=lora, lr=1e-2)
        t = Trainer(spec, data, tmp_path / str(packing), root=REPO, stream=io.StringIO())
        runs[packing] = [t.train_step()["loss"] for _ in range(4)]
    assert runs[True] == pytest.approx(runs[False], rel=1e-5)
    assert runs[True][-1] < runs[True][0]
