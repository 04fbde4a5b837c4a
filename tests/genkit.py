"""A tiny from-config Llama-style model with grouped-query attention (random weights, seeded)
and a word-level tokenizer, for tests of generation: real transformers classes, small enough
that a batch of greedy steps takes milliseconds on a loaded CPU."""

from __future__ import annotations

WORDS = (
    "the cat dog sat ran on a mat rug red blue green one two three what is name city "
    "answer yes no and of to in it was"
).split()
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]


def tiny_tokenizer():
    """A word-level tokenizer over WORDS (ids 4..), with pad 0, bos 1, eos 2, unk 3."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(SPECIALS + WORDS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
    )


def tiny_llama(seed: int = 0, vocab_size: int | None = None):
    """A 2-layer Llama with 4 attention heads sharing 2 key/value heads (GQA), fp32, eval mode."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size or len(SPECIALS) + len(WORDS),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    # Random init gives nearly flat logits; a wider spread keeps greedy choices far from ties.
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    return model.eval()


# A planted per-item score, as a user metric (model.generation.metric: genkit.planted_score):
# tests that need given scores in [0, 1] write them into the generated text, and the evaluation,
# which scores every text itself, reads them back through the same metric path a user's takes.
PLANTED_METRIC = "genkit.planted_score"


def planted_text(text: str, score: float) -> str:
    return f"{text} [s={score!r}]"


def planted_score(prediction: str, reference: str) -> float:
    """The score planted_text wrote into the prediction; 0 for a text without one."""
    import re

    found = re.search(r"\[s=([^\]]+)\]$", prediction)
    return float(found.group(1)) if found else 0.0
