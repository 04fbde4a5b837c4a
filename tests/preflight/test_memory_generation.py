"""The memory check on the generation task, against what a run generates: the KV cache of the
longest formatted prompt of the full validation and test splits (not the preflight sample's,
cut to max_length), beside the optimizer state the training process still holds, and the fit
table's advice for a cache that does not fit (model.generation.batch_size, not micro_batch).

A tiny from-config Llama with grouped-query attention; one preflight memory check a test."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from trainkit import REPO, context, tiny_spec

from campaign import memory
from campaign.data import conversations as conv

PAIRS = [
    ("Capital of France?", "Paris."),
    ("Capital of Italy?", "Rome."),
    ("Capital of Spain?", "Madrid."),
    ("Capital of Peru?", "Lima."),
    ("Which tool lists files?", "ls"),
    ("Which tool copies files?", "cp"),
]
# A test item whose prompt (a system message, an earlier turn and a long question) is far longer
# than anything in train or validation, and than train.max_length: generation is not cut.
LONG_ID = "long"
LONG_TALK = [
    {"role": "system", "content": "Answer in one word."},
    {"role": "user", "content": "Capital of Peru?"},
    {"role": "assistant", "content": "Lima."},
    {"role": "user", "content": " ".join(["Which tool copies files and lists files?"] * 40)},
    {"role": "assistant", "content": "cp"},
]
MAX_LENGTH = 48
NEW_TOKENS = 8


def _write(folder, name, ids, talks):
    path = folder / f"{name}.parquet"
    pd.DataFrame(
        {
            "id": ids,
            "text": [conv.dedup_text(t) for t in talks],
            "label": [conv.UNSTRATIFIED] * len(ids),
            "messages": [conv.dump_messages(t) for t in talks],
        }
    ).to_parquet(path)
    return [path]


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    """Six short conversations to train on (the whole train split is the preflight's sample,
    so its tokenizer is the run's), four of them to validate, test one short and LONG_TALK."""
    folder = tmp_path_factory.mktemp("splits")
    talks = [conv.from_prompt_response(q, a) for q, a in PAIRS]
    ids = [f"q{i}" for i in range(len(talks))]
    return {
        "train": _write(folder, "train", ids, talks),
        "validation": _write(folder, "validation", ids[:4], talks[:4]),
        "test": _write(folder, "test", ["q5", LONG_ID], [talks[5], LONG_TALK]),
    }


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _spec(batch_size: int = 16) -> dict:
    spec = tiny_spec("generation", "llama", hidden=64, layers=2, lr=3e-3)
    spec["model"]["config"].update(num_attention_heads=4, num_key_value_heads=2, dropout=0.0)
    spec["model"]["config"]["max_position_embeddings"] = 1024
    spec["model"]["tokenizer"].update(vocab_size=300, min_frequency=1, lowercase=False)
    spec["model"]["chat_template"] = "none"
    spec["model"]["generation"] = {
        "metric": "exact_match",
        "max_new_tokens": NEW_TOKENS,
        "batch_size": batch_size,
    }
    spec["train"].update(max_length=MAX_LENGTH, micro_batch=2, grad_accum=1, warmup_steps=0)
    spec["train"].update(max_steps=2, eval_every=2, checkpoint_every=2)
    return spec


def _memory_check(spec, splits, tmp_path, memory_gib: float = 24) -> dict:
    from campaign.preflight import bench
    from campaign.preflight import report as preflight_report

    config = {
        "blocking": ["memory"],
        "sample": {"train_examples": 6, "validation_examples": 4},
        "inspect_examples": 2,
        "target_cards": [{"name": "card", "memory_gib": memory_gib}],
        "memory_margin": 0.1,
        "activation_tolerance": 0.02,
        "overfit": {"examples": 4, "steps": 10, "max_final_loss": 0.05},
        "grad_accum_tolerance": 1.0e-9,
        "max_unknown_token_share": 0.05,
        "resume": {"steps_before": 2, "steps_after": 2},
        "throughput": {"warmup_steps": 2, "window_steps": 4},
        "max_hours": None,
        "disk_margin": 0.2,
    }
    return preflight_report.run_preflight(
        spec,
        splits,
        config,
        tmp_path / "work",
        REPO,
        only=("memory",),
        hooks=bench.Hooks(device=torch.device("cpu")),
    )["memory"]


def _kv(length: int, batch: int) -> int:
    """The tiny model's fp32 cache: 2 layers, 2 key/value heads of 64 / 4 = 16."""
    return memory.kv_cache_bytes(2, 2, 16, length, batch, 4)


@pytest.fixture(scope="module")
def roomy(splits, tmp_path_factory):
    """The check with a card the run fits easily."""
    return _memory_check(_spec(), splits, tmp_path_factory.mktemp("roomy"))


def test_the_kv_cache_is_sized_on_the_longest_full_prompt_of_validation_and_test(roomy):
    """The test split's long multi-turn prompt sets the cache's length, far past
    train.max_length (the sample's prompts, cut to it, set it before); the estimate still
    equals the cache measured at that length."""
    assert roomy["passed"], roomy["summary"]
    g = roomy["details"]["generating"]
    assert g["length"] > 4 * MAX_LENGTH + NEW_TOKENS
    assert g["item"] == f"test item {LONG_ID}" and g["length"] == g["prompt"] + NEW_TOKENS
    assert g["batch"] == 16
    kv = _kv(g["length"], 16)
    assert roomy["details"]["kv_cache"] == {"estimated": kv, "measured": kv}


def test_the_generate_phase_holds_the_optimizer_state_the_training_process_keeps(
    roomy, splits, tmp_path, monkeypatch
):
    """The train stage generates validation and test in its own process after the last step,
    with the Trainer's AdamW state still allocated: measured there (a real run, its optimizer
    read when the final generation starts), it is the state the estimate adds to the phase."""
    from campaign.train import Trainer
    from campaign.train.stage import stage

    held = []
    final_scores = Trainer.final_scores

    def spy(self):
        state = self.optimizer.state.values()
        held.append(sum(t.numel() * t.element_size() for s in state for t in s.values()))
        return final_scores(self)

    monkeypatch.setattr(Trainer, "final_scores", spy)
    stage(context(_spec(), splits, tmp_path))
    here = roomy["details"]["estimate_here"]
    assert held == [here["bytes"]["optimizer_state"]] and held[0] > 0
    generate = here["phases"]["generate"]
    assert generate["bytes"] == here["bytes"]["weights"] + held[0] + here["bytes"]["kv_cache"]
    assert generate["optimizer_state"] == held[0]


def test_a_card_the_cache_does_not_fit_fails_naming_the_prompt_and_the_batch_lever_fixes_it(
    roomy, splits, tmp_path
):
    """A card between the training step's need and generation's: the check fails naming the
    longest prompt's item and length; micro_batch cannot help (it moves no cached sequence);
    the generation batch the fit table advises does fit, and a rerun with it passes."""
    phases = roomy["details"]["estimate_for_cards"]["phases"]
    generate = phases["generate"]["bytes"]
    others = max(p["bytes"] for name, p in phases.items() if name != "generate")
    assert generate > 2 * others  # the long prompt's cache is the peak
    gib = (others + generate) / 2 / 0.9 / memory.GIB  # usable: halfway between the two
    tight = _memory_check(_spec(), splits, tmp_path / "tight", memory_gib=gib)
    assert not tight["passed"]
    g = tight["details"]["generating"]
    assert f"test item {LONG_ID}, {g['prompt']} tokens" in tight["summary"]
    assert "(generate)" in tight["summary"]
    (row,) = tight["details"]["fit_table"]
    assert row["max_micro_batch"] == 0  # no micro-batch fits: the cache does not move with it
    levers = {r["lever"]: r for r in row["levers"]}
    assert levers["micro_batch"]["phase"] == "generate" and not levers["micro_batch"]["fits"]
    advice = levers["generation_batch"]
    assert advice["fits"] and advice["need_bytes"] < generate
    batch = advice["setting"]["model.generation.batch_size"]
    assert 1 <= batch < 16
    followed = _memory_check(_spec(batch), splits, tmp_path / "followed", memory_gib=gib)
    assert followed["passed"], followed["summary"]
    assert followed["details"]["estimate_for_cards"]["peak_bytes"] == advice["need_bytes"]


def test_a_prompt_past_the_models_positions_fails_naming_it(splits, tmp_path):
    """The long test prompt plus max_new_tokens past max_position_embeddings: one line naming
    the item and the limit, before any probe (a learned position table has no row there)."""
    spec = _spec()
    spec["model"]["config"]["max_position_embeddings"] = 4 * MAX_LENGTH
    result = _memory_check(spec, splits, tmp_path)
    assert not result["passed"]
    assert f"test item {LONG_ID}" in result["summary"]
    assert f"max_position_embeddings {4 * MAX_LENGTH}" in result["summary"]
