"""How far a recomputed output is from the stored one, when their bytes differ.

`campaign reproduce` demands bit-for-bit equality; an outside trainer (train.command) may not be
deterministic on a machine, and its user needs to know whether the outputs came back within
float tolerance or really differ. Only numbers may differ: every other value, column, row, tensor
name and shape must be equal, or the outputs are simply different (None).
"""

from __future__ import annotations

from pathlib import Path

# Below this largest absolute difference, a differing output "reproduced within tolerance".
REPRODUCE_ATOL = 1e-5


def max_abs_diff(stored: Path, recomputed: Path) -> float | None:
    """The largest absolute difference between the numbers of two outputs (files or folders of
    Parquet tables, safetensors weights and other files equal byte for byte); None when they
    differ in anything but float values."""
    stored, recomputed = Path(stored), Path(recomputed)
    if stored.is_dir() and recomputed.is_dir():
        names = sorted(p.relative_to(stored) for p in stored.rglob("*") if p.is_file())
        other = sorted(p.relative_to(recomputed) for p in recomputed.rglob("*") if p.is_file())
        if names != other:
            return None
        diffs = [_file_diff(stored / n, recomputed / n) for n in names]
        return None if any(d is None for d in diffs) else max(diffs, default=0.0)
    if stored.is_file() and recomputed.is_file():
        return _file_diff(stored, recomputed)
    return None


def _file_diff(a: Path, b: Path) -> float | None:
    if a.read_bytes() == b.read_bytes():
        return 0.0
    try:
        if a.suffix == ".safetensors":
            return _tensors_diff(a, b)
        return _table_diff(a, b)
    except Exception:  # not a table or not weights: bytes that differ are different
        return None


def _tensors_diff(a: Path, b: Path) -> float | None:
    from safetensors.torch import load_file

    x, y = load_file(str(a)), load_file(str(b))
    if x.keys() != y.keys() or any(x[k].shape != y[k].shape for k in x):
        return None
    return max(((x[k].double() - y[k].double()).abs().max().item() for k in x), default=0.0)


def _table_diff(a: Path, b: Path) -> float | None:
    import numpy as np
    import pandas as pd

    x, y = pd.read_parquet(a), pd.read_parquet(b)
    if list(x.columns) != list(y.columns) or len(x) != len(y):
        return None
    worst = 0.0
    for column in x.columns:
        if pd.api.types.is_float_dtype(x[column]) and pd.api.types.is_float_dtype(y[column]):
            u, v = x[column].to_numpy(float), y[column].to_numpy(float)
            if not np.array_equal(np.isnan(u), np.isnan(v)):
                return None
            keep = ~np.isnan(u)
            worst = max(worst, float(np.abs(u[keep] - v[keep]).max(initial=0.0)))
        elif not x[column].equals(y[column]):
            return None
    return worst
