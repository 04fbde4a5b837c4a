"""Where a training job runs: a GPU card taken by file lock (or the scheduler's), else the CPU.

Light at import (no torch): the card must be chosen and CUDA_VISIBLE_DEVICES set before torch
initializes CUDA, so `acquire_gpu` runs first and torch is imported only by the later helpers.

Machine settings, not results, so they come from the environment rather than params.yaml:
    CAMPAIGN_GPU_LOCK_DIR     folder of per-card lock files shared by every job on the machine,
                              of every user (default: <tmp>/campaign-gpu-locks); created mode
                              1777 like /tmp, its lock files 0666, whatever the umask
    CAMPAIGN_GPU_WAIT_S       how long a job waits for a free card before failing (default 3600)
    CAMPAIGN_FAKE_GPU_COUNT   pretend the machine has this many cards (tests, dry runs)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from campaign.core.errors import CampaignError

DEFAULT_WAIT_S = 3600.0
_LOCK_PREFIX = "gpu-"
# Every user's jobs on the machine share the cards, so they share the lock folder and files.
_LOCK_DIR_MODE = 0o1777  # like /tmp: anyone adds a file, only its owner removes it
_PARENT_DIR_MODE = 0o755  # folders made on the way to it: others pass through
_LOCK_FILE_MODE = 0o666


# ------------------------------------------------------------------ card assignment
@dataclass
class GpuLease:
    """The card this process may use. Held until `release()` or process exit (flock)."""

    source: str  # "lock" (we took a card), "scheduler" (SLURM / preset), "none" (no GPU)
    index: int | None = None  # the physical card index taken by lock
    visible_devices: str | None = None  # CUDA_VISIBLE_DEVICES as the job sees it
    _fd: int | None = field(default=None, repr=False)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
            self._fd = None

    def describe(self) -> dict:
        return {"source": self.source, "index": self.index, "visible": self.visible_devices}


def gpu_count(env: dict | None = None) -> int:
    """Number of NVIDIA cards on the machine, found without initializing CUDA."""
    env = os.environ if env is None else env
    fake = env.get("CAMPAIGN_FAKE_GPU_COUNT")
    if fake is not None:
        try:
            return max(0, int(fake))
        except ValueError:
            raise CampaignError(
                f"CAMPAIGN_FAKE_GPU_COUNT={fake!r}: expected a whole number of cards"
            ) from None
    proc_dir = Path("/proc/driver/nvidia/gpus")
    if proc_dir.is_dir():
        return len(list(proc_dir.iterdir()))
    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


def scheduler_assigned(env: dict | None = None) -> bool:
    """True when a scheduler already chose the cards (SLURM, or CUDA_VISIBLE_DEVICES preset)."""
    env = os.environ if env is None else env
    return "SLURM_JOB_ID" in env or "CUDA_VISIBLE_DEVICES" in env


def default_lock_dir() -> Path:
    return Path(tempfile.gettempdir()) / "campaign-gpu-locks"


def make_lock_dir(lock_dir: Path) -> None:
    """Create the lock folder (and missing parents) so that every user can use it, whatever the
    umask (the CLI's is 077). Folders that exist already are left as their owner set them."""
    missing = []
    folder = Path(lock_dir)
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue  # another job made it, and sets its mode
        os.chmod(folder, _LOCK_DIR_MODE if folder == Path(lock_dir) else _PARENT_DIR_MODE)


def _open_lock_file(path: Path) -> int:
    """Open (creating it if needed) a card's lock file, read/writable by every user."""
    for _attempt in range(20):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, _LOCK_FILE_MODE)
        except PermissionError:
            time.sleep(0.05)  # another user's job may be between creating it and opening it up
            continue
        with contextlib.suppress(PermissionError):
            os.fchmod(fd, _LOCK_FILE_MODE)  # the umask cut the mode; only the creator may fix it
        return fd
    raise CampaignError(
        f"GPU lock file {path}: permission denied for uid {os.getuid()}; its owner must make it "
        f"and its folder usable by every user (chmod 666 {path}; chmod 1777 {path.parent})"
    )


def _try_lock(path: Path) -> int | None:
    fd = _open_lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    # Who holds it, for a person looking at a stuck queue; the lock itself is the flock.
    os.ftruncate(fd, 0)
    os.write(fd, f"{socket.gethostname()} pid {os.getpid()}\n".encode())
    return fd


