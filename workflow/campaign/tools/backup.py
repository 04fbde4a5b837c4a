"""Encrypted backups of a campaign's results and store: `campaign backup` and `campaign restore`.

What goes in: ``results/``, ``logs/``, the store folder (``campaign.state_dir``) and Snakemake's
``.snakemake/metadata`` (so a restored checkout is up to date for ``snakemake -n``: the same
files, modification times and recorded params). Hard links between results and the store stay
hard links. A manifest (``BACKUP_MANIFEST.json``: every regular file's BLAKE3 hash, size and
modification time in nanoseconds) is the archive's first member; ``restore`` checks every file
against it before anything is moved into place, and sets the exact times back.

Encryption: age (the pyrage bindings), to an X25519 identity read from ``--key-file`` or from
the environment variable ``CAMPAIGN_BACKUP_KEY`` (the ``AGE-SECRET-KEY-1...`` line), never
from params. ``campaign backup --new-key`` writes a fresh identity (owner-only) when the key
file does not exist. A wrong key fails in one line before anything is written.

No plaintext archive ever lies on disk: the tar is written into a pipe that the encryption
reads (a thread writes the tar, age encrypts what it reads, 64 KiB at a time), so what reaches
the destination is ciphertext from its first byte; a killed backup leaves only a partial
``.tar.age`` in an owner-only ``.backup-*`` folder next to the archives, and the next backup to
that destination removes such folders (those no running backup holds: each backup holds a
shared flock on that folder; the sweep needs it exclusively). The archive is put in
place by an atomic rename. Restore decrypts into a pipe that the tar reader extracts from, into
an owner-only temporary folder inside the project, verifies, then replaces each backed-up
top-level folder; in the state folder only what the store made is replaced, never a user's file
or folder there (`Store.foreign`); leftovers of a killed restore are swept the same way.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.hashing import hash_file

KEY_ENV = "CAMPAIGN_BACKUP_KEY"
MANIFEST = "BACKUP_MANIFEST.json"
STATE = "state"  # the store's name inside the archive; restored to campaign.state_dir
FORMAT = 1


def new_identity(path: Path) -> None:
    """Write a fresh age X25519 identity to ``path`` (owner-only); refuse to overwrite one."""
    from pyrage import x25519

    if path.exists():
        raise CampaignError(f"--new-key: {path} exists; it is not overwritten")
    identity = x25519.Identity.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"# public key: {identity.to_public()}\n{identity}\n")


def load_identity(key_file: str | None):
    """The age identity from ``key_file``, else from $CAMPAIGN_BACKUP_KEY; CampaignError naming
    the source when there is none or it is not an identity."""
    from pyrage import x25519

    if key_file:
        path = Path(key_file)
        if not path.is_file():
            raise CampaignError(f"--key-file: {path} does not exist (create one with --new-key)")
        text, source = path.read_text(), str(path)
    elif os.environ.get(KEY_ENV):
        text, source = os.environ[KEY_ENV], f"${KEY_ENV}"
    else:
        raise CampaignError(f"backup key: pass --key-file FILE or set ${KEY_ENV}")
    lines = [x.strip() for x in text.splitlines() if x.strip() and not x.startswith("#")]
    try:
        return x25519.Identity.from_str(lines[0])
    except Exception:  # pyrage.IdentityError, or no line at all
        raise CampaignError(f"{source}: not an age identity (AGE-SECRET-KEY-1...)") from None


def _members(root: Path, state_dir: Path) -> list[tuple[Path, str]]:
    """(path on disk, name in the archive) of what a backup holds, those that exist."""
    wanted = [
        (root / "results", "results"),
        (root / "logs", "logs"),
        (state_dir if state_dir.is_absolute() else root / state_dir, STATE),
        (root / ".snakemake" / "metadata", ".snakemake/metadata"),
    ]
    return [(p, name) for p, name in wanted if p.exists()]


def _manifest(members: list[tuple[Path, str]]) -> dict:
    files = {}
    for path, name in members:
        for p in sorted([path] if path.is_file() else path.rglob("*")):
            if p.is_file() and not p.is_symlink():
                rel = name if p == path else f"{name}/{p.relative_to(path).as_posix()}"
                st = p.stat()
                files[rel] = {
                    "blake3": hash_file(p),
                    "bytes": st.st_size,
                    "mtime_ns": st.st_mtime_ns,
                }
    return {"format": FORMAT, "files": files}


@contextmanager
def _swept(folder: Path, prefix: str) -> Iterator[None]:
    """Hold a shared flock on ``folder`` itself while the body runs (no lock file left
    behind), after removing the ``{prefix}*`` scratch folders of killed runs: when no other run
    holds the lock (exclusive, non-blocking), every such folder is a leftover. A run killed
    with -9 releases its flock."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # another run is under way: its folder is not a leftover; sweep next time
        else:
            for old in folder.glob(f"{prefix}*"):
                if old.is_dir() and not old.is_symlink():
                    shutil.rmtree(old, ignore_errors=True)
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def _through_pipe(produce: Callable, consume: Callable) -> None:
    """Run ``produce(writer)`` in a thread and ``consume(reader)`` here, joined by an OS pipe,
    so bytes pass from one to the other in memory and never touch the disk. An error on either
    side is raised here (the producer's first: a consumer that saw a cut stream must not pass
    for a finished one)."""
    read_fd, write_fd = os.pipe()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            with os.fdopen(write_fd, "wb") as writer:
                produce(writer)
        except BrokenPipeError:
            pass  # the consumer stopped (and raises its own error)
        except BaseException as e:  # noqa: BLE001 -- handed to the caller's thread
            failure.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    consumed: BaseException | None = None
    with os.fdopen(read_fd, "rb") as reader:
        try:
            consume(reader)
        except BaseException as e:  # noqa: BLE001 -- re-raised below, after the join
            consumed = e
    thread.join()  # the reader is closed: a producer still writing gets a broken pipe
    if failure:
        raise failure[0]
    if consumed is not None:
        raise consumed


