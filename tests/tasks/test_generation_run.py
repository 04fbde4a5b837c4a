"""The generation task end to end on a tiny from-config Llama with grouped-query attention:
overfit a few conversations with the training loop's own loss, reproduce their responses by
greedy generation through the shared engine, score them per item, and get the same outputs from
the saved and reloaded model."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from campaign.core.errors import CampaignError
from campaign.data import conversations as conv
from campaign.tasks.generation import chat as gen
from campaign.tasks.generation.text_scores import score_items
from campaign.train import models

pytestmark = pytest.mark.usefixtures("one_thread")

PAIRS = [
    ("What is the capital of France?", "Paris."),
    ("Name a prime number above ten.", "Eleven is one."),
    ("Which package gives the ls command?", "coreutils"),
    ("Translate 'chat' from French.", "cat"),
]
TALKS = [conv.from_prompt_response(p, r) for p, r in PAIRS]
CONFIG = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    max_position_embeddings=128,
    dropout=0.0,
)


def _tiny(seed: int):
    import transformers as tf

    texts = [conv.dedup_text(t) for t in TALKS] + ["User: System: Assistant:"]
    tok = models.train_tokenizer(texts, "llama", vocab_size=300, min_frequency=1, lowercase=False)
    torch.manual_seed(seed)
    return tok, tf.LlamaForCausalLM(models.llama_config(CONFIG, tok))


@pytest.fixture(scope="module")
def overfitted(one_thread):
    tok, model = _tiny(seed=3)
    result = gen.overfit(model, tok, gen.PLAIN_TEMPLATE, TALKS, steps=80, lr=3e-3, seed=3)
    return tok, model, result


def test_overfitting_the_sample_reproduces_every_response(overfitted):
    _tok, model, result = overfitted
    assert model.config.num_key_value_heads == 2 < model.config.num_attention_heads
    assert result.losses[-1] < result.losses[0] / 10
    assert result.passed, result


def test_the_overfit_check_can_fail():
    tok, model = _tiny(seed=3)
    untrained = gen.overfit(model, tok, gen.PLAIN_TEMPLATE, TALKS, steps=1, lr=1e-5, seed=3)
    assert not untrained.passed


def _split_file(tmp_path, ids, talks):
    path = tmp_path / "validation.parquet"
    pd.DataFrame({"id": ids, "messages": [conv.dump_messages(t) for t in talks]}).to_parquet(path)
    return [path]


def test_predictions_are_per_item_in_split_order_with_their_scores(overfitted, tmp_path):
    tok, model, _ = overfitted
    order = [2, 0, 3, 1]
    ids = [f"item-{i}" for i in order]
    split = gen.read_conversations(_split_file(tmp_path, ids, [TALKS[i] for i in order]), "x")
    frame, out = gen.predict(
        model,
        tok,
        gen.PLAIN_TEMPLATE,
        split,
        max_new_tokens=12,
        batch_size=3,
    )
    assert tuple(frame.columns) == gen.PREDICTION_COLUMNS
    assert frame["id"].tolist() == ids
    assert frame["prediction"].tolist() == [PAIRS[i][1] for i in order]
    assert frame["stopped_at_eos"].all()
    assert out.kv_cache_bytes == out.kv_cache_estimate > 0
    # a wrong reference scores 0 on that item only (token F1 gives partial credit)
    wrong = [t[:-1] + [{"role": "assistant", "content": "Lyon."}] for t in TALKS[:2]]
    split = gen.read_conversations(_split_file(tmp_path, ["a", "b"], wrong), "x")
    frame, _ = gen.predict(model, tok, gen.PLAIN_TEMPLATE, split, max_new_tokens=12, batch_size=2)
    scores = score_items("token_f1", list(frame["prediction"]), list(frame["reference"]))
    assert scores.tolist() == [0.0, 0.0]


def test_save_reload_generate_gives_the_same_outputs(overfitted, tmp_path):
    tok, model, _ = overfitted
    models.save_model(model, tok, tmp_path / "model")
    again = models.load_run_model(tmp_path / "model", "causal_lm")
    tok_again = models.load_tokenizer(tmp_path / "model", "causal_lm")
    split = gen.Conversations([str(i) for i in range(4)], TALKS)
    kwargs = dict(max_new_tokens=12, batch_size=4)
    before, _ = gen.predict(model, tok, gen.PLAIN_TEMPLATE, split, **kwargs)
    after, _ = gen.predict(again, tok_again, gen.PLAIN_TEMPLATE, split, **kwargs)
    assert after["prediction"].tolist() == before["prediction"].tolist()


def test_a_split_file_without_conversations_is_refused(tmp_path):
    path = tmp_path / "train.parquet"
    pd.DataFrame({"id": ["1"], "text": ["t"], "label": ["l"]}).to_parquet(path)
    with pytest.raises(CampaignError, match=r"input 'train': .* has no messages column"):
        gen.read_conversations([path], "train")
    path2 = tmp_path / "bad.parquet"
    pd.DataFrame({"id": ["7"], "messages": ['[{"role": "user", "content": "q"}]']}).to_parquet(
        path2
    )
    with pytest.raises(CampaignError, match=r"bad.parquet: record 7: the last message"):
        gen.read_conversations([path2], "train")
