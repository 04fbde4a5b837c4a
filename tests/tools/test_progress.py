"""Progress a user can see: the ETA arithmetic, log lines at the interval, the progress file a
running job keeps, and `campaign status` showing a real training job's step while it runs."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from campaign.core.errors import PREEMPTED_EXIT, CampaignError
from campaign.core.progress import (
    PROGRESS_FILE,
    Progress,
    eta_seconds,
    find_progress,
    interval_from_env,
    progress_line,
)
from campaign.tools.forecast import remaining_hours, remaining_line
from campaign.tools.status import progress_lines


class FakeClock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


# ------------------------------------------------------------------ arithmetic
def test_eta_from_measured_rate_prior_and_blend():
    # Nothing measured, no prior: unknown. Nothing left: 0.
    assert eta_seconds(0, 100, 0.0) is None
    assert eta_seconds(100, 0, 50.0) == 0.0
    # Only the prior: 100 steps x 2 s.
    assert eta_seconds(0, 100, 0.0, prior_step_s=2.0) == 200.0
    # Only measured: 10 steps in 20 s -> 2 s a step, 90 left -> 180 s.
    assert eta_seconds(10, 90, 20.0) == 180.0
    # Blend: 2 of 5 steps measured (3 s a step) weigh 0.4, the prior (1 s) 0.6:
    # 0.4 * 3 + 0.6 * 1 = 1.8 s a step, 8 left -> 14.4 s.
    assert eta_seconds(2, 8, 6.0, prior_step_s=1.0, measured_after=5) == pytest.approx(14.4)
    # From measured_after steps on, the measured rate alone (the prior was 10x off).
    assert eta_seconds(5, 5, 5.0, prior_step_s=10.0, measured_after=5) == 5.0


def test_progress_line_reads_like_the_issue():
    line = progress_line("train run-1", 120, 200, 41.2, 27.4)
    assert line == "train run-1: step 120/200 (60%), 41 s elapsed, ETA 27 s"
    assert (
        progress_line("t", 1, 4, 125, None) == "t: step 1/4 (25%), 2 min 5 s elapsed, ETA unknown"
    )
    assert "ETA 2 h 1 min" in progress_line("t", 1, 2, 1, 7260)


def test_interval_from_env():
    assert interval_from_env({}) == 30.0
    assert interval_from_env({"CAMPAIGN_PROGRESS_SECONDS": "0.5"}) == 0.5
    with pytest.raises(CampaignError, match="CAMPAIGN_PROGRESS_SECONDS: .*'soon'"):
        interval_from_env({"CAMPAIGN_PROGRESS_SECONDS": "soon"})
    with pytest.raises(CampaignError, match="CAMPAIGN_PROGRESS_SECONDS"):
        interval_from_env({"CAMPAIGN_PROGRESS_SECONDS": "-1"})


# ------------------------------------------------------------------ log lines and the file
def test_log_lines_at_the_interval_with_a_fake_clock(tmp_path):
    clock, log = FakeClock(), io.StringIO()  # StringIO is no terminal: log-line mode
    path = tmp_path / "work" / PROGRESS_FILE
    progress = Progress(
        100, desc="train run-x", stream=log, interval_s=10, path=path, clock=clock,
        info={"stage": "train", "run": "run-x"},
    )  # fmt: skip
    assert json.loads(path.read_text())["step"] == 0  # written at the start
    for step in range(1, 101):
        clock.t += 1.0  # one step a second
        progress.update(step, loss=0.5)
    lines = log.getvalue().splitlines()
    # A line every 10 s: steps 10, 20, ..., 100 (the last one always).
    assert [int(line.split("step ")[1].split("/")[0]) for line in lines] == list(range(10, 101, 10))
    assert lines[0] == "train run-x: step 10/100 (10%), 10 s elapsed, ETA 1 min 30 s, loss 0.5"
    assert lines[-1].startswith("train run-x: step 100/100 (100%), 1 min 40 s elapsed, ETA 0 s")
    record = json.loads(path.read_text())
    assert record["stage"] == "train" and record["run"] == "run-x"
    assert record["step"] == 100 and record["total"] == 100 and record["eta_s"] == 0.0
    assert record["pid"] == os.getpid() and record["elapsed_s"] == 100.0
    progress.close()
    assert not path.exists()  # the job's loop is over: no progress file left


def test_resumed_job_measures_only_its_own_steps(tmp_path):
    clock, log = FakeClock(), io.StringIO()
    progress = Progress(100, initial=60, stream=log, interval_s=0, clock=clock)
    clock.t += 8.0
    progress.update(64)  # 4 steps in 8 s here (the 60 before were another process's)
    assert progress.eta() == pytest.approx(36 * 2.0)
    assert "step 64/100 (64%), 8 s elapsed, ETA 1 min 12 s" in log.getvalue()


def test_terminal_gets_a_tqdm_bar_not_lines(tmp_path):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, clock = Tty(), FakeClock()
    progress = Progress(3, stream=tty, interval_s=0, clock=clock)
    for step in (1, 2, 3):
        clock.t += 1
        progress.update(step, loss=0.25)
    progress.close()
    assert "3/3" in tty.getvalue() and "ETA" not in tty.getvalue()


# ------------------------------------------------------------------ status pieces
def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_status_lines_running_and_stale(tmp_path):
    import socket

    now = 5000.0
    live = {"stage": "train", "run": "run-aaaaaaaaaaaa", "step": 30, "total": 120}
    live |= {"elapsed_s": 60.0, "eta_s": 180.0, "pid": os.getpid()}
    live |= {"host": socket.gethostname(), "updated_at": now - 10}
    stale = {**live, "run": "run-bbbbbbbbbbbb", "pid": dead_pid(), "updated_at": now - 300}
    broken = {**live, "step": "many"}
    found = [(tmp_path / "k1" / PROGRESS_FILE, live), (tmp_path / "k2" / PROGRESS_FILE, stale)]
    found.append((tmp_path / "k3" / PROGRESS_FILE, broken))
    lines, etas = progress_lines(found, now=now)
    # Elapsed and ETA carried forward by the 10 s since the file's update.
    assert lines[0] == (
        f"running      train run-aaaaaaaaaaaa: step 30/120 (25%), 1 min 10 s elapsed, "
        f"ETA 2 min 50 s (pid {os.getpid()})"
    )
    assert lines[1].startswith("not running (stale)  train run-bbbbbbbbbbbb: step 30/120")
    assert lines[2] == f"unreadable progress file  {tmp_path / 'k3' / PROGRESS_FILE}"
    assert etas == {"run-aaaaaaaaaaaa": 170.0}


def test_remaining_hours_and_money_by_hand():
    plan = [
        {"run": "a", "projected_hours": 1.0},
        {"run": "b", "projected_hours": 2.0},
        {"run": "c", "projected_hours": 0.5},
    ]
    # a finished; b and c as projected: 2.5 h.
    assert remaining_hours(plan, {"a"}, None) == (2.5, 2)
    # Calibrated: projected x 0.4 + 0.1 h a job: (0.8 + 0.1) + (0.2 + 0.1) = 1.2 h.
    hours, left = remaining_hours(plan, {"a"}, (0.4, 0.1))
    assert left == 2 and hours == pytest.approx(1.2)
    # b is running with 1800 s to go: 0.5 h + c's 0.3 h.
    hours, _ = remaining_hours(plan, {"a"}, (0.4, 0.1), {"b": 1800.0})
    assert hours == pytest.approx(0.8)
    budget = {
        "currency": "EUR",
        "reference_offer": "box",
        "offers": [{"name": "box", "hourly": 2.0}],
    }
    line = remaining_line(plan, {"a"}, (0.4, 0.1), budget)
    assert line == (
        "remaining: 2 of 3 planned runs, 1 h 12 min (calibrated: projected x0.4 + 360 s a job), "
        "2.40 EUR on box (2.0 EUR/h)"
    )
    # b on 2 cards (train.devices 2): 0.9 h holding 2 cards + 0.3 h = 2.1 card-hours, 4.20.
    assert remaining_line(plan, {"a"}, (0.4, 0.1), budget, cards={"b": 2}).endswith(
        "1 h 12 min (calibrated: projected x0.4 + 360 s a job), 4.20 EUR on box (2.0 EUR/h, "
        "2.1 card-hours)"
    )
    assert remaining_line(plan, {"a", "b", "c"}, None, budget).startswith("remaining: nothing")
    unmeasured = [{"run": "a", "projected_hours": None}]
    assert "hours unknown" in remaining_line(unmeasured, set(), None, budget)


# ------------------------------------------------------------------ a real training job
JOB_SPEC_STEPS = 50_000  # far more than the test waits for: it is stopped while running


def start_train_job(project: Path, state: Path, folder: Path) -> subprocess.Popen:
    """`campaign train` on demo splits through the runner and its store, in a subprocess."""
    from trainkit import OUTPUTS, tiny_spec, write_splits

    inputs = write_splits(folder / "splits", n_train=64, n_eval=16)
    spec = tiny_spec(
        max_steps=JOB_SPEC_STEPS, eval_every=JOB_SPEC_STEPS, checkpoint_every=JOB_SPEC_STEPS
    )
    out = folder / "out"
    out.mkdir(parents=True)
    cmd = [sys.executable, "-m", "campaign", "train", "--spec", json.dumps(spec)]
    cmd += [a for name, paths in inputs.items() for a in ("--in", f"{name}={paths[0]}")]
    cmd += ["--in", "base_model=", "--state-dir", str(state), "--log", str(folder / "job.log")]
    cmd += [a for name in OUTPUTS for a in ("--out", f"{name}={out / name}")]
    env = {**os.environ, "PYTHONPATH": str(project / "workflow"), "CUDA_VISIBLE_DEVICES": ""}
    env["CAMPAIGN_PROGRESS_SECONDS"] = "0.2"
    return subprocess.Popen(cmd, cwd=project, env=env)


def wait_for_progress(job: subprocess.Popen, state: Path, log: Path, timeout: float = 180):
    deadline = time.monotonic() + timeout
    while True:
        found = find_progress(state / "work")
        if found and found[0][1]["step"] >= 2:
            return found[0]
        assert job.poll() is None, log.read_text() if log.exists() else "job died"
        assert time.monotonic() < deadline, "no progress file with a step after 180 s"
        time.sleep(0.1)


@pytest.mark.slow
def test_status_shows_a_running_training_jobs_step(tiny_project, tmp_path):
    from conftest import campaign

    state = tiny_project / ".campaign"
    job = start_train_job(tiny_project, state, tmp_path / "job")
    try:
        path, record = wait_for_progress(job, state, tmp_path / "job" / "job.log")
        assert record["stage"] == "train" and record["run"].startswith("run-")
        assert record["total"] == JOB_SPEC_STEPS and record["pid"] == job.pid
        assert path.parent.parent == state / "work"  # the job's work folder in the store
        out = campaign(tiny_project, "status", "--state-dir", str(state), check=False).stdout
        running = [
            line for line in out.splitlines() if f"running      train {record['run']}" in line
        ]
        assert running, out
        step = int(running[0].split("step ")[1].split("/")[0])
        assert step >= record["step"] and f"/{JOB_SPEC_STEPS} (" in running[0]
        assert "elapsed, ETA " in running[0] and f"(pid {job.pid})" in running[0]
        # The job log has the lines too, every 0.2 s.
        assert "elapsed, ETA" in (tmp_path / "job" / "job.log").read_text()

        # Killed without a chance to clean up: its progress file is stale, and says so.
        job.send_signal(signal.SIGKILL)
        job.wait(timeout=30)
        assert path.exists()
        out = campaign(tiny_project, "status", "--state-dir", str(state), check=False).stdout
        assert f"not running (stale)  train {record['run']}" in out, out
        assert f"running      train {record['run']}" not in out
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(timeout=30)


def test_interrupted_job_removes_its_progress_file(tiny_project, tmp_path):
    state = tiny_project / ".campaign"
    job = start_train_job(tiny_project, state, tmp_path / "job")
    try:
        path, _ = wait_for_progress(job, state, tmp_path / "job" / "job.log")
        job.send_signal(signal.SIGTERM)  # how a scheduler cancels a job
        assert job.wait(timeout=60) == PREEMPTED_EXIT  # it checkpoints at its step and exits
        assert not path.exists()
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(timeout=30)


def test_progress_leaves_train_outputs_bit_for_bit(tmp_path, monkeypatch):
    """A run reporting every step (lines and file) and one with progress switched off write the
    same model, predictions, metrics and manifest bytes."""
    from trainkit import REPO, context, tiny_spec, write_splits

    import campaign.train.loop as loop
    from campaign.core.hashing import hash_tree
    from campaign.train import run_training

    inputs = write_splits(tmp_path / "splits", n_train=48, n_eval=16)
    spec = tiny_spec(max_steps=6, eval_every=3, checkpoint_every=3)
    monkeypatch.setenv("CAMPAIGN_PROGRESS_SECONDS", "0")
    shown = context(spec, inputs, tmp_path / "shown")
    log = io.StringIO()
    run_training(shown.spec, shown.inputs, shown.outputs, shown.work_dir, REPO, stream=log)
    assert log.getvalue().count("elapsed, ETA") == 6  # a line at every step
    assert not (shown.work_dir / PROGRESS_FILE).exists()

    class Off:
        def update(self, step, **fields):
            pass

        def close(self):
            pass

    monkeypatch.setattr(loop, "job_progress", lambda *a, **k: Off())
    quiet = context(spec, inputs, tmp_path / "quiet")
    run_training(
        quiet.spec, quiet.inputs, quiet.outputs, quiet.work_dir, REPO, stream=io.StringIO()
    )
    for name in ("model", "metrics", "predictions_validation", "predictions_test", "run_manifest"):
        assert hash_tree(shown.outputs[name]) == hash_tree(quiet.outputs[name]), name
