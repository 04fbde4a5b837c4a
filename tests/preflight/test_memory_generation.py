"""The memory check on the generation task, against what a run generates: the KV cache of the
longest formatted prompt of the full validation and test splits (not the preflight sample's,
cut to max_length), beside the optimizer state the training process still holds, and the fit
table's advice for a cache that does not fit (model.generation.batch_size, not micro_batch).

A tiny from-config Llama with grouped-query attention; one preflight memory check a test."""

from __future__ import annotations

import pytest
from trainkit import (
    QA_PAIRS,
    context,
    preflight_config,
    run_preflight,
    tiny_generation_spec,
    write_conversations,
)

from campaign import memory
from campaign.data import conversations as conv

pytestmark = pytest.mark.usefixtures("one_thread")

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


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    """Six short conversations to train on (the whole train split is the preflight's sample,
    so its tokenizer is the run's), four of them to validate, test one short and LONG_TALK."""
    folder = tmp_path_factory.mktemp("splits")
    talks = [conv.from_prompt_response(q, a) for q, a in QA_PAIRS]
    ids = [f"q{i}" for i in range(len(talks))]
    return {
        "train": write_conversations(folder, "train", ids, talks),
        "validation": write_conversations(folder, "validation", ids[:4], talks[:4]),
        "test": write_conversations(folder, "test", ["q5", LONG_ID], [talks[5], LONG_TALK]),
    }


def _spec(batch_size: int = 16) -> dict:
    return tiny_generation_spec(
        positions=1024,
        batch_size=batch_size,
        max_new_tokens=NEW_TOKENS,
        lr=3e-3,
        max_length=MAX_LENGTH,
        micro_batch=2,
        max_steps=2,
        eval_every=2,
        checkpoint_every=2,
    )


def _command_spec(batch_size: int = 16) -> dict:
    """The same run trained by the user's command (the check never runs it)."""
    spec = _spec(batch_size)
    spec["train"]["command"] = {"argv": ["python", "train.py", "{spec}"]}
    return spec


def _memory_check(spec, splits, tmp_path, memory_gib: float = 24) -> dict:
    config = preflight_config(["memory"], target_cards=[{"name": "card", "memory_gib": memory_gib}])
    return run_preflight(spec, splits, config, tmp_path)["memory"]


def _kv(length: int, batch: int) -> int:
    """The tiny model's fp32 cache: 2 layers, 2 key/value heads of 64 / 4 = 16."""
    return memory.kv_cache_bytes(2, 2, 16, length, batch, 4)


@pytest.fixture(scope="module")
def roomy(splits, tmp_path_factory):
    """The check with a card the run fits easily."""
    return _memory_check(_spec(), splits, tmp_path_factory.mktemp("roomy"))


def _between(low: int, high: int) -> float:
    """A card's memory_gib whose usable bytes (10 % margin) lie halfway between two needs."""
    return (low + high) / 2 / 0.9 / memory.GIB


@pytest.fixture(scope="module")
def tight(roomy, splits, tmp_path_factory):
    """(card GiB, the check on it): a card between the training step's need and generation's."""
    phases = roomy["details"]["estimate_for_cards"]["phases"]
    others = max(p["bytes"] for name, p in phases.items() if name != "generate")
    gib = _between(others, phases["generate"]["bytes"])
    return gib, _memory_check(_spec(), splits, tmp_path_factory.mktemp("tight"), gib)


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
    roomy, tight, splits, tmp_path
):
    """A card between the training step's need and generation's: the check fails naming the
    longest prompt's item and length; micro_batch cannot help (it moves no cached sequence);
    the generation batch the fit table advises does fit, and a rerun with it passes."""
    phases = roomy["details"]["estimate_for_cards"]["phases"]
    generate = phases["generate"]["bytes"]
    others = max(p["bytes"] for name, p in phases.items() if name != "generate")
    assert generate > 2 * others  # the long prompt's cache is the peak
    gib, tight = tight
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


def test_a_train_command_run_generates_without_the_optimizer_state(roomy, splits, tmp_path):
    """A train.command run's model is scored by the campaign in its own process once the
    command has exited: its generate phase holds the weights and the cache, no AdamW state.
    On a card between that need and the built-in loop's (which generates beside the state),
    the command run passes and the built-in one would not."""
    from campaign.preflight.checks import memory as check

    builtin = roomy["details"]["estimate_for_cards"]
    state = builtin["bytes"]["optimizer_state"]
    assert builtin["phases"]["generate"]["optimizer_state"] == state > 0
    need = builtin["phases"]["generate"]["bytes"] - state
    # Still the peak: the long prompt's cache outweighs the training step.
    assert need > max(p["bytes"] for n, p in builtin["phases"].items() if n != "generate")
    gib = _between(need, builtin["peak_bytes"])
    assert builtin["peak_bytes"] > gib * 0.9 * memory.GIB  # the built-in run does not fit
    result = _memory_check(_command_spec(), splits, tmp_path, memory_gib=gib)
    assert result["passed"], result["summary"]
    d = result["details"]
    assert d["generating"]["beside_optimizer"] is False
    assert roomy["details"]["generating"]["beside_optimizer"] is True
    for estimate in (d["estimate_for_cards"], d["estimate_here"]):
        generate, b = estimate["phases"]["generate"], estimate["bytes"]
        assert generate["optimizer_state"] == 0
        assert generate["bytes"] == b["weights"] + b["kv_cache"]
    target = d["estimate_for_cards"]
    assert (target["peak_phase"], target["peak_bytes"]) == ("generate", need)
    # The training step is the built-in loop's either way (the estimate models its AdamW).
    assert target["phases"]["train_step"] == builtin["phases"]["train_step"]
    assert "beside the weights alone" in "\n".join(check.describe(d))
    assert "the optimizer state (the training process generates)" in "\n".join(
        check.describe(roomy["details"])
    )


