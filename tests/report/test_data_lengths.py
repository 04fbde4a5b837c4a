"""The data section of a generation campaign: per split, the records, the prompt and response
lengths in tokens of the runs' tokenizer and template, and the share of answers each
train.max_length cuts, in place of the records per label (a free-form task has none)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from genkit import tiny_tokenizer
from trainkit import write_conversations

from campaign.data import conversations as conv
from campaign.data.section import data_figure, lengths_figure, render_data
from campaign.report.render import ReportInputs

# genkit's tokenizer is word-level: a prompt of w words is w + 2 tokens with the plain template
# ("User:" and the generation prompt "Assistant:"), a response of w words w + 1 (its EOS).
SPLITS = {
    "train": [("what city", "one"), ("what is red", "red blue"),
              ("what is the cat", "the cat sat on a")],
    "validation": [("is it red", "no"), ("what", "yes")],
    "test": [("what is the dog", "the dog ran")],
}  # fmt: skip
MODEL = {
    "task": "generation",
    "chat_template": "none",
    "generation": {"metric": "token_f1", "max_new_tokens": 4, "batch_size": 2},
}


def campaign_files(root, max_lengths=(9, 40)) -> dict:
    """A finished generation campaign's files as the data section reads them: the manifest,
    the privacy report, the split files and one run per train.max_length (its spec.json and
    its model folder with the tokenizer it saved)."""
    inputs = {"run_models": [], "run_specs": []}
    ids = []
    for split, pairs in SPLITS.items():
        talks = [conv.from_prompt_response(p, r) for p, r in pairs]
        names = [f"{split}{i}" for i in range(len(pairs))]
        ids += names
        inputs[f"split_{split}"] = write_conversations(root, split, names, talks)
    for i, length in enumerate(max_lengths):
        run = root / "runs" / f"run-{i}"
        tiny_tokenizer().save_pretrained(run / "model")
        spec = {"model": MODEL, "train": {"max_length": length}, "seed": 1}
        (run / "spec.json").write_text(json.dumps(spec))
        inputs["run_models"].append(run / "model")
        inputs["run_specs"].append(run / "spec.json")
    pd.DataFrame(
        {"id": ids, "source": "talks.jsonl", "licence": "CC0-1.0", "label": conv.UNSTRATIFIED}
    ).to_parquet(root / "manifest.parquet")
    privacy = {"kinds": {"email": {"records": 0, "findings": 0}}, "n_flagged": 0, "n_records": 6}
    (root / "privacy.json").write_text(json.dumps(privacy))
    return inputs | {"manifest": [root / "manifest.parquet"], "privacy": [root / "privacy.json"]}


def test_a_generation_campaign_shows_token_lengths_per_split_not_labels(tmp_path):
    section = render_data(ReportInputs(campaign_files(tmp_path)))
    assert section.lines[0] == "6 records from 1 source(s), train 3, validation 2, test 1."
    assert "labels" not in section.lines[0]
    table = dict(section.tables)["Tokens per split (prompt, response)"].set_index("split")
    # Train prompts of 2, 3 and 4 words: 4, 5, 6 tokens; responses of 1, 2, 5 words: 2, 3, 6.
    train = table.loc["train"]
    assert (train["records"], train["measured"]) == (3, 3)
    assert (train["prompt_median"], train["prompt_max"]) == (5.0, 6)
    assert (train["response_median"], train["response_max"]) == (3.0, 6)
    assert train["prompt_p95"] == pytest.approx(5.9)
    # The longest conversation is 6 + 6 = 12 tokens: max_length 9 cuts its answer (1 of 3),
    # the other run's 40 cuts none; a column per max_length the runs train with.
    assert train["truncated_at_9"] == pytest.approx(1 / 3) and train["truncated_at_40"] == 0.0
    assert table.loc["validation", "truncated_at_9"] == 0.0
    assert table.loc["test", ["prompt_max", "response_max"]].tolist() == [6, 4]
    assert section.lines[-3] == (
        "train: prompts 5 tokens median, 6 p95, 6 max; responses 3 median, 6 p95, 6 max; answers "
        "cut: 33.3% at max_length 9, 0.0% at max_length 40."
    )
    # The figure draws the lengths (not records per label).
    draw, args = section.figure
    assert draw is lengths_figure
    fig = draw(*args)
    assert fig.axes[0].get_ylabel() == "tokens"


def test_before_a_run_finished_the_section_keeps_the_records_per_label(tmp_path):
    inputs = campaign_files(tmp_path)
    section = render_data(ReportInputs(inputs | {"run_models": [], "run_specs": []}))
    assert section.figure[0] is data_figure and section.lines[0].endswith("1 labels.")
