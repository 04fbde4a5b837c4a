"""The report's data facts for a generation campaign (Generation.report_data): per split, the
records, the prompt and response lengths in tokens as the runs see them, and the share of answers
train.max_length cuts.

Lengths are the runs' own: the tokenizer a run saved (results/runs/<run>/model), its template
(model.chat_template resolved on that tokenizer, chat.setup) and its tokenization piece by piece
(chat.encode, chat.prompt_ids; data.special_tokens: escape tokenizes a special token's string as
text). The prompt is what the model generates from (the template's generation prompt included);
the response, the assistant tokens training puts the loss on (its EOS included); an answer is
cut when train.max_length cuts one of those. A split of more than CAP records is measured on a
seeded sample of CAP (the table says how many were measured).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from campaign.tasks.generation import chat

CAP = 20_000  # records measured per split; more: a seeded sample of CAP
SEED = 0
UNBOUNDED = 10**9  # encode without a cut: the whole conversation's labels


def conversation_lengths(tokenizer, run: chat.Setup, messages: Sequence[dict]) -> tuple:
    """(prompt tokens, response tokens, the labels of the whole conversation) of one
    conversation, tokenized as the runs tokenize it."""
    whole = chat.encode(tokenizer, run.template, messages, UNBOUNDED, run.escape)
    prompt = chat.prompt_ids(tokenizer, run.template, messages, run.escape)
    return len(prompt), whole.targets, whole.labels


def split_rows(tokenizer, run: chat.Setup, splits: dict, max_lengths: Sequence[int]) -> list:
    """One row per split ({name: Conversations}): records, measured, prompt and response tokens
    (median, p95, max) and, per max_length, the share of measured answers it cuts."""
    rows = []
    for name, talks in splits.items():
        n = len(talks)
        picked = range(n)
        if n > CAP:
            picked = np.sort(np.random.default_rng(SEED).choice(n, size=CAP, replace=False))
        prompts, responses, cut = [], [], {m: 0 for m in max_lengths}
        for i in picked:
            p, r, labels = conversation_lengths(tokenizer, run, talks.messages[i])
            prompts.append(p)
            responses.append(r)
            for m in max_lengths:
                cut[m] += any(label != chat.IGNORE for label in labels[m:])
        measured = len(prompts)
        row = {"split": name, "records": n, "measured": measured}
        for what, values in (("prompt", prompts), ("response", responses)):
            values = np.asarray(values, dtype=np.float64)
            row |= {
                f"{what}_median": float(np.median(values)) if measured else float("nan"),
                f"{what}_p95": float(np.percentile(values, 95)) if measured else float("nan"),
                f"{what}_max": int(values.max()) if measured else 0,
            }
        for m in max_lengths:
            row[f"truncated_at_{m}"] = cut[m] / measured if measured else 0.0
        rows.append(row)
    return rows


def report_data(splits: dict[str, Path], model_folder: Path, specs: Sequence[dict], root: Path):
    """The data section's frame (split_rows) for the split files `splits`, with the tokenizer a
    run saved in `model_folder` and the runs' specs (results/runs/<run>/spec.json: the model
    spec of the first, every run's train.max_length)."""
    import pandas as pd

    from campaign.train import load_tokenizer

    tokenizer = load_tokenizer(model_folder, "generation")
    run = chat.setup(specs[0]["model"], tokenizer, root)
    max_lengths = sorted({int(s["train"]["max_length"]) for s in specs})
    talks = {name: chat.read_conversations([path], name) for name, path in splits.items()}
    return pd.DataFrame(split_rows(tokenizer, run, talks, max_lengths))
