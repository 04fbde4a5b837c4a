"""A generative campaign end to end, run once by Snakemake and shared by the session: a tiny
from-config Llama with grouped-query attention, a conversational `messages` dataset, two seeds
of a small lr factor, the retrieval floor (the zero-shot floor is skipped for a from_config
model, with the reason) and two variants of the control run: fp32 and the kv_corrupt canary, whose
cache corrupts values. Asserted: the verdict weighs the floors,
per-item scores in [0, 1] reach the statistics, the report shows escaped samples and the
generation metric, and the broken cache is rejected on what it generates."""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import FIXTURES, campaign, copy_project, session_project, snakemake

THINGS = ["cat", "dog", "mat", "rug", "fox", "owl", "cow", "pig", "hen", "bee", "elk", "ant"]
COLORS = ["red", "blue", "green"]
SYSTEM = "Answer in a few words."
# An answer with markup: the report must show it as text (escaped), never as HTML.
MARKUP = "<b>bold</b> & more"


def conversations() -> list[dict]:
    """120 short question -> answer records: the answer is a function of the thing asked about
    (learnable), every fourth one a multi-turn conversation with a system message."""
    rows = []
    for i in range(120):
        thing, n = THINGS[i % len(THINGS)], i // len(THINGS)
        color = COLORS[(i % len(THINGS)) % len(COLORS)]
        q, a = f"what color is the {thing} number {n}?", f"the {thing} is {color}."
        talk = [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        if i % 4 == 0:
            talk = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": "say hello"},
                {"role": "assistant", "content": "hello."},
                *talk,
            ]
        if i == 5:
            talk[-1]["content"] = MARKUP
        rows.append({"id": f"q{i:03d}", "messages": talk, "who": f"{thing}-{n % 5}"})
    return rows


def params() -> dict:
    p = yaml.safe_load((FIXTURES / "tiny_params.yaml").read_text())
    p["campaign"]["name"] = "tiny-generation"
    p["data"]["sources"] = [
        {"path": "data/raw/talks.jsonl", "format": "jsonl", "licence": "CC0-1.0",
         "origin": "tests/workflow/test_generation_e2e.py"}
    ]  # fmt: skip
    p["data"]["fields"] = {
        "id": "id", "text": None, "label": None, "messages": "messages", "group": "who",
        "timestamp": None,
    }  # fmt: skip
    p["model"] = {
        "task": "generation",
        "source": "from_config",
        "chat_template": "none",
        "generation": {"metric": "token_f1", "max_new_tokens": 10, "batch_size": 8},
        "config": {
            "architecture": "llama", "hidden_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
            "max_position_embeddings": 128, "dropout": 0.0,
        },
        "tokenizer": {"source": "train_split", "vocab_size": 300, "min_frequency": 1,
                      "lowercase": False},
    }  # fmt: skip
    # The questions differ by a word or two: near-duplicates by design, not copies to unite.
    p["split"]["dedup"]["near"]["threshold"] = 0.95
    p["split"]["assign"] = "auto"
    # Enough steps for "the <thing> is <color>." to be learnt (token F1 well above 0), so that a
    # broken cache has something to lose.
    p["train"].update(max_steps=120, max_length=112, lr=1e-2, warmup_steps=5, micro_batch=16)
    # The overfit check runs and is reported; the campaign under test is the join, not whether
    # 400 steps of a 2-layer model reproduce every answer. The memory check is run and reported
    # (tests/tasks/test_generation_train.py holds its estimate to the measured bytes).
    p["preflight"]["blocking"] = [
        c for c in p["preflight"]["blocking"] if c not in ("overfit", "memory")
    ]
    p["train"].update(eval_every=60, checkpoint_every=60)
    p["ablation"]["factors"] = {"train": {"lr": [1e-2, 3e-3]}}
    # kv_int4 is judged the same way in tests/quantize (its quanto kernels are slow on a CPU)
    p["quantization"]["variants"] = ["fp32", "kv_corrupt"]
    p["evaluation"]["floor"] = ["retrieval", "zero_shot"]
    del p["evaluation"]["metric"]  # decided on model.generation.metric, its one metric key
    p["evaluation"]["floor_changes"] = False
    return p


