"""The free disk, a machine measurement: taken when it is used, never read back from the store (a
measurement stored with an entry is the free space of the day the entry was made).

A module of its own, imported only by the stages that measure it (the preflight and the plan):
every module a stage imports is part of its code version, so a helper in a module that every
stage imports (core.fsutil) would change every stage's key."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def free_disk_bytes(path: str | os.PathLike) -> int:
    """Free bytes on the file system holding `path` (its nearest existing parent)."""
    path = Path(path).expanduser().absolute()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free
