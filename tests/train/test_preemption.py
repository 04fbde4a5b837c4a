"""Preemption that loses nothing: a scheduler's warning signal (SIGUSR1) or SIGTERM to a real
`campaign train` job makes it finish its step, checkpoint there, record the job as preempted and
exit PREEMPTED_EXIT; the same command again resumes at that step and writes the bytes of an
uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trainkit import OUTPUTS, REPO, context, tiny_spec, write_splits

from campaign.core.errors import PREEMPTED_EXIT, Preempted
from campaign.core.hashing import hash_tree
from campaign.core.progress import PROGRESS_FILE
from campaign.core.store import Store
from campaign.train.checkpoint import checkpoint_files

STEPS = 80  # more than the signal needs: it lands mid-run


def train_command(inputs: dict, state: Path, out: Path, log: Path) -> list[str]:
    spec = tiny_spec(max_steps=STEPS, eval_every=100, checkpoint_every=100)
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "campaign", "train", "--spec", json.dumps(spec)]
    cmd += [a for name, paths in inputs.items() for a in ("--in", f"{name}={paths[0]}")]
    cmd += ["--in", "base_model=", "--state-dir", str(state), "--log", str(log)]
    return cmd + [a for name in OUTPUTS for a in ("--out", f"{name}={out / name}")]


def job_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    env.update(PYTHONPATH=str(REPO / "workflow"), CUDA_VISIBLE_DEVICES="")
    env["CAMPAIGN_PROGRESS_SECONDS"] = "0.1"
    return env


def outputs(out: Path) -> dict[str, str]:
    return {name: hash_tree(out / name) for name in OUTPUTS if name != "timings"}


def wait_for_step(job: subprocess.Popen, work: Path, log: Path, step: int) -> None:
    deadline = time.monotonic() + 120
    while True:
        for path in work.glob(f"*/{PROGRESS_FILE}"):
            try:
                if json.loads(path.read_text())["step"] >= step:
                    return
            except (ValueError, OSError):
                pass  # being replaced
        assert job.poll() is None, log.read_text() if log.exists() else "job died"
        assert time.monotonic() < deadline, "no training step after 120 s"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_signalled_job_checkpoints_exits_preempted_and_resumes_byte_identical(tmp_path):
    sig = signal.SIGUSR1  # the SLURM profile's warning before the time limit
    inputs = write_splits(tmp_path / "splits", n_train=64, n_eval=16)
    state = tmp_path / "state"
    store = Store(state)
    log = tmp_path / "job.log"
    cmd = train_command(inputs, state, tmp_path / "out", log)
    job = subprocess.Popen(cmd, cwd=REPO, env=job_env())
    try:
        wait_for_step(job, state / "work", log, 3)
        job.send_signal(sig)
        assert job.wait(timeout=120) == PREEMPTED_EXIT, log.read_text()
    finally:
        if job.poll() is None:
            job.kill()
    (record,) = store.job_records()
    stopped = record["step"]
    assert record["state"] == "preempted" and 3 <= stopped < STEPS, record
    assert f"preempted by signal {int(sig)} after step {stopped}" in record["error"]
    # The checkpoint is at the step the job stopped after (no scheduled one: every 100 steps).
    (work,) = (state / "work").iterdir()
    assert [s for s, _ in checkpoint_files(work)][-1] == stopped
    assert store.keys() == [] and not (tmp_path / "out" / "model").exists()
    assert [e["event"] for e in store.events()][-1] == "preempted"

    # Resubmitted: the same command resumes there and finishes.
    again = subprocess.run(cmd, cwd=REPO, env=job_env(), timeout=300)
    assert again.returncode == 0, log.read_text()
    assert f"train: resumed from step {stopped}" in log.read_text()
    timings = json.loads((tmp_path / "out" / "timings").read_text())
    assert timings["resumed_from_step"] == stopped

    # An uninterrupted run (its own store) writes the same bytes.
    whole = subprocess.run(
        train_command(inputs, tmp_path / "state2", tmp_path / "whole", tmp_path / "whole.log"),
        cwd=REPO,
        env=job_env(),
        timeout=300,
    )
    assert whole.returncode == 0, (tmp_path / "whole.log").read_text()
    assert outputs(tmp_path / "out") == outputs(tmp_path / "whole")


def test_sigterm_mid_step_stops_after_that_step_with_a_checkpoint_there(tmp_path):
    """In process, at a known step: SIGTERM arrives during step 3's bookkeeping (no scheduled
    checkpoint until 4); the loop saves step 3 and stops; a rerun resumes at 3 and ends with
    the bytes of an uninterrupted run."""
    from campaign.train import run_training

    inputs = write_splits(tmp_path / "splits", n_train=48, n_eval=16)
    spec = tiny_spec(max_steps=8, eval_every=4, checkpoint_every=4)
    ctx = context(spec, inputs, tmp_path / "cut")

    def cancel_at_3(step: int) -> None:
        if step == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Preempted) as stopped:
        run_training(ctx.spec, ctx.inputs, ctx.outputs, ctx.work_dir, REPO, after_step=cancel_at_3)
    assert stopped.value.step == 3 and stopped.value.signum == signal.SIGTERM
    assert [s for s, _ in checkpoint_files(ctx.work_dir)] == [3]
    # The loop's handlers are gone: after it, SIGTERM means what it meant before.
    assert signal.getsignal(signal.SIGTERM) is before
    trainer = run_training(ctx.spec, ctx.inputs, ctx.outputs, ctx.work_dir, REPO)
    assert trainer.resumed_from == 3
    whole = context(spec, inputs, tmp_path / "whole")
    run_training(whole.spec, whole.inputs, whole.outputs, whole.work_dir, REPO)
    assert outputs(ctx.outputs["model"].parent) == outputs(whole.outputs["model"].parent)
