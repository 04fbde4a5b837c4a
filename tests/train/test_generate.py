"""The generation engine (campaign.train.generate) on a tiny from-config Llama with GQA:
batching changes nothing in the greedy output, left padding is masked and positioned right,
EOS stops a sequence, and the cache's measured bytes equal the analytic estimate."""

from __future__ import annotations

import pytest
import torch
from genkit import tiny_llama, tiny_tokenizer

from campaign.core.errors import CampaignError
from campaign.train.generate import _left_pad, generate, length_batches

PROMPTS = [
    "the cat sat",
    "what is the name of a city",
    "one two",
    "red",
    "the dog ran on a red rug and it was blue",
    "yes no",
]


@pytest.fixture(scope="module")
def engine():
    tok = tiny_tokenizer()
    return tiny_llama(), tok, [tok.encode(p, add_special_tokens=False) for p in PROMPTS]


def test_batched_outputs_equal_one_prompt_at_a_time_and_transformers_generate(engine):
    model, tok, ids = engine
    batched = generate(model, tok, ids, max_new_tokens=8, batch_size=4, eos_token_ids=[2])
    single = generate(model, tok, ids, max_new_tokens=8, batch_size=1, eos_token_ids=[2])
    assert batched.new_tokens == single.new_tokens
    assert batched.texts == single.texts
    # The reference: transformers' own greedy loop, one prompt at a time, no padding.
    for row, got, eos in zip(ids, batched.new_tokens, batched.stopped_at_eos, strict=True):
        x = torch.tensor([row])
        out = model.generate(
            input_ids=x,
            attention_mask=torch.ones_like(x),
            max_new_tokens=8,
            do_sample=False,
            eos_token_id=2,
            pad_token_id=0,
        )[0, len(row) :].tolist()
        assert got == [t for t in out if t != 2][: len(got)]
        assert eos == (2 in out)
    assert len(batched.item_seconds) == len(PROMPTS)
    assert batched.tokens_per_s > 0


def test_outputs_come_back_in_input_order(engine):
    model, tok, ids = engine
    whole = generate(model, tok, ids, max_new_tokens=5, batch_size=3, eos_token_ids=[2])
    backwards = generate(model, tok, ids[::-1], max_new_tokens=5, batch_size=3, eos_token_ids=[2])
    assert backwards.new_tokens == whole.new_tokens[::-1]


def test_left_padding_and_length_grouping():
    ids, mask = _left_pad([[5, 6, 7], [9]], pad_id=0, device="cpu")
    assert ids.tolist() == [[5, 6, 7], [0, 0, 9]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert length_batches([5, 1, 3, 1, 9], 2) == [[1, 3], [2, 0], [4]]


def test_a_sequence_stops_at_eos_and_its_batch_mates_go_on(engine):
    model, tok, ids = engine
    free = generate(model, tok, ids, max_new_tokens=8, batch_size=6, eos_token_ids=[2])
    # Make prompt 1's third greedy token the "EOS": it stops there, the others are unchanged
    # unless they meet that token too.
    stop = free.new_tokens[1][2]
    cut = generate(model, tok, ids, max_new_tokens=8, batch_size=6, eos_token_ids=[2, stop])
    assert cut.stopped_at_eos[1]
    assert cut.new_tokens[1] == free.new_tokens[1][:2]
    for i, full in enumerate(free.new_tokens):
        expected = full[: full.index(stop)] if stop in full else full
        assert cut.new_tokens[i] == expected
        assert cut.stopped_at_eos[i] == (stop in full or free.stopped_at_eos[i])
    assert all(len(t) <= 8 for t in cut.new_tokens)


def test_kv_cache_bytes_measured_equal_the_analytic_estimate(engine):
    model, tok, ids = engine
    out = generate(model, tok, ids, max_new_tokens=4, batch_size=6, eos_token_ids=[2])
    longest = max(len(r) for r in ids)
    steps = max(len(t) + e for t, e in zip(out.new_tokens, out.stopped_at_eos, strict=True))
    # 2 (K, V) x 2 layers x 2 kv heads (GQA: not the 4 query heads) x head dim 8 x fp32,
    # for 6 sequences of the longest prompt plus every generated token but the last one.
    assert out.kv_cache_estimate == 2 * 2 * 2 * 8 * 4 * 6 * (longest + steps - 1)
    assert out.kv_cache_bytes == out.kv_cache_estimate


def test_bad_arguments_are_refused_with_a_clear_message(engine):
    model, tok, ids = engine
    with pytest.raises(CampaignError, match="prompt 1 is empty"):
        generate(model, tok, [[4], []], max_new_tokens=2, batch_size=2, eos_token_ids=[2])
    with pytest.raises(CampaignError, match="no EOS token"):
        generate(model, tok, ids, max_new_tokens=2, batch_size=2, eos_token_ids=[])
    with pytest.raises(CampaignError, match="batch_size"):
        generate(model, tok, ids, max_new_tokens=2, batch_size=0, eos_token_ids=[2])


def test_a_model_in_training_mode_generates_without_dropout_and_stays_in_training_mode():
    tok = tiny_tokenizer()
    model = tiny_llama()
    model.config.attention_dropout = 0.5  # would change outputs if the engine left it on
    ids = [tok.encode("the cat sat on a mat", add_special_tokens=False)]
    settings = {"max_new_tokens": 6, "batch_size": 1, "eos_token_ids": [2]}
    expected = generate(model, tok, ids, **settings).new_tokens
    model.train()
    assert generate(model, tok, ids, **settings).new_tokens == expected
    assert model.training
