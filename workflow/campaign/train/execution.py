"""How a stage that computes with torch runs, pinned so that its result is a function of its key.

`settings(threads)` says, without initializing CUDA or importing torch on the CPU, what the result
of a training or prediction job depends on about the machine: the device type, the number of
compute threads (the order of floating-point reductions on the CPU depends on it), deterministic
algorithms, and on CUDA the torch CUDA and cuDNN versions. The runner puts them in the key;
`pin(settings)` applies them in the job before the stage runs, and `campaign reproduce` applies
the ones an entry recorded.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

from campaign.core.errors import PREEMPTED_EXIT, CampaignError, Preempted
from campaign.train.devices import gpu_count

DEVICE_ENV = "CAMPAIGN_DEVICE"  # set by pin(): the device select_device() must return
_CUDA_LINE = re.compile(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.M)


def torch_cuda_build() -> str | None:
    """The CUDA version torch was built for (None for a CPU build), read from torch/version.py
    without importing torch (about 2 s)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise CampaignError("torch is not installed; run scripts/setup.sh")
    version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        match = _CUDA_LINE.search(version_file.read_text(encoding="utf-8"))
    except OSError:
        return None
    return match.group(1) if match else None


def _visible_cards() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v.strip() and v.strip() != "-1"])
    return gpu_count()


def settings(threads: int) -> dict:
    """What a torch job's result depends on about the machine; part of its content key."""
    cuda = torch_cuda_build()
    device = "cuda" if cuda is not None and _visible_cards() > 0 else "cpu"
    out = {"device": device, "threads": int(threads), "deterministic": True}
    if device == "cuda":
        import torch

        out["cuda"] = torch.version.cuda
        out["cudnn"] = torch.backends.cudnn.version()
    return out


def pin(settings: dict) -> None:
    """Apply `settings` in this process, before the stage builds a model."""
    threads = int(settings["threads"])
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    # cuBLAS is deterministic only with a fixed workspace (set before CUDA starts).
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    os.environ[DEVICE_ENV] = settings["device"]
    import torch

    torch.set_num_threads(threads)
    deterministic = bool(settings.get("deterministic", True))
    torch.use_deterministic_algorithms(deterministic, warn_only=True)
    torch.backends.cudnn.benchmark = False
    if deterministic and settings["device"] == "cuda":
        # The fused attention kernels' backward passes (flash, memory-efficient, cuDNN) are not
        # deterministic, and use_deterministic_algorithms only warns about them: on an H200
        # they were chosen for the test model's attention. Math attention is deterministic.
        for name in ("enable_flash_sdp", "enable_mem_efficient_sdp", "enable_cudnn_sdp"):
            if hasattr(torch.backends.cuda, name):
                getattr(torch.backends.cuda, name)(False)


# ------------------------------------------------------------------ a worker of train.devices > 1
# The entry `distributed.launch` starts N times (torchrun or srun). It lives here, in the module
# every training job's code version already covers, and imports the stage lazily: the stage does
# not import this module, so no cycle.
def worker_main(request_path: str) -> int:
    """One worker: pin the execution settings, train, rank 0 writes the outputs."""
    from campaign.train.distributed import STOPPED, rank_and_world
    from campaign.train.stage import run_training

    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    if request.get("execution"):
        pin(request["execution"])
    rank, _world = rank_and_world()
    try:
        run_training(
            request["spec"],
            {k: [Path(p) for p in v] for k, v in request["inputs"].items()},
            {k: Path(v) for k, v in request["outputs"].items()},
            Path(request["work_dir"]),
            Path(request["root"]),
            execution=request.get("execution"),
            key=request.get("key"),
        )
    except Preempted as e:
        if rank == 0:
            note = {"signum": e.signum, "step": e.step}
            (Path(request["work_dir"]) / STOPPED).write_text(json.dumps(note))
        return PREEMPTED_EXIT
    except CampaignError as e:
        print(f"error: rank {rank}: {e}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1]))
