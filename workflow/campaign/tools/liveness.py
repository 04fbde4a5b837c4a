"""Whether a job recorded as running still runs: its process on this host, or its SLURM job
(squeue's state). Used by `campaign status` (a job's state) and `campaign gc` (a busy key)."""

from __future__ import annotations

import os
import socket
import subprocess


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def slurm_job_alive(job_id: str) -> bool:
    try:
        proc = subprocess.run(
            ["squeue", "-h", "-j", str(job_id), "-o", "%T"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    # Only these states mean the job may still write; CANCELLED, TIMEOUT, OUT_OF_MEMORY,
    # NODE_FAIL, PREEMPTED, ... mean it is over (squeue lists ended jobs for MinJobAge).
    alive = {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "REQUEUED",
        "RESIZING",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "STAGE_OUT",
        "SIGNALING",
    }
    return proc.returncode == 0 and proc.stdout.strip() in alive


def record_alive(record: dict) -> str | None:
    """Where a job recorded as running still runs ("pid 12", "slurm job 34"), or None if it died."""
    if record.get("slurm_job_id"):
        job = record["slurm_job_id"]
        return f"slurm job {job}" if slurm_job_alive(job) else None
    if (
        record.get("host") == socket.gethostname()
        and record.get("pid")
        and pid_alive(record["pid"])
    ):
        return f"pid {record['pid']}"
    return None