def acquire_gpu(
    lock_dir: Path,
    timeout_s: float,
    env: dict | None = None,
    poll_s: float = 0.2,
) -> GpuLease:
    """Take one free card by lock file and set CUDA_VISIBLE_DEVICES to it (in `env`).

    Under a scheduler (SLURM_JOB_ID or CUDA_VISIBLE_DEVICES already set) the assignment is kept
    as it is. With no card, returns a "none" lease. Waits up to `timeout_s` seconds for a card,
    then raises CampaignError. The lock is a flock, so a killed job frees its card at once.
    """
    env = os.environ if env is None else env
    if scheduler_assigned(env):
        return GpuLease("scheduler", visible_devices=env.get("CUDA_VISIBLE_DEVICES"))
    count = gpu_count(env)
    if count == 0:
        return GpuLease("none")
    lock_dir = Path(lock_dir)
    make_lock_dir(lock_dir)
    deadline = time.monotonic() + timeout_s
    while True:
        for index in range(count):
            fd = _try_lock(lock_dir / f"{_LOCK_PREFIX}{index}.lock")
            if fd is not None:
                env["CUDA_VISIBLE_DEVICES"] = str(index)
                return GpuLease("lock", index=index, visible_devices=str(index), _fd=fd)
        if time.monotonic() >= deadline:
            raise CampaignError(
                f"no free GPU: all {count} card(s) locked in {lock_dir} for {timeout_s:g} s; "
                f"raise CAMPAIGN_GPU_WAIT_S or run fewer GPU jobs at once"
            )
        time.sleep(poll_s)


def lease_from_env(env: dict | None = None) -> GpuLease:
    """`acquire_gpu` with the machine settings from the environment (see the module doc)."""
    env = os.environ if env is None else env
    lock_dir = Path(env.get("CAMPAIGN_GPU_LOCK_DIR") or default_lock_dir())
    raw = env.get("CAMPAIGN_GPU_WAIT_S")
    try:
        timeout_s = DEFAULT_WAIT_S if raw is None else float(raw)
    except ValueError:
        raise CampaignError(f"CAMPAIGN_GPU_WAIT_S={raw!r}: expected seconds") from None
    return acquire_gpu(lock_dir, timeout_s, env)


# ------------------------------------------------------------------ torch device and precision
def select_device():
    """torch.device for this job: the device its execution settings named (CAMPAIGN_DEVICE, set
    by campaign.train.execution.pin), else CUDA when present (the leased card), else CPU."""
    import torch

    pinned = os.environ.get("CAMPAIGN_DEVICE")
    if pinned == "cuda" and not torch.cuda.is_available():
        raise CampaignError("this job's key says cuda, but torch sees no CUDA device")
    if pinned in ("cpu", "cuda"):
        return torch.device(pinned)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def check_precision(device, precision: str) -> None:
    """Fail with a clear message when the device cannot run the precision (no silent fallback)."""
    import torch

    if precision == "fp16" and device.type != "cuda":
        raise CampaignError(
            "train.precision: fp16 needs a CUDA device and this job runs on the CPU; "
            "use bf16 (CPU autocast) or fp32"
        )
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise CampaignError(
            f"train.precision: bf16 is not supported on {torch.cuda.get_device_name(0)}; "
            "use fp16 or fp32"
        )


def autocast(device, precision: str):
    """The forward-pass autocast context for a precision (fp32: none). Weights stay fp32."""
    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def _cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _driver_version() -> str | None:
    with contextlib.suppress(OSError):
        text = Path("/proc/driver/nvidia/version").read_text()
        for word in text.split():
            if word[:1].isdigit() and word.count(".") >= 1:
                return word
    return None


def device_info(device, lease: GpuLease | None = None) -> dict[str, Any]:
    """What the run manifest records about the hardware and its software stack."""
    import torch

    info: dict[str, Any] = {
        "type": device.type,
        "torch_threads": torch.get_num_threads(),
        "cuda_version": torch.version.cuda,
        "driver_version": _driver_version(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    if device.type == "cuda":
        info["name"] = torch.cuda.get_device_name(device)
        info["capability"] = list(torch.cuda.get_device_capability(device))
    else:
        info["name"] = _cpu_name()
    if lease is not None:
        info["lease"] = lease.describe()
    return info
