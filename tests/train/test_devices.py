"""Device choice: one card per job by lock file, a scheduler's assignment kept, progress lines."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from campaign.core.errors import CampaignError
from campaign.train import devices

# Takes a card, prints CUDA_VISIBLE_DEVICES, holds the card until killed (or argv[3] seconds).
HOLDER = """
import os, sys, time
from campaign.train.devices import acquire_gpu
from campaign.core.errors import CampaignError
try:
    lease = acquire_gpu(sys.argv[1], float(sys.argv[2]))
except CampaignError as e:
    print(f"error: {e}", flush=True)
    sys.exit(1)
print(lease.source, os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
time.sleep(float(sys.argv[3]))
"""


def holder_env(cards: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_JOB_ID", "CUDA_VISIBLE_DEVICES")}
    env["CAMPAIGN_FAKE_GPU_COUNT"] = str(cards)
    return env


def start(lock_dir: Path, timeout_s: float, hold_s: float = 60) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock_dir), str(timeout_s), str(hold_s)],
        env=holder_env(4),
        stdout=subprocess.PIPE,
        text=True,
    )


def test_four_jobs_get_four_cards_and_a_fifth_waits_or_fails(tmp_path):
    locks = tmp_path / "locks"
    jobs = [start(locks, timeout_s=30) for _ in range(4)]
    try:
        lines = [job.stdout.readline().split() for job in jobs]
        assert all(line[0] == "lock" for line in lines), lines
        assert sorted(line[1] for line in lines) == ["0", "1", "2", "3"]

        # A fifth job with a short timeout: a one-line error, non-zero exit.
        t0 = time.monotonic()
        fifth = start(locks, timeout_s=0.5)
        out, _ = fifth.communicate(timeout=30)
        assert fifth.returncode == 1 and time.monotonic() - t0 >= 0.5
        assert out.startswith("error: no free GPU: all 4 card(s) locked")

        # A fifth job that waits gets the card of a job that dies (SIGKILL frees the flock).
        waiting = start(locks, timeout_s=30, hold_s=0)
        time.sleep(0.5)
        assert waiting.poll() is None
        freed = lines[2][1]
        jobs[2].kill()
        jobs[2].wait()
        out, _ = waiting.communicate(timeout=30)
        assert out.split() == ["lock", freed]
    finally:
        for job in jobs:
            job.kill()
            job.wait()


NOBODY = 65534
WORKFLOW = Path(devices.__file__).resolve().parents[2]  # the folder holding the package


def as_nobody() -> None:
    """preexec_fn: become a second user (nobody), with the CLI's owner-only umask."""
    os.umask(0o077)
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def nobody_python() -> str | None:
    """An interpreter the second user can run that imports this checkout's devices module (the
    virtual environment's may link into root's home)."""
    for python in (sys.executable, "/usr/bin/python3", shutil.which("python3")):
        if not python:
            continue
        try:
            check = subprocess.run(
                [python, "-c", "import campaign.train.devices"],
                env=nobody_env(1),
                preexec_fn=as_nobody,
                cwd="/",
                capture_output=True,
            )
        except PermissionError:
            continue
        if check.returncode == 0:
            return python
    return None


def nobody_env(cards: int) -> dict:
    return {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(WORKFLOW),
        "PYTHONDONTWRITEBYTECODE": "1",
        "CAMPAIGN_FAKE_GPU_COUNT": str(cards),
    }


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="needs root, to start a job as a second user (uid 65534)",
)
def test_a_second_user_shares_the_cards_of_a_lock_dir_root_created(tmp_path):
    python = nobody_python()
    if python is None:
        pytest.skip(f"no python that uid {NOBODY} can run imports {WORKFLOW}/campaign")
    # A fresh folder under the shared tmp, two levels the campaign creates on the way.
    top = Path(tempfile.gettempdir()) / f"campaign-test-{uuid.uuid4().hex[:8]}"
    lock_dir = top / "machine" / "gpu-locks"
    old_umask = os.umask(0o077)  # what `campaign` sets: results and store are owner-only
    try:
        lease = devices.acquire_gpu(lock_dir, 0, env={"CAMPAIGN_FAKE_GPU_COUNT": "2"})
    finally:
        os.umask(old_umask)
    try:
        assert lease.index == 0
        assert stat.S_IMODE(lock_dir.stat().st_mode) == 0o1777
        assert stat.S_IMODE((lock_dir / "gpu-0.lock").stat().st_mode) == 0o666

        def job(cards: int) -> list[str]:
            proc = subprocess.run(
                [python, "-c", HOLDER, str(lock_dir), "0", "0"],
                env=nobody_env(cards),
                preexec_fn=as_nobody,
                cwd="/",
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert proc.returncode == 0, proc.stdout + proc.stderr
            return proc.stdout.split()

        assert job(cards=2) == ["lock", "1"]  # root holds card 0; the other user gets card 1
        made = lock_dir / "gpu-1.lock"
        assert made.stat().st_uid == NOBODY and stat.S_IMODE(made.stat().st_mode) == 0o666
        lease.release()
        assert job(cards=1) == ["lock", "0"]  # the lock file root created opens for nobody
        # ... and root takes the card the other user's job created the lock file of.
        assert devices.acquire_gpu(lock_dir, 0, env={"CAMPAIGN_FAKE_GPU_COUNT": "2"}).index == 0
    finally:
        lease.release()
        shutil.rmtree(top, ignore_errors=True)


def test_scheduler_assignment_is_kept(tmp_path):
    env = {"SLURM_JOB_ID": "42", "CUDA_VISIBLE_DEVICES": "3", "CAMPAIGN_FAKE_GPU_COUNT": "4"}
    lease = devices.acquire_gpu(tmp_path, 0, env=env)
    assert (lease.source, lease.visible_devices, env["CUDA_VISIBLE_DEVICES"]) == (
        "scheduler",
        "3",
        "3",
    )
    assert not list(tmp_path.iterdir())  # no lock taken
    preset = {"CUDA_VISIBLE_DEVICES": "1,2", "CAMPAIGN_FAKE_GPU_COUNT": "4"}
    assert devices.acquire_gpu(tmp_path, 0, env=preset).visible_devices == "1,2"


def test_no_card_means_cpu_and_no_lock(tmp_path):
    env = {"CAMPAIGN_FAKE_GPU_COUNT": "0"}
    lease = devices.acquire_gpu(tmp_path / "locks", 0, env=env)
    assert lease.source == "none" and "CUDA_VISIBLE_DEVICES" not in env
    assert str(devices.select_device()) == "cpu"


def test_lease_release_frees_the_card(tmp_path):
    env = {"CAMPAIGN_FAKE_GPU_COUNT": "1"}
    lease = devices.acquire_gpu(tmp_path, 0, env=env)
    assert lease.index == 0 and env["CUDA_VISIBLE_DEVICES"] == "0"
    with pytest.raises(CampaignError, match="no free GPU"):
        devices.acquire_gpu(tmp_path, 0, env={"CAMPAIGN_FAKE_GPU_COUNT": "1"})
    lease.release()
    assert devices.acquire_gpu(tmp_path, 0, env={"CAMPAIGN_FAKE_GPU_COUNT": "1"}).index == 0


def test_bad_settings_are_one_line_errors():
    with pytest.raises(CampaignError, match="CAMPAIGN_FAKE_GPU_COUNT='two'"):
        devices.gpu_count({"CAMPAIGN_FAKE_GPU_COUNT": "two"})
    with pytest.raises(CampaignError, match="CAMPAIGN_GPU_WAIT_S='soon'"):
        devices.lease_from_env({"CAMPAIGN_GPU_WAIT_S": "soon", "CAMPAIGN_FAKE_GPU_COUNT": "0"})


def test_precision_checks():
    import torch

    cpu = torch.device("cpu")
    with pytest.raises(CampaignError, match="fp16 needs a CUDA device"):
        devices.check_precision(cpu, "fp16")
    devices.check_precision(cpu, "bf16")
    with devices.autocast(cpu, "bf16"):
        y = torch.ones(2, 2) @ torch.ones(2, 2)
    assert y.dtype == torch.bfloat16
    with devices.autocast(cpu, "fp32"):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
