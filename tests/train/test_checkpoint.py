"""Checkpoints: atomic files, damaged ones skipped, and exact resume — in process and after a
real SIGKILL — giving final weights bitwise equal to an uninterrupted run."""

from __future__ import annotations

import io
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from trainkit import KILLED_JOB, REPO, context, killed_job_env, tiny_spec, write_splits

from campaign.core.hashing import hash_tree
from campaign.train import Trainer, checkpoint, read_data
from campaign.train.stage import stage

# 120 train examples, 16 per step (micro_batch 8 × grad_accum 2): an epoch is 7.5 steps, so the
# checkpoints at steps 5 and 10 land mid-epoch; dropout 0.1 makes the RNG state matter.
MAX_STEPS = 16
LORA = {"r": 4, "alpha": 8, "dropout": 0.1, "target_modules": ["query", "value"]}


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch):
    """Bitwise resume is a CPU claim: test it on the CPU even where a GPU is present."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, list[Path]]:
    return write_splits(tmp_path_factory.mktemp("splits"), n_train=120, n_eval=40)


def spec_for(lora=None, task="sequence_classification", architecture="bert") -> dict:
    return tiny_spec(
        task=task,
        architecture=architecture,
        max_steps=MAX_STEPS,
        checkpoint_every=5,
        eval_every=4,
        keep_checkpoints=2,
        lora=lora,
    )


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def assert_bitwise_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key


def uninterrupted(spec: dict, inputs, work: Path) -> Trainer:
    trainer = Trainer(spec, read_data(inputs), work, root=REPO, stream=io.StringIO())
    trainer.run()
    return trainer


# ------------------------------------------------------------------ file level
def test_rng_state_round_trip():
    checkpoint.set_rng_state(checkpoint.rng_state())  # tensors survive a set
    state = checkpoint.rng_state()
    expected = (random.random(), np.random.random(), torch.rand(3))
    random.seed(99), np.random.seed(99), torch.manual_seed(99)
    checkpoint.set_rng_state(state)
    got = (random.random(), np.random.random(), torch.rand(3))
    assert got[0] == expected[0] and got[1] == expected[1] and torch.equal(got[2], expected[2])


def test_save_is_atomic_keeps_last_k_and_skips_damaged(tmp_path):
    notes: list[str] = []
    for step in (1, 2, 3, 4):
        checkpoint.save_checkpoint(
            tmp_path, {"step": step, "spec_hash": "s", "x": torch.ones(3)}, 3
        )
    assert [s for s, _ in checkpoint.checkpoint_files(tmp_path)] == [2, 3, 4]
    assert checkpoint.load_latest(tmp_path, {"spec_hash": "s"}, notes.append)["step"] == 4

    # A silent bit flip in the newest file: its digest no longer matches; step 3 is used.
    newest = checkpoint.checkpoint_files(tmp_path)[-1][1]
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0x01
    newest.write_bytes(bytes(data))
    # A write killed half way leaves only a temporary file, which is ignored and removed.
    partial = tmp_path / ".ckpt-00000005.deadbeef.tmp"
    partial.write_bytes(b"PK\x03\x04 half a zip")
    state = checkpoint.load_latest(tmp_path, {"spec_hash": "s"}, notes.append)
    assert state["step"] == 3 and torch.equal(state["x"], torch.ones(3))
    assert len(notes) == 1 and newest.name in notes[0] and "digest" in notes[0]
    assert not partial.exists()

    # Truncated and renamed to match its new digest: unreadable, skipped with a note.
    third = checkpoint.checkpoint_files(tmp_path)[-2][1]
    short = third.read_bytes()[:200]
    third.unlink()
    from campaign.core.hashing import hash_bytes

    (tmp_path / f"ckpt-00000003.{hash_bytes(short)[:32]}.pt").write_bytes(short)
    notes.clear()
    assert checkpoint.load_latest(tmp_path, {"spec_hash": "s"}, notes.append)["step"] == 2
    assert any("unreadable" in n for n in notes)

    # Written for another spec: skipped.
    notes.clear()
    assert checkpoint.load_latest(tmp_path, {"spec_hash": "other"}, notes.append) is None
    assert notes[-1].startswith("skipping ckpt-00000002") and "another spec_hash" in notes[-1]


# ------------------------------------------------------------------ exact resume, in process
@pytest.mark.parametrize(
    "lora, task, architecture",
    [
        (None, "sequence_classification", "bert"),
        (LORA, "sequence_classification", "bert"),
        (None, "causal_lm", "gpt2"),
        ({**LORA, "target_modules": ["c_attn"]}, "causal_lm", "gpt2"),
    ],
    ids=["bert-full", "bert-lora", "gpt2-causal-full", "gpt2-causal-lora"],
)
def test_stop_and_resume_in_process_is_bitwise_equal(inputs, tmp_path, lora, task, architecture):
    spec = spec_for(lora, task, architecture)
    reference = uninterrupted(spec, inputs, tmp_path / "ref")
    expected = weights(reference)

    work = tmp_path / "work"
    first = Trainer(spec, read_data(inputs), work, root=REPO, stream=io.StringIO())
    first.run(stop_after=7)  # checkpoint at 5 (mid-epoch, 80 of 120 seen); steps 6-7 are lost
    assert first.step == 7
    assert [s for s, _ in checkpoint.checkpoint_files(work)] == [5]
    del first

    second = Trainer(spec, read_data(inputs), work, root=REPO, stream=io.StringIO())
    assert second.resume() == 5
    assert second.order.state_dict() == {"seed": 1, "n": 120, "epoch": 0, "index": 80}
    second.run()
    assert second.step == MAX_STEPS
    assert_bitwise_equal(weights(second), expected)
    # A job killed after its last step (while writing outputs) resumes at the end: no retraining.
    third = Trainer(spec, read_data(inputs), work, root=REPO, stream=io.StringIO())
    assert third.resume() == MAX_STEPS
    assert_bitwise_equal(weights(third), expected)
    # Metrics carry over: one train row per step, the same losses as the uninterrupted run.
    train_rows = [r for r in second.history if r["split"] == "train"]
    assert [r["step"] for r in train_rows] == list(range(1, MAX_STEPS + 1))
    ref_losses = [r["loss"] for r in reference.history if r["split"] == "train"]
    assert [r["loss"] for r in train_rows] == ref_losses
    # Optimizer moments too, not just the weights.
    for a, b in zip(
        second.optimizer.state_dict()["state"].values(),
        reference.optimizer.state_dict()["state"].values(),
        strict=True,
    ):
        assert torch.equal(a["exp_avg_sq"], b["exp_avg_sq"])


# ------------------------------------------------------------------ exact resume after SIGKILL
def kill_at_step(spec: dict, inputs: dict, folder: Path, step: int) -> None:
    """Run the training stage in a real subprocess and SIGKILL it after `step`."""
    import json

    # This checkout's package first: the virtual environment's install may point at another.
    path = os.pathsep.join([str(REPO / "workflow"), str(REPO / "tests")])
    env = killed_job_env(path)
    job = subprocess.Popen(
        [
            sys.executable,
            "-c",
            KILLED_JOB,
            json.dumps(spec),
            json.dumps({k: [str(p) for p in v] for k, v in inputs.items()}),
            str(folder),
            str(step),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    marker = folder / "stopped-here"
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert job.poll() is None, job.stdout.read().decode()[-3000:]
        assert time.monotonic() < deadline, f"the job never reached step {step}"
        time.sleep(0.05)
    job.send_signal(signal.SIGKILL)
    job.wait(timeout=30)
    assert job.returncode == -signal.SIGKILL


def test_killed_job_resumes_bitwise_equal(inputs, tmp_path):
    spec = spec_for()
    reference = context(spec, inputs, tmp_path / "ref")
    stage(reference)

    folder = tmp_path / "killed"
    kill_at_step(spec, inputs, folder, 12)
    work = folder / "work"
    assert [s for s, _ in checkpoint.checkpoint_files(work)] == [5, 10]
    assert not (folder / "outputs" / "model").exists()

    # Started again: the same stage, same work folder; resumes from step 10 (mid-epoch 1).
    restarted = context(spec, inputs, folder)
    log = io.StringIO()
    from campaign.train import run_training

    trainer = run_training(
        restarted.spec, restarted.inputs, restarted.outputs, restarted.work_dir, REPO, stream=log
    )
    assert trainer.resumed_from == 10 and "resumed from step 10" in log.getvalue()
    for name in ("model", "predictions_validation", "predictions_test"):
        assert hash_tree(restarted.outputs[name]) == hash_tree(reference.outputs[name]), name


def test_checkpoint_settings_edited_mid_run_keep_every_checkpoint_usable(inputs, tmp_path):
    """checkpoint_every and keep_checkpoints are operational: edited between a kill and the
    restart, the run still resumes from its newest checkpoint and ends bitwise equal."""
    spec = spec_for()
    reference = context(spec, inputs, tmp_path / "ref")
    stage(reference)

    folder = tmp_path / "killed"
    kill_at_step(spec, inputs, folder, 12)
    edited = {**spec, "train": {**spec["train"], "checkpoint_every": 3, "keep_checkpoints": 1}}
    restarted = context(edited, inputs, folder)
    log = io.StringIO()
    from campaign.train import run_training

    trainer = run_training(
        restarted.spec, restarted.inputs, restarted.outputs, restarted.work_dir, REPO, stream=log
    )
    assert trainer.resumed_from == 10, log.getvalue()
    assert [s for s, _ in checkpoint.checkpoint_files(folder / "work")] == [MAX_STEPS]
    for name in ("model", "predictions_validation", "predictions_test", "metrics"):
        assert hash_tree(restarted.outputs[name]) == hash_tree(reference.outputs[name]), name


def test_pruning_keeps_the_newest_written_not_the_highest_step(tmp_path):
    # A run resumed from step 5 (its step-10 checkpoint damaged) writes step 6: with keep 1,
    # step 6 is what a later restart needs, so the older-written step 10 is the one to go.
    state = {"model": {"w": torch.zeros(2)}}
    checkpoint.save_checkpoint(tmp_path, {**state, "step": 5}, keep=2)
    checkpoint.save_checkpoint(tmp_path, {**state, "step": 10}, keep=2)
    checkpoint.save_checkpoint(tmp_path, {**state, "step": 6}, keep=1)
    assert [s for s, _ in checkpoint.checkpoint_files(tmp_path)] == [6]