@pytest.fixture(scope="session")
def generation_campaign(tmp_path_factory) -> Path:
    def build(project: Path) -> str:
        copy_project(project, params=None)
        (project / "params.yaml").write_text(yaml.safe_dump(params(), sort_keys=False))
        raw = project / "data" / "raw" / "talks.jsonl"
        raw.write_text("".join(json.dumps(r) + "\n" for r in conversations()))
        snakemake(project, timeout=1500)
        return "finished\n"

    return session_project(tmp_path_factory, "generation_campaign", build)


def test_the_verdict_weighs_the_floors_on_generated_scores(generation_campaign):
    decisions = json.loads((generation_campaign / "results/evaluation/decisions.json").read_text())
    assert decisions["metric"] == "token_f1"
    floors = [d for d in decisions["skipped_variants"] if d["variant"].startswith("floor/")]
    # A from_config model has no pretrained base to prompt: the zero-shot floor says so.
    assert [f["variant"] for f in floors] == ["floor/zero_shot"]
    assert "from_config" in floors[0]["reason"]
    comparisons = pd.read_parquet(generation_campaign / "results/evaluation/comparisons.parquet")
    against = comparisons[(comparisons.kind == "floor") & (comparisons.split == "validation")]
    assert set(against.reference) == {"floor/retrieval"} and len(against) == 2
    # Each answer depends only on what is asked about: looking up the nearest training prompt
    # answers every item, and no fine-tuned cell is shown above it, so the floor is kept.
    assert decisions["verdict"]["kind"] == "floor", decisions["verdict"]
    assert decisions["verdict"]["keep"] == "floor/retrieval", decisions["verdict"]


def test_per_item_generated_scores_are_in_zero_one(generation_campaign):
    runs = sorted((generation_campaign / "results/runs").glob("*/predictions_validation.parquet"))
    assert len(runs) == 4  # 2 lr levels x 2 seeds
    for path in runs:
        frame = pd.read_parquet(path)
        # what was generated, no score: the evaluation scores the texts by the metric
        assert "score" not in frame.columns and (frame["tokens"] > 0).all()
    metrics = pd.read_parquet(generation_campaign / "results/evaluation/metrics.parquet")
    assert {"token_f1", "perplexity"} <= set(metrics.metric)
    assert "accuracy" not in set(metrics.metric)


def test_the_broken_cache_is_rejected_on_what_it_generates(generation_campaign):
    comparisons = pd.read_parquet(generation_campaign / "results/evaluation/comparisons.parquet")
    quantized = comparisons[(comparisons.kind == "quantized") & (comparisons.split == "validation")]
    by_variant = {row.subject.rpartition("/")[2]: row for row in quantized.itertuples()}
    assert by_variant["kv_corrupt"].decision == "canary rejected", by_variant["kv_corrupt"]
    assert by_variant["kv_corrupt"].estimate < 0
    result = json.loads(
        next((generation_campaign / "results/quantize").glob("*/fp32/result.json")).read_text()
    )
    # the full-precision cache measured at the batch size used is the analytic estimate
    assert result["kv_cache"]["bytes"] == result["kv_cache"]["estimate_fp32"] > 0
    assert by_variant["fp32"].decision != "reject"


def test_the_report_shows_the_samples_escaped_and_the_generation_metric(generation_campaign):
    page = (generation_campaign / "results/report/index.html").read_text()
    assert '<section id="samples"><h2>Generated samples</h2>' in page
    assert "token_f1" in page and "perplexity" in page
    # an answer with markup is shown as text wherever it appears, never as HTML
    assert "<b>bold</b>" not in page
    samples = pd.read_parquet(generation_campaign / "results/evaluation/errors/samples.parquet")
    shown = samples[samples.split == "validation"].prediction.iloc[0]
    assert html.escape(shown) in page
    index = pd.read_parquet(generation_campaign / "results/index.parquet")
    runs = index[index.kind == "run"]
    assert (runs.metric == "token_f1").all() and (runs.validation_perplexity > 1).all()


