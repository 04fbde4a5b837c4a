"""Content hashes (BLAKE3) for bytes, files, folders and JSON-able values."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3

ALGORITHM = "blake3"
_CHUNK_BYTES = 1 << 20


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def hash_bytes(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()


def hash_value(value: Any) -> str:
    """Hash of a JSON-able value via its canonical JSON text."""
    return hash_bytes(canonical_json(value).encode("utf-8"))


def hash_file(path: str | os.PathLike) -> str:
    """Hash of one file's bytes. Large files are memory-mapped (and hashed on all cores)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size < _CHUNK_BYTES:
            # Small files: one read, no pathlib overhead (most data folders are many small files).
            return blake3.blake3(os.read(fd, size + 1)).hexdigest()
    finally:
        os.close(fd)
    return blake3.blake3(max_threads=blake3.blake3.AUTO).update_mmap(path).hexdigest()


def hash_tree(
    path: str | os.PathLike,
    file_hasher: Callable[[Path], str] = hash_file,
    skip: tuple[str, ...] = (),
) -> str:
    """Hash of a file, or of a folder as its sorted (relative path, file hash) list, leaving out
    the files named in `skip` (a name, at any depth)."""
    path = Path(path)
    if path.is_file():
        return file_hasher(path)
    entries = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            if name in skip:
                continue
            full = Path(root, name)
            entries.append([full.relative_to(path).as_posix(), file_hasher(full)])
    return hash_value({"tree": entries})
