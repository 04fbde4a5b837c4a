"""What the preflight phase records about the software and hardware a campaign runs on.

Every field is present on every machine: a field that does not apply (no CUDA, no peft, no
nvidia-smi) is None, never an error, so a report from a laptop and one from a GPU node compare
key by key. torch and transformers are imported inside the functions (seconds to import).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from typing import Any

from campaign.train import device_info

REPORT_KEYS = (
    "python",
    "platform",
    "torch",
    "transformers",
    "tokenizers",
    "peft",
    "cuda_available",
    "cuda_runtime",
    "cudnn",
    "driver_version",
    "device_type",
    "device_name",
    "device_count",
    "compute_capability",
    "device_memory_bytes",
    "bf16_supported",
    "bf16_check",
    "attn_implementation",
    "sdpa_backends",
    "cpu_count",
    "cpu_affinity",
    "memory_total_bytes",
)
# Tiny models whose config shows the attention transformers picks by default.
ATTENTION_PROBES = ("bert", "gpt2")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _nvidia_smi_driver() -> str | None:
    """The driver version nvidia-smi reports, or None without nvidia-smi or a card."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return lines[0] if out.returncode == 0 and lines else None


def cpu_bf16_works() -> bool:
    """True when a bf16 autocast matmul runs on this CPU and gives a bf16, close result."""
    import torch

    try:
        a = torch.linspace(-1, 1, 64).reshape(8, 8)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = a @ a.T
        return out.dtype == torch.bfloat16 and torch.allclose(out.float(), a @ a.T, atol=0.1)
    except (RuntimeError, TypeError):
        return False


def attention_implementations(architectures: tuple[str, ...] = ATTENTION_PROBES) -> dict:
    """{architecture: "sdpa" | "eager" | ...}: what transformers sets for the architecture's
    default model (its AutoModel for its default config, built on the meta device: no memory)."""
    import torch
    import transformers as tf

    out: dict[str, str | None] = {}
    for arch in architectures:
        try:
            with torch.device("meta"):
                model = tf.AutoModel.from_config(tf.AutoConfig.for_model(arch))
            out[arch] = model.config._attn_implementation
        except Exception:  # a report field: never a failure
            out[arch] = None
    return out


def _sdpa_backends() -> dict[str, bool] | None:
    import torch

    if not torch.cuda.is_available():
        return None
    b = torch.backends.cuda
    return {
        "flash": b.flash_sdp_enabled(),
        "mem_efficient": b.mem_efficient_sdp_enabled(),
        "cudnn": b.cudnn_sdp_enabled(),
        "math": b.math_sdp_enabled(),
    }


def environment_report() -> dict[str, Any]:
    """Versions, device and precision support, as a JSON-able dict with the keys of REPORT_KEYS."""
    import psutil
    import torch

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    info = device_info(device)
    capability = info.get("capability")
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "transformers": _version("transformers"),
        "tokenizers": _version("tokenizers"),
        "peft": _version("peft"),
        "cuda_available": cuda,
        "cuda_runtime": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        # Also without CUDA: a CPU-only torch on a GPU machine is worth seeing.
        "driver_version": info.get("driver_version") or _nvidia_smi_driver(),
        "device_type": device.type,
        "device_name": info.get("name"),
        "device_count": torch.cuda.device_count() if cuda else 0,
        "compute_capability": ".".join(map(str, capability)) if capability else None,
        "device_memory_bytes": torch.cuda.get_device_properties(device).total_memory
        if cuda
        else None,
        "bf16_supported": torch.cuda.is_bf16_supported() if cuda else cpu_bf16_works(),
        "bf16_check": "torch.cuda.is_bf16_supported" if cuda else "cpu autocast matmul",
        "attn_implementation": attention_implementations(),
        "sdpa_backends": _sdpa_backends(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_total_bytes": psutil.virtual_memory().total,
    }
    return report


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_show(v)}" for k, v in value.items())
    if isinstance(value, int) and value >= 2**30:
        return f"{value / 2**30:.1f} GiB"
    return str(value)


def format_report(report: dict[str, Any]) -> str:
    """The report as `key: value` lines, in REPORT_KEYS order, then any extra keys."""
    keys = [k for k in REPORT_KEYS if k in report] + [k for k in report if k not in REPORT_KEYS]
    width = max(len(k) for k in keys)
    return "\n".join(f"{k.ljust(width)}  {_show(report[k])}" for k in keys)
