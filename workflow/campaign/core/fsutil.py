"""Atomic, durable file writes: temporary name in the same folder, fsync, rename, fsync folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path


def fsync_path(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, mode: int | None = None) -> None:
    """A reader sees the old file or the new one, never half; a crash leaves the old one.

    The file is owner-only (mkstemp's 0600) unless ``mode`` says otherwise.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_path(path.parent)  # make the rename itself durable


def atomic_write_text(path: str | os.PathLike, text: str, mode: int | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def remove_tree(path: Path) -> None:
    """Remove a tree that may hold read-only files and folders. Parts another process removed
    meanwhile are not an error (gc and a job may clean the same leftovers)."""

    def onerror(func, p, exc_info):
        if isinstance(exc_info[1], FileNotFoundError):
            return
        with contextlib.suppress(FileNotFoundError):
            os.chmod(Path(p).parent, 0o700)
            os.chmod(p, 0o700)
        with contextlib.suppress(FileNotFoundError):
            func(p)

    path = Path(path)
    with contextlib.suppress(FileNotFoundError):
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path, onerror=onerror)


def free_disk_bytes(path: str | os.PathLike) -> int:
    """Free bytes on the file system holding `path` (its nearest existing parent).

    A machine measurement: taken when it is used, never read back from the store (a measurement
    stored with an entry is the free space of the day the entry was made)."""
    path = Path(path).absolute()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free