def backup(root: Path, state_dir: Path, dest: Path, identity) -> tuple[Path, int]:
    """Write ``dest/campaign-backup-<UTC time>.tar.age``; return (its path, files in it)."""
    import pyrage

    root = Path(root)
    members = _members(root, Path(state_dir))
    if not members:
        raise CampaignError(f"backup: nothing to back up under {root} (no results/ or store)")
    manifest = _manifest(members)
    dest.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = dest / f"campaign-backup-{stamp}.tar.age"

    def write_tar(pipe) -> None:
        with tarfile.open(fileobj=pipe, mode="w|") as tar:
            data = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mtime, info.mode = len(data), int(datetime.now(UTC).timestamp()), 0o600
            tar.addfile(info, io.BytesIO(data))
            for path, name in members:
                tar.add(path, arcname=name)

    with (
        _swept(dest, ".backup-"),
        tempfile.TemporaryDirectory(dir=dest, prefix=".backup-") as scratch,
    ):
        sealed = Path(scratch) / "backup.tar.age"
        fd = os.open(sealed, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as dst:
            _through_pipe(
                write_tar, lambda src: pyrage.encrypt_io(src, dst, [identity.to_public()])
            )
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(sealed, out)
    return out, len(manifest["files"])


def restore(archive: Path, root: Path, state_dir: Path, identity) -> int:
    """Decrypt ``archive``, check every file against its manifest, then put results, logs, the
    store (at ``state_dir``) and Snakemake's metadata in place, replacing what is there; in the
    state folder only what the store made is replaced (`_put_state`).
    Returns the number of files restored. CampaignError (one line) on a wrong key, a damaged
    archive, or a file that does not match the manifest; nothing is replaced then."""
    import pyrage

    archive, root = Path(archive), Path(root)
    if not archive.is_file():
        raise CampaignError(f"restore: {archive} does not exist")
    target_state = Path(state_dir) if Path(state_dir).is_absolute() else root / state_dir
    with (
        _swept(root, ".restore-"),
        tempfile.TemporaryDirectory(dir=root, prefix=".restore-") as scratch,
    ):
        staged = Path(scratch) / "tree"

        def extract(pipe) -> None:
            with tarfile.open(fileobj=pipe, mode="r|") as tar:
                tar.extractall(staged, filter="data")

        try:
            with archive.open("rb") as src:
                _through_pipe(lambda dst: pyrage.decrypt_io(src, dst, [identity]), extract)
        except pyrage.DecryptError:
            raise CampaignError(
                f"restore: {archive}: the key does not decrypt it (wrong key, or not a "
                "campaign backup)"
            ) from None
        except (tarfile.TarError, OSError) as e:
            raise CampaignError(f"restore: {archive}: damaged archive ({e})") from None
        manifest_path = staged / MANIFEST
        if not manifest_path.is_file():
            raise CampaignError(f"restore: {archive}: no {MANIFEST}; not a campaign backup")
        files = json.loads(manifest_path.read_text())["files"]
        for rel, want in sorted(files.items()):
            p = staged / rel
            if not p.is_file() or hash_file(p) != want["blake3"]:
                raise CampaignError(f"restore: {archive}: {rel} does not match the manifest")
            os.utime(p, ns=(want["mtime_ns"], want["mtime_ns"]))  # tar keeps microseconds
        places = {
            "results": root / "results",
            "logs": root / "logs",
            STATE: target_state,
            ".snakemake/metadata": root / ".snakemake" / "metadata",
        }
        for name, target in places.items():
            src = staged / name
            if not src.exists():
                continue
            old = Path(scratch) / f"old-{name.replace('/', '_')}"
            if name == STATE and target.is_dir() and not target.is_symlink():
                _put_state(src, target, old)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                os.replace(target, old)
            os.replace(src, target)
    return len(files)  # the replaced folders went with the temporary folder


def _put_state(src: Path, target: Path, old: Path) -> None:
    """Put the archive's state folder `src` in place of the state folder `target`, name by
    name: what the store made there is moved to `old` (deleted with the restore's temporary
    folder) and the archive's take its place; what the store did not make (a user's folder
    beside or inside the store) stays where it is, and wins over the archive's copy of it.

    Not one rename as the other folders are: the foreign names must never pass through the
    temporary folder, which the next restore sweeps. A restore killed midway leaves a store
    whose entries are each whole, from before or from the archive; restoring again completes it.
    """
    from campaign.core.store import STATE_NAMES, Store

    # Every move below is a rename: all of it on the file system of the restore's temporary
    # folder, or nothing moved (a store folder linked to another disk would fail halfway).
    here = old.parent.stat().st_dev
    ours = [p.name for p in target.iterdir() if p.name in STATE_NAMES]
    for rel in ["", *ours, *Store(target).own()]:
        if (target / rel).stat().st_dev != here:
            raise CampaignError(
                f"restore: {target / rel} is on another file system than {old.parent}; "
                "nothing was replaced (restore into a state folder on the project's disk, "
                "then move it)"
            )
    for rel in Store(target).own():
        (old / rel).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.replace(target / rel, old / rel)
    for rel in [*Store(src).own(), *Store(src).foreign()]:
        dest = target / rel
        if (src / rel).exists() and not dest.exists() and not dest.is_symlink():
            dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.replace(src / rel, dest)
