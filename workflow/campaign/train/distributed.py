"""One run on several devices (train.devices: N): N processes with torch.distributed, gloo on the
CPU and NCCL on CUDA, launched by `torchrun` on a workstation and by `srun` inside a SLURM job.

Every process builds the same model from the same seed, takes the same global batch (the data
order is a function of the run's seed alone), runs its share of the micro-batches (micro-batch j
of a step goes to rank j mod N) with the loss normalized over the targets of the whole global
batch, and the gradients are summed over the processes before the optimizer step: the step of
one process accumulating N x grad_accum micro-batches, summed in another order. Only rank 0
evaluates and writes checkpoints and outputs.

The runner's process (the stage) stays one process: it launches the N workers on a request file
in the run's work folder and commits what rank 0 wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from campaign.core.errors import CampaignError, Preempted

REQUEST = "distributed-request.json"  # in the work folder: what the workers run
STOPPED = "distributed-stopped.json"  # rank 0's note when the workers were preempted


# ------------------------------------------------------------------ inside a worker
def rank_and_world(env: dict | None = None) -> tuple[int, int]:
    """(rank, world size) of this process: torchrun's RANK/WORLD_SIZE, srun's SLURM_PROCID/
    SLURM_NTASKS under CAMPAIGN_DISTRIBUTED=srun, else (0, 1)."""
    env = os.environ if env is None else env
    if "RANK" in env and "WORLD_SIZE" in env:
        return int(env["RANK"]), int(env["WORLD_SIZE"])
    if env.get("CAMPAIGN_DISTRIBUTED") == "srun":
        return int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"])
    return 0, 1


def launcher(env: dict | None = None) -> str:
    """What started this process: "srun", "torchrun", or "one process"."""
    env = os.environ if env is None else env
    if env.get("CAMPAIGN_DISTRIBUTED") == "srun":
        return "srun"
    return "torchrun" if "RANK" in env and "WORLD_SIZE" in env else "one process"


def init(device, rank: int, world: int) -> None:
    """Join the process group (gloo on the CPU, NCCL on CUDA); no-op for one process."""
    if world == 1:
        return
    import torch.distributed as dist

    if dist.is_initialized():
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        raise CampaignError("train.devices: MASTER_PORT is not set for the worker processes")
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=world)


def sum_over_processes(tensors, device) -> None:
    """All-reduce (sum) each tensor in place over the process group (NCCL needs them on CUDA)."""
    import torch.distributed as dist

    for t in tensors:
        if device.type == "cuda" and t.device.type != "cuda":
            moved = t.to(device)
            dist.all_reduce(moved)
            t.copy_(moved.to(t.device))
        else:
            dist.all_reduce(t)


def any_process(flag: bool, device) -> bool:
    """True when any process has `flag` set (a stop signal seen by one of them)."""
    import torch

    t = torch.tensor([1.0 if flag else 0.0], device=device)
    import torch.distributed as dist

    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


# ------------------------------------------------------------------ the launching stage
def launch_command(devices: int, request: Path, env: dict | None = None) -> list[str]:
    """torchrun on a workstation; srun (one task per device) inside a SLURM allocation."""
    env = os.environ if env is None else env
    worker = [sys.executable, "-m", "campaign.train.execution", str(request)]
    if "SLURM_JOB_ID" in env and shutil.which("srun"):
        # --overlap: the job's own step (Snakemake's) holds the allocation's CPUs already.
        return ["srun", f"--ntasks={devices}", "--overlap", "--kill-on-bad-exit=1", *worker]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={devices}",
        *worker[1:],
    ]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(
    devices: int,
    spec: dict,
    inputs: dict[str, list[Path]],
    outputs: dict[str, Path],
    work_dir: Path,
    root: Path,
    execution: dict | None,
    key: str | None,
) -> None:
    """Run the N workers to the end; raise Preempted when they stopped for a signal."""
    work_dir = Path(work_dir)
    request = work_dir / REQUEST
    stopped = work_dir / STOPPED
    stopped.unlink(missing_ok=True)
    request.write_text(
        json.dumps(
            {
                "spec": spec,
                "inputs": {k: [str(Path(p).resolve()) for p in v] for k, v in inputs.items()},
                "outputs": {k: str(Path(v).resolve()) for k, v in outputs.items()},
                "work_dir": str(work_dir.resolve()),
                "root": str(Path(root).resolve()),
                "execution": execution,
                "key": key,
            }
        )
    )
    env = dict(os.environ)
    package = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = package + (os.pathsep + env["PYTHONPATH"] if "PYTHONPATH" in env else "")
    if "SLURM_JOB_ID" in env and shutil.which("srun"):
        env.update(CAMPAIGN_DISTRIBUTED="srun", MASTER_PORT=str(_free_port()))
    cmd = launch_command(devices, request, env)
    proc = subprocess.Popen(cmd, env=env, cwd=root)
    interrupted: BaseException | None = None
    try:
        code = proc.wait()
    except BaseException as e:
        # A signal to the stage (the scheduler's): the workers stop at a step boundary too.
        interrupted = e
        proc.terminate()
        code = proc.wait()
    if stopped.exists():
        note = json.loads(stopped.read_text())
        stopped.unlink()
        raise Preempted(note["signum"], note["step"])
    if interrupted is not None:
        raise interrupted
    if code != 0:
        raise CampaignError(
            f"train.devices: {devices} worker processes exited {code} (the job log has theirs)"
        )