def test_the_fit_table_sizes_packed_generation_and_the_params_check_takes_it(splits, tmp_path):
    """train.packing packs a generation run's conversations: on a card nothing fits, the fit
    table's packing row sizes the training step at the rows the sample's micro-batch of 6
    conversations packs into at max_length 144, while the generate phase, which packing does not
    move, stays the peak; the measured lever costs run real packed steps; and the params check
    takes the key."""
    from campaign.train import PHASE

    spec = _spec()
    spec["train"].update(micro_batch=6, max_length=3 * MAX_LENGTH)  # room for several a row
    PHASE.check_params({"model": spec["model"], "train": {**spec["train"], "packing": True}})
    check = _memory_check(spec, splits, tmp_path, memory_gib=0.001)
    (row,) = check["details"]["fit_table"]
    lever = next(r for r in row["levers"] if r["lever"] == "packing")
    assert lever["setting"] == {"train.packing": True}, lever["note"]
    rows = int(lever["change"].split("at most ")[1].split()[0])
    assert lever["change"].startswith("6 examples in at most") and 1 <= rows < 6
    phases = check["details"]["estimate_for_cards"]["phases"]
    assert (lever["phase"], lever["need_bytes"]) == ("generate", phases["generate"]["bytes"])
    step = phases["train_step"]
    assert step["fixed_bytes"] + step["bytes_per_example"] * rows < step["bytes"]
    (cost,) = [c for c in check["details"]["lever_costs"] if c["lever"] == "packing"]
    assert cost["note"] is None and cost["peak_bytes"] > 0 and cost["step_time_ratio"] > 0


def test_a_prompt_past_the_models_positions_fails_naming_it(splits, tmp_path):
    """The long test prompt plus max_new_tokens past max_position_embeddings: one line naming
    the item and the limit, before any probe (a learned position table has no row there)."""
    spec = _spec()
    spec["model"]["config"]["max_position_embeddings"] = 4 * MAX_LENGTH
    result = _memory_check(spec, splits, tmp_path)
    assert not result["passed"]
    assert f"test item {LONG_ID}" in result["summary"]
    assert f"max_position_embeddings {4 * MAX_LENGTH}" in result["summary"]


def test_a_builtin_run_planned_beside_a_command_baseline_keeps_the_optimizer_state(
    roomy, splits, tmp_path
):
    """The check sizes the baseline; with train.command a command and a factor (or an explicit
    cell) taking the built-in loop, some runs generate beside AdamW's state: the preflight's spec
    says so and the check holds the state, so a card only the command's runs fit fails."""
    from campaign.preflight import _builtin_beside_a_command, _preflight_key

    commands = {"hf": {"argv": ["python", "train.py", "{spec}"]}}
    train = {"command": "hf", "commands": commands}
    gen = {"model": {"task": "generation"}, "train": train}
    factor = {"ablation": {"factors": {"train": {"command": ["hf", "builtin"]}}}}
    assert _builtin_beside_a_command({**gen, **factor})
    cells = {"ablation": {"explicit": {"cells": [{"train.command": None}]}}}
    assert _builtin_beside_a_command({**gen, **cells})
    assert not _builtin_beside_a_command({**gen, "ablation": {}})
    assert not _builtin_beside_a_command({**gen, "train": {**train, "command": None}, **factor})
    # a label task generates nothing: its preflight key stays as it was
    labels = {"model": {"task": "sequence_classification"}, "train": train}
    assert not _builtin_beside_a_command({**labels, **factor})
    spec = {"run": _spec(), "preflight": {"max_hours": 1}}
    assert "builtin_generates" not in _preflight_key(spec)
    assert _preflight_key({**spec, "builtin_generates": True})["builtin_generates"] is True

    builtin = roomy["details"]["estimate_for_cards"]
    need = builtin["phases"]["generate"]["bytes"] - builtin["bytes"]["optimizer_state"]
    gib = _between(need, builtin["peak_bytes"])
    config = preflight_config(["memory"], target_cards=[{"name": "card", "memory_gib": gib}])
    result = run_preflight(_command_spec(), splits, config, tmp_path, builtin_generates=True)
    result = result["memory"]
    assert not result["passed"] and "fits none of card" in result["summary"], result["summary"]
    assert result["details"]["generating"]["beside_optimizer"] is True
    generate = result["details"]["estimate_for_cards"]["phases"]["generate"]
    assert generate["optimizer_state"] == builtin["bytes"]["optimizer_state"]
