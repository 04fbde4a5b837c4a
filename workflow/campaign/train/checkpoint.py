"""Training checkpoints: one dict per file, written atomically, verified on load, last K kept.

A checkpoint holds everything the next step depends on — model, optimizer, scheduler and grad
scaler state, every RNG (python, numpy, torch CPU, CUDA), the data-order position and the step —
so a resumed run's weights are bitwise those of an uninterrupted one (on CPU).

File name: ckpt-<step, 8 digits>.<first 32 hex of the BLAKE3 of its bytes>.pt. The digest in the
name lets a reader tell a damaged file from a good one before unpickling it.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from campaign.core.hashing import hash_file

FORMAT = 1
_NAME = re.compile(r"^ckpt-(\d{8})\.([0-9a-f]{32})\.pt$")
_DIGEST_HEX = 32


def rng_state() -> dict[str, Any]:
    """All global RNG states, as plain values and tensors (loadable with weights_only=True)."""
    np_state = np.random.get_state(legacy=False)
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "bit_generator": np_state["bit_generator"],
            "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],
    }
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": n["bit_generator"],
            "state": {"key": n["key"].numpy().astype(np.uint32), "pos": n["pos"]},
            "has_gauss": n["has_gauss"],
            "gauss": n["gauss"],
        }
    )
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def checkpoint_files(folder: Path) -> list[tuple[int, Path]]:
    """Complete checkpoint files in `folder`, oldest step first (temporary files excluded)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        m = _NAME.match(path.name)
        if m:
            found.append((int(m.group(1)), path))
    return sorted(found)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(folder: Path, state: dict[str, Any], keep: int) -> Path:
    """Write `state` (must hold "step") atomically; then delete all but the newest `keep`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    step = int(state["step"])
    tmp = folder / f".ckpt-{step:08d}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(tmp, "wb") as f:
            torch.save({"format": FORMAT, **state}, f)
            f.flush()
            os.fsync(f.fileno())
        digest = hash_file(tmp)[:_DIGEST_HEX]
        final = folder / f"ckpt-{step:08d}.{digest}.pt"
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    _fsync_dir(folder)
    # Keep the newest `keep` WRITTEN, not the highest steps: a run resumed from an earlier step
    # (a damaged newest checkpoint) must not delete the checkpoint it has just written.
    for old in written_order(folder)[:-keep]:
        with contextlib.suppress(FileNotFoundError):
            old.unlink()
    return final


def written_order(folder: Path) -> list[Path]:
    """Complete checkpoint files, oldest write first (modification time, then step)."""
    stamped = []
    for step, path in checkpoint_files(folder):
        with contextlib.suppress(FileNotFoundError):
            stamped.append((path.stat().st_mtime_ns, step, path))
    return [path for _mtime, _step, path in sorted(stamped)]


def _note(message: str) -> None:
    print(f"checkpoint: {message}", file=sys.stderr, flush=True)


def load_latest(
    folder: Path,
    expect: dict[str, Any],
    note: Callable[[str], None] = _note,
) -> dict[str, Any] | None:
    """The newest checkpoint that is intact and matches `expect` (e.g. the spec hash), or None.

    Damaged, partial or foreign files are skipped with a note; leftover temporary files from a
    killed write are removed.
    """
    folder = Path(folder)
    if folder.is_dir():
        for tmp in folder.glob(".ckpt-*.tmp"):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
    for step, path in reversed(checkpoint_files(folder)):
        digest = _NAME.match(path.name).group(2)
        if hash_file(path)[:_DIGEST_HEX] != digest:
            note(f"skipping {path.name}: its bytes do not match the digest in its name")
            continue
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # a damaged pickle raises many types; skip the file either way
            note(f"skipping {path.name}: unreadable ({type(e).__name__}: {e})")
            continue
        if state.get("format") != FORMAT or state.get("step") != step:
            note(f"skipping {path.name}: not a format-{FORMAT} checkpoint of step {step}")
            continue
        mismatched = [k for k, v in expect.items() if state.get(k) != v]
        if mismatched:
            note(f"skipping {path.name}: written for another {', '.join(mismatched)}")
            continue
        return state
    return None
