"""A stat cache for file hashes: an unchanged file (size, mtime, ctime, inode) is not re-read.

Only files of at least ``MIN_CACHED_BYTES`` go through it: hashing a small file with BLAKE3 costs
less than the stat and the lookup. New digests are written in one transaction on ``close``.

Local to one checkout (it lives in the state folder, not in the shared store). ctime is part of
the key because tools that preserve mtime (cp -p, rsync -t, a byte flipped in place and the mtime
put back) cannot preserve it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from campaign.core.hashing import hash_file, hash_tree

MIN_CACHED_BYTES = 1 << 20


class HashCache:
    def __init__(self, db_path: str | os.PathLike | None):
        self._db = None
        self._new: dict[str, tuple] = {}  # path -> (size, mtime_ns, ctime_ns, ino, digest)
        if db_path is None:
            return
        Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        # A cache must never fail a stage: on any database trouble we just hash the file.
        with contextlib.suppress(sqlite3.Error):
            db = sqlite3.connect(db_path, timeout=30, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # a cache: losing the last writes is fine
            db.execute(
                "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER, "
                "mtime_ns INTEGER, ctime_ns INTEGER, ino INTEGER, digest TEXT)"
            )
            self._db = db

    def hash(self, path: str | os.PathLike) -> str:
        st = os.stat(path)
        if st.st_size < MIN_CACHED_BYTES or self._db is None:
            return hash_file(path)
        sig = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        name = os.path.abspath(path)
        if name in self._new and self._new[name][:4] == sig:
            return self._new[name][4]
        with contextlib.suppress(sqlite3.Error):
            row = self._db.execute(
                "SELECT size, mtime_ns, ctime_ns, ino, digest FROM files WHERE path = ?", (name,)
            ).fetchone()
            if row is not None and tuple(row[:4]) == sig:
                return row[4]
        digest = hash_file(path)
        self._new[name] = (*sig, digest)
        return digest

    def hash_tree(self, path: str | os.PathLike) -> str:
        """Like hashing.hash_tree, with each file's hash taken from the cache when unchanged."""
        return hash_tree(path, file_hasher=self.hash)

    def close(self) -> None:
        if self._db is None:
            return
        with contextlib.suppress(sqlite3.Error):
            with self._db:  # one transaction for every new digest
                self._db.execute("BEGIN")
                self._db.executemany(
                    "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?)",
                    [(name, *row) for name, row in self._new.items()],
                )
        self._new = {}
        self._db.close()
        self._db = None
