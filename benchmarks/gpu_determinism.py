"""GPU check (run on a machine with a CUDA card): does a training job reproduce bit for bit on
CUDA under the execution settings the runner pins (deterministic algorithms, a fixed cuBLAS
workspace, cudnn.benchmark off), in fp32 and in bf16? Trains the tiny test model twice per
precision through the train stage and compares every output's hash but the timings.

    PYTHONPATH=workflow:tests python benchmarks/gpu_determinism.py
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import time
from pathlib import Path

missing = [
    m
    for m in ("torch", "transformers", "tokenizers", "pandas", "pyarrow", "blake3", "safetensors")
    if importlib.util.find_spec(m) is None
]
if missing:
    sys.exit(f"missing on this machine: {', '.join(missing)}")

import torch  # noqa: E402
from trainkit import context, tiny_spec, write_splits  # noqa: E402

from campaign.core.hashing import hash_tree  # noqa: E402
from campaign.train import execution  # noqa: E402
from campaign.train.stage import stage  # noqa: E402


def main() -> int:
    if not torch.cuda.is_available():
        sys.exit("no CUDA card visible")
    settings = execution.settings(1)
    execution.pin(settings)
    print(
        f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN "
        f"{torch.backends.cudnn.version()}, {torch.cuda.get_device_name(0)}; settings {settings}"
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        inputs = write_splits(root / "data", 200, 60)
        for precision in ("fp32", "bf16"):
            spec = tiny_spec(precision=precision, hidden=64, layers=2, max_steps=24)
            hashes, seconds = [], []
            for attempt in ("a", "b"):
                t0 = time.perf_counter()
                ctx = context(spec, inputs, root / precision / attempt)
                ctx.execution = settings
                stage(ctx)
                seconds.append(time.perf_counter() - t0)
                hashes.append({n: hash_tree(p) for n, p in ctx.outputs.items() if n != "timings"})
            same = [n for n in hashes[0] if hashes[0][n] == hashes[1][n]]
            differ = [n for n in hashes[0] if hashes[0][n] != hashes[1][n]]
            rows.append((precision, same, differ, seconds))
    print(f"{'precision':9}  {'same':>4}  {'differ':>6}  seconds     outputs that differ")
    for precision, same, differ, seconds in rows:
        print(
            f"{precision:9}  {len(same):4}  {len(differ):6}  "
            f"{seconds[0]:.1f}/{seconds[1]:.1f}  {', '.join(differ) or '-'}"
        )
    return 1 if any(r[2] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
