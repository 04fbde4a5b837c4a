"""The tokenizers a from_config run trains, as `campaign init` sizes train.max_length with them:
a tokenizer trained on a few dozen rows cuts words much finer than a whitespace count guesses,
and a length sized by the guess cut the run's answers (its own preflight refused it)."""

from __future__ import annotations

from typing import Any

from campaign.core.tasks import module_of


def from_config_architecture(task: str) -> str:
    """The small from_config model's family: the task's (a Llama for generation, with
    grouped-query attention; GPT-2 for label-scoring causal_lm; BERT for a classifier)."""
    return module_of(task).init_family()


def from_config_tokenizer(template: dict, task: str) -> dict:
    """model.tokenizer of a from_config model: trained on the train split, with the template's
    settings (generation keeps case: an answer's capitals are part of it)."""
    tokenizer = dict(template["model"].get("tokenizer") or {})
    return {
        "source": "train_split",
        "vocab_size": tokenizer.get("vocab_size", 2000),
        "min_frequency": tokenizer.get("min_frequency", 2),
        "lowercase": tokenizer.get("lowercase", True) and module_of(task).init_lowercase(),
    }


def run_tokenizers(
    texts: list[str], template: dict, task: str, n_train: int
) -> list[tuple[Any, int]]:
    """[(tokenizer, n)]: the tokenizers a from_config run trains (campaign.train's
    make_tokenizer), each on the first n `texts` (the records' training texts, in file order):
    the run's own on `n_train` of them (the train split's share), and the preflight's on its sample
    (preflight.sample.train_examples of them). Fewer texts train a coarser tokenizer, whose
    examples are longer, and the preflight refuses a run whose sample answers are cut; each
    tokenizer's lengths are measured on the texts it was trained on."""
    from campaign.train import make_tokenizer

    spec = {
        "task": task,
        # positions set only the tokenizer's model_max_length: none warns on a long text here
        "config": {
            "architecture": from_config_architecture(task),
            "max_position_embeddings": 10**9,
        },
        "tokenizer": from_config_tokenizer(template, task),
    }
    sample = min(n_train, int(template["preflight"]["sample"]["train_examples"]))
    return [(make_tokenizer(spec, texts[:n], None), n) for n in sorted({n_train, sample})]