def _pooled(project: Path, split: str) -> dict[str, pd.Series]:
    """{cell: each item's token F1 averaged over the cell's seeds}, from the runs' files."""
    return {cell: seeds.mean(axis=1) for cell, seeds in _per_seed(project, split).items()}


def _per_seed(project: Path, split: str) -> dict[str, pd.DataFrame]:
    """{cell: each item's token F1 at each of the cell's seeds (items x runs)}."""
    from campaign.tasks.generation.text_scores import score_items

    metrics = pd.read_parquet(project / "results/evaluation/metrics.parquet")
    runs = metrics[metrics.kind == "run"].drop_duplicates("variant")
    out = {}
    for cell, group in runs.groupby("cell"):
        scores = []
        for run in group.variant:
            frame = pd.read_parquet(project / f"results/runs/{run}/predictions_{split}.parquet")
            got = score_items("token_f1", list(frame.prediction), list(frame.reference))
            scores.append(pd.Series(got, index=frame.id.astype(str)))
        out[cell] = pd.concat(scores, axis=1)
    return out


def test_error_analysis_pools_each_cell_and_lists_what_the_kept_option_changed(
    generation_campaign,
):
    errors = generation_campaign / "results/evaluation/errors"
    pooled = _pooled(generation_campaign, "validation")
    worst = pd.read_parquet(errors / "worst_cells.parquet")
    worst = worst[worst.split == "validation"]
    assert set(worst.cell) == set(pooled) and (worst.seeds == 2).all()
    for cell, rows in worst.groupby("cell"):
        expected = pooled[cell].loc[list(rows.id)]
        assert np.allclose(rows.score, expected), cell
        # the lowest pooled scores of the cell, lowest first: no item left out scores lower
        assert list(rows.score) == sorted(rows.score)
        assert pooled[cell].drop(list(rows.id)).min() >= rows.score.max() - 1e-12
    decisions = json.loads((generation_campaign / "results/evaluation/decisions.json").read_text())
    changes = pd.read_parquet(errors / "kept_changes.parquet")
    changes = changes[changes.split == "validation"]
    keep = decisions["verdict"]["keep"]
    floor = pd.read_parquet(
        generation_campaign / f"results/evaluation/{keep}/predictions_validation.parquet"
    )
    from campaign.tasks.generation.text_scores import score_items

    kept = pd.Series(
        score_items("token_f1", list(floor.prediction), list(floor.reference)),
        index=floor.id.astype(str),
    )
    # fixed: the kept option at least 0.5 above every seed of the control; broken: below
    control = _per_seed(generation_campaign, "validation")["train.lr=0.01"].loc[kept.index]
    fixed = set(kept.index[(kept - control.max(axis=1)).round(12) >= 0.5])
    broken = set(kept.index[(control.min(axis=1) - kept).round(12) >= 0.5])
    assert fixed | broken, "the floor and the control agree on every item: nothing to list"
    assert set(changes.id) == fixed | broken
    assert set(changes.kept) == {keep} and set(changes.control) == {"train.lr=0.01"}
    by_id = changes.set_index("id")
    for item in fixed | broken:
        assert by_id.loc[item, "change"] == ("fixed" if item in fixed else "broken")
    page = (generation_campaign / "results/report/index.html").read_text()
    assert "Lowest-scored items per cell, pooled over seeds (validation)" in page
    fixed = int((changes.change == "fixed").sum())
    assert f"{fixed} items fixed, {len(changes) - fixed} broken" in page


def test_a_generation_run_reproduces_bit_for_bit(generation_campaign):
    """A trained run's outputs, its generated predictions included, come back bit for bit: the
    predictions hold what was generated and scored, not how long it took (a wall-time column
    made every generation run DIFFERENT, and changed the keys of what reads it)."""
    store = generation_campaign / ".campaign" / "store"
    entries = {p.name: json.loads((p / "entry.json").read_text()) for p in store.iterdir()}
    key = min(k for k, e in entries.items() if e["stage"] == "train")
    out = campaign(generation_campaign, "reproduce", key, check=False, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "reproduced bit for bit" in out.stdout
    assert "predictions_validation" in out.stdout
