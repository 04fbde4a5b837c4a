"""The train stage on the generation task: a tiny from-config Llama (grouped-query attention),
full and LoRA, trained on conversational split files (prompt/response pairs and multi-turn
`messages` with a system prompt), then generating on validation and test through the shared
engine into per-item predictions with their scores."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from trainkit import (
    QA_PAIRS,
    context,
    preflight_config,
    run_preflight,
    tiny_generation_spec,
    write_conversations,
)

from campaign.core.errors import CampaignError
from campaign.data import conversations as conv
from campaign.tasks.generation import chat as gen
from campaign.train import Trainer, read_data
from campaign.train.stage import stage

pytestmark = pytest.mark.usefixtures("one_thread")

SYSTEM = "Answer in one word."


def _talks() -> list[list[dict]]:
    """Half prompt/response pairs, half conversations with a system message and an earlier
    turn (the messages format): both train on their assistant turns only."""
    out = []
    for i, (q, a) in enumerate(QA_PAIRS):
        if i % 2:
            out.append(conv.from_prompt_response(q, a))
        else:
            earlier = QA_PAIRS[(i + 1) % len(QA_PAIRS)]
            out.append(
                [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": earlier[0]},
                    {"role": "assistant", "content": earlier[1]},
                    {"role": "user", "content": q},
                    {"role": "assistant", "content": a},
                ]
            )
    return out


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    """Train on all six conversations; validation holds four of them (so a run that learned
    answers them exactly), test the other two in another order."""
    folder = tmp_path_factory.mktemp("splits")
    talks = _talks()
    ids = [f"q{i}" for i in range(len(talks))]
    return {
        "train": write_conversations(folder, "train", ids, talks),
        "validation": write_conversations(folder, "validation", ids[:4], talks[:4]),
        "test": write_conversations(folder, "test", ids[5:3:-1], talks[5:3:-1]),
    }


def _spec(**train) -> dict:
    every = {"max_steps": 60, "eval_every": 30, "checkpoint_every": 30}
    return tiny_generation_spec(**{"max_length": 128, "micro_batch": 6, **every, **train})


def test_a_full_run_generates_on_validation_and_test(splits, tmp_path):
    spec = _spec(lr=3e-3)
    ctx = context(spec, splits, tmp_path)
    stage(ctx)
    val = pd.read_parquet(ctx.outputs["predictions_validation"])
    test = pd.read_parquet(ctx.outputs["predictions_test"])
    assert tuple(val.columns) == gen.RUN_PREDICTION_COLUMNS
    assert val["id"].tolist() == ["q0", "q1", "q2", "q3"] and test["id"].tolist() == ["q5", "q4"]
    assert val["reference"].tolist() == [a for _, a in QA_PAIRS[:4]]
    # the memorized answers come back exactly, each stopped by EOS
    assert val["prediction"].tolist() == val["reference"].tolist()
    assert val["stopped_at_eos"].all()
    metrics = pd.read_parquet(ctx.outputs["metrics"])
    losses = metrics[metrics["split"] == "validation"]["loss"].tolist()
    assert len(losses) == 2 and losses[-1] < losses[0]
    # the items' answer-token losses add up to the saved model's validation loss (perplexity)
    assert val["tokens"].gt(0).all()
    assert val["nll"].sum() / val["tokens"].sum() == pytest.approx(losses[-1], rel=1e-6)
    assert (ctx.outputs["model"] / "config.json").is_file()
    config = json.loads((ctx.outputs["model"] / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_key_value_heads"] == 2


def test_a_lora_run_trains_adapters_only_and_predicts(splits, tmp_path):
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    spec = _spec(lr=1e-2, lora=lora, max_steps=4)
    trainer = Trainer(spec, read_data(splits), tmp_path / "work")
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    ctx = context(spec, splits, tmp_path / "stage")
    stage(ctx)
    test = pd.read_parquet(ctx.outputs["predictions_test"])
    assert test["id"].tolist() == ["q5", "q4"]
    assert test["prediction"].map(type).eq(str).all()


def test_too_many_cut_answers_refuse_to_train(splits, tmp_path):
    spec = _spec(lr=3e-3)
    spec["train"]["max_length"] = 12
    with pytest.raises(CampaignError, match=r"train.max_length: \d of 6 responses .* are cut"):
        Trainer(spec, read_data(splits), tmp_path / "work")


def test_a_split_without_conversations_is_refused(tmp_path):
    from trainkit import write_splits

    inputs = write_splits(tmp_path / "splits", 8, 4)
    with pytest.raises(CampaignError, match=r"model.task: generation, but the split files"):
        Trainer(_spec(lr=3e-3), read_data(inputs), tmp_path / "work")


def _preflight(spec, splits, tmp_path, check="tokenization", transform=None):
    # the sample sized to these splits; the overfit check's 120 steps reproduce every answer
    config = preflight_config(
        [check], overfit={"examples": 4, "steps": 120, "max_final_loss": 0.05}
    )
    return run_preflight(spec, splits, config, tmp_path, transform_examples=transform)[check]


def test_the_preflight_shows_formatted_examples_with_the_masked_tokens(splits, tmp_path):
    from campaign.preflight.checks import tokenization

    result = _preflight(_spec(lr=3e-3), splits, tmp_path)
    assert result["passed"], result["summary"]
    assert "every example carries loss" in result["summary"]
    shown = tokenization.describe(result["details"])
    # a multi-turn example: both answers bare (targets), the rest in brackets
    first = next(e for e in result["details"]["inspected"] if e["id"] == "q0")
    assert "]Rome.<|endoftext|>[" in first["marked"] and "]Paris.<|endoftext|>[" in first["marked"]
    assert first["marked"].startswith("[System: Answer in one word.")
    assert any("q0" in line for line in shown)
    cut = _spec(lr=3e-3)
    cut["train"]["max_length"] = 12
    result = _preflight(cut, splits, tmp_path / "cut")
    assert not result["passed"]
    assert "train.max_length" in result["summary"] and "are cut" in result["summary"]


def test_the_overfit_check_gives_the_answers_back_by_generation(splits, tmp_path):
    result = _preflight(_spec(lr=3e-3), splits, tmp_path, check="overfit")
    assert result["passed"], result["summary"]
    generated = result["details"]["generated"]
    assert len(generated) == 4
    assert all(g["prediction"] == g["reference"] for g in generated)


def test_the_overfit_check_fails_when_the_answers_never_learn_to_stop(splits, tmp_path):
    """A broken formatter that masks every answer's EOS: the loss on the rest still falls below
    the threshold, but generation runs past the answers, and the check fails on that."""

    def mask_the_eos(examples):
        out = []
        for e in examples:
            labels = list(e["labels"])
            eos = [t for t in labels if t != gen.IGNORE][-1]  # every answer ends with it
            out.append({**e, "labels": [gen.IGNORE if t == eos else t for t in labels]})
        return out

    result = _preflight(_spec(lr=3e-3), splits, tmp_path, check="overfit", transform=mask_the_eos)
    assert not result["passed"], (result["summary"], result["details"].get("generated"))
    assert "greedy generation reproduced" in result["summary"]
    assert result["details"]["final_loss"] <= 0.05


def test_save_reload_generate_in_the_preflight_compares_the_generations(splits, tmp_path):
    result = _preflight(_spec(lr=3e-3), splits, tmp_path, check="resume")
    assert result["passed"], result["summary"]
    details = result["details"]
    assert details["predictions_identical"] and details["predicted_examples"] == 4


def test_the_memory_check_covers_generation_estimate_against_measured(splits, tmp_path):
    """The tiny Llama with GQA, probed as the run trains it (prompt + response at max_length,
    the loss on the answers) and as it generates (model.generation.batch_size sequences of the
    longest prompt + max_new_tokens in the KV cache): the estimate equals what one real step
    and one real cache hold, within the check's tolerance, and the check passes."""
    from campaign import memory
    from campaign.preflight.checks import memory as memory_check

    spec = _spec(lr=3e-3)
    result = _preflight(spec, splits, tmp_path, check="memory")
    assert result["passed"], result["summary"]
    d = result["details"]
    assert d["estimator"] == "measured" and d["architecture"] == "llama"
    for row in d["comparison"]:
        if row["component"] in memory_check.EXACT_MEMORY:
            assert row["estimated"] == row["measured"] > 0, row
    act = next(r for r in d["comparison"] if r["component"] == "activations (peak)")
    assert abs(act["estimated"] - act["measured"]) <= d["activation_tolerance"] * act["measured"]
    # The cache of generation, not of a training row: batch_size 3, prompt + max_new_tokens 8.
    generating = d["generating"]
    assert generating["batch"] == 3 and 8 < generating["length"] < spec["train"]["max_length"]
    gqa = memory.kv_cache_bytes(2, 2, 64 // 4, generating["length"], 3, 4)
    assert d["kv_cache"] == {"estimated": gqa, "measured": gqa}
    here = d["estimate_here"]
    # The training process generates, its optimizer state alive (tests/preflight/
    # test_memory_generation.py measures it there).
    held = here["bytes"]["weights"] + here["bytes"]["optimizer_state"]
    assert here["phases"]["generate"]["bytes"] == held + gqa
