"""The content-addressed store: verified entries, atomic commits, work folders, job records, events.

Layout under the state folder (params `campaign.state_dir`):

    store/<key>/entry.json          what made the entry and the hash of every output
    store/<key>/outputs/<name>      one file or folder per logical output
    work/<key>/                     private scratch of a running stage (checkpoints); survives
                                    Snakemake deleting outputs, so a restarted job resumes
    tmp/commit-<key>-<id>/          a commit being staged; its writer holds the key's lock, so
                                    gc collects one whose key lock is free (a killed commit)
    tmp/corrupt-<key>-<id>/         quarantined corrupt entries
    tmp/retired-<key>-<id>/         a committed key's work folder being deleted
    locks/<key>.lock                one computation per key at a time (flock)
    jobs/<id>.json                  the last state of the job that makes a set of outputs
    events.jsonl                    one line per hit / miss / commit / corrupt / fail
    hashcache.sqlite                input hashes by path, size and mtime (core/hashcache)

The store recognizes what it wrote by its names: an entry, a work folder and a lock file are
named by a content key (64 lowercase hex digits, `is_key`), a staging, quarantined or retired
folder by its prefix and the key after it. gc, `verify --remove` and retention act only on names
of that shape; anything else under the state folder (a user's folder, a file) is foreign: it is
listed (`Store.foreign`) and never removed. `check_state_dir` refuses a state folder that is `/`,
the home folder, a file, or a non-empty folder that is not a state folder: neither marked by the
store (CAMPAIGN_STATE, written when it makes the layout; or events.jsonl, which every stage run
writes) nor holding only these names.

Only store/ is shared (DVC tracks it); everything else is local to a checkout.

Correctness does not rest on flock (node-local on some cluster file systems): an entry appears by
one rename and the loser of a race discards its copy, so `CAMPAIGN_FLOCK=off` (a machine setting,
from the environment) only costs duplicate computation. The lock saves that work, and tells gc
and `verify --remove` which keys a running job is using.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from campaign.core.errors import CampaignError
from campaign.core.fsutil import atomic_write_text, fsync_path, remove_tree
from campaign.core.hashing import ALGORITHM, canonical_json, hash_tree, hash_value

ENTRY_FORMAT = 1
_FILE_MODE = 0o400  # store files are read-only: nothing writes into a committed entry
_DIR_MODE = 0o700
FLOCK_ENV = "CAMPAIGN_FLOCK"
_COMMIT_PREFIX = "commit-"
_RETIRED_PREFIX = "retired-"
_JOB_FILE = re.compile(r"\.?[0-9a-f]{24}\.json(\..+\.tmp)?")  # a job record, or its write's temp


def flock_enabled(env: Mapping[str, str] | None = None) -> bool:
    """Whether key locks are taken: CAMPAIGN_FLOCK=off where flock is missing or node-local."""
    env = os.environ if env is None else env
    raw = env.get(FLOCK_ENV, "on").strip().lower()
    if raw in ("on", "1", "yes", "true", ""):
        return True
    if raw in ("off", "0", "no", "false"):
        return False
    raise CampaignError(f"{FLOCK_ENV}={env.get(FLOCK_ENV)!r}: expected on or off")


_KEY_LENGTH = 64  # hex digits of a BLAKE3 digest (core/hashing)
_HEX = frozenset("0123456789abcdef")
_CORRUPT_PREFIX = "corrupt-"
# Written into the state folder by the store: the folder is a campaign's, whatever else a
# user or a tool (a benchmark's cache) puts beside the store's own folders later.
STATE_MARKER = "CAMPAIGN_STATE"
_MARKER_TEXT = (
    "A campaign's state folder (campaign.state_dir): the store and its work folders. `campaign "
    "gc` removes only what the store made here.\n"
)
# The names a state folder holds (the layout above); SQLite adds its journal files beside its db,
# DVC a .gitignore beside the store it tracks.
STATE_NAMES = frozenset(
    {"store", "work", "tmp", "locks", "jobs", "events.jsonl", STATE_MARKER, ".gitignore"}
    | {f"hashcache.sqlite{s}" for s in ("", "-wal", "-shm", "-journal")}
)


def is_key(name: str) -> bool:
    """Whether a name is a content key: what every entry, work folder and lock file is named."""
    return len(name) == _KEY_LENGTH and set(name) <= _HEX


def _keyed(name: str, prefix: str) -> str | None:
    """The key in `<prefix><key>-<suffix>` (the store's staging, quarantined and retired folders),
    or None for a name the store did not make."""
    if not name.startswith(prefix):
        return None
    key, dash = name[len(prefix) : len(prefix) + _KEY_LENGTH], name[len(prefix) + _KEY_LENGTH :]
    return key if is_key(key) and dash.startswith("-") and len(dash) > 1 else None


def staging_key(path: Path) -> str | None:
    """The key a staging folder (tmp/commit-<key>-<pid>.<id>) was made for; None for others."""
    return _keyed(path.name, _COMMIT_PREFIX)


_COPY_SUFFIX = ".tmp"


def unfinished_copies(dest: Path) -> list[Path]:
    """Copies of an output being materialized (`.<name>.<8 hex>.tmp` beside it): left behind
    when the job was killed mid-copy; any other name is not the store's."""
    dest = Path(dest)
    if not dest.parent.is_dir():
        return []
    prefix = f".{dest.name}."
    found = []
    for path in dest.parent.glob(f".{glob_escape(dest.name)}.*{_COPY_SUFFIX}"):
        middle = path.name[len(prefix) : -len(_COPY_SUFFIX)]
        if len(middle) == 8 and set(middle) <= _HEX:
            found.append(path)
    return sorted(found)


# The project's folders that Snakemake and the stages write: a state folder inside, around or
# equal to one of them would be written or cleaned by both.
_PROJECT_FOLDERS = ("results", "logs", ".snakemake")


def state_dir_problem(path: str | os.PathLike) -> str | None:
    """Why `path` cannot be a campaign's state folder, or None. gc deletes what it finds there, so
    a folder that holds anything else (the project, a home folder, the root) is refused before
    any command writes or removes a byte; a missing or empty folder is fine (it is created)."""
    try:
        folder = Path(path).expanduser()
        home = Path.home().resolve()
    except RuntimeError:  # no $HOME and no password entry to find it in
        return "cannot be resolved: the home folder is unknown ($HOME is not set)"
    resolved = folder.resolve()
    if resolved == Path(resolved.anchor):
        return "is the file system's root; use a folder of its own, e.g. .campaign"
    if resolved == home:
        return "is the home folder; use a folder of its own, e.g. .campaign"
    for name in _PROJECT_FOLDERS:  # Snakemake and the stages write and delete there
        other = (Path.cwd() / name).resolve()
        if resolved == other or other in resolved.parents or resolved in other.parents:
            return f"overlaps the project's {name}/; use a folder of its own, e.g. .campaign"
    if folder.exists() and not folder.is_dir():
        return "is a file, not a folder"
    # Marked by the store; or made before the mark existed: every stage run logs an event there.
    try:
        if not folder.is_dir() or any(
            (folder / n).is_file() for n in (STATE_MARKER, "events.jsonl")
        ):
            return None
        foreign = sorted(p.name for p in folder.iterdir() if p.name not in STATE_NAMES)
    except PermissionError:
        return "cannot be read (permission denied)"
    if foreign:
        shown = ", ".join(foreign[:3]) + (
            f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        )
        return (
            f"is not a campaign state folder (it holds {shown}); name an empty or new folder, "
            "e.g. .campaign"
        )
    return None


def check_state_dir(path: str | os.PathLike, key: str = "campaign.state_dir") -> Path:
    """`path`, or a one-line CampaignError naming `key` when it cannot be a state folder."""
    problem = state_dir_problem(path)
    if problem is not None:
        raise CampaignError(f"{key}: {os.fspath(path)} {problem}")
    return Path(path).expanduser()  # the folder checked is the folder used (`~/x`, not `./~/x`)


def _same_file(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open at `fd` (not unlinked, not replaced)."""
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            fsync_path(Path(dirpath, name))
        fsync_path(Path(dirpath))


def _make_read_only(root: Path) -> None:
    if root.is_file():
        os.chmod(root, _FILE_MODE)
        return
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            os.chmod(Path(dirpath, name), _FILE_MODE)


def _owner_only_parents(path: Path) -> None:
    """Make the folders Snakemake created for an output (e.g. results/, results/data/) 0700.

    Snakemake creates them with its own umask before the job starts; results may hold personal
    data, so every folder from the working directory down to the output is owner-only.
    """
    try:
        rel = path.parent.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return  # outside the project: not ours to change
    folder = Path.cwd()
    for part in rel.parts:
        folder = folder / part
        with contextlib.suppress(OSError):
            os.chmod(folder, _DIR_MODE)


def _tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


_FICLONE = 0x40049409  # linux/fs.h: share the source's blocks (btrfs, XFS): no data copied
_RESULT_MODE = 0o600  # a materialized output is the checkout's own file


def _private_copy(src: Path, dst: Path) -> None:
    """`dst` as a file of its own with `src`'s bytes: a reflink where the filesystem has them,
    else a copy. Never a hard link: Snakemake touches every output after its job, and an inode
    shared with the store (and through it with every checkout that materialized the entry) would
    carry one checkout's mtimes into the others, making their downstream jobs look stale."""
    with open(src, "rb") as source, open(dst, "wb") as target:
        try:
            fcntl.ioctl(target.fileno(), _FICLONE, source.fileno())
        except OSError:
            shutil.copyfileobj(source, target, length=1 << 20)
    os.chmod(dst, _RESULT_MODE)


def _copy_out(src: Path, tmp: Path, now: float) -> None:
    """A private copy of an entry's output (file or folder) at `tmp`, its files' mtime `now`."""
    if src.is_dir():
        tmp.mkdir(mode=_DIR_MODE)
        for dirpath, dirs, files in os.walk(src):
            rel = Path(dirpath).relative_to(src)
            for d in dirs:
                (tmp / rel / d).mkdir(mode=_DIR_MODE)
            for f in files:
                _private_copy(Path(dirpath, f), tmp / rel / f)
                os.utime(tmp / rel / f, (now, now))
    else:
        _private_copy(src, tmp)
        os.utime(tmp, (now, now))


@dataclass(frozen=True)
class Entry:
    key: str
    path: Path
    meta: dict

    def output_path(self, name: str) -> Path:
        return self.path / "outputs" / name


class Store:
    def __init__(self, state_dir: str | os.PathLike):
        # `~/x` is the home folder's x, as check_state_dir checked it (not a folder named `~`).
        self.root = Path(state_dir).expanduser()
        self.entries = self.root / "store"
        self.work_root = self.root / "work"
        self.tmp = self.root / "tmp"
        self.locks = self.root / "locks"
        self.jobs = self.root / "jobs"
        self.events_path = self.root / "events.jsonl"
        self._held: dict[str, int] = {}  # key -> fd of the lock file this object holds

    # ---------------------------------------------------------------- layout
    def ensure(self) -> None:
        for d in (self.root, self.entries, self.work_root, self.tmp, self.locks, self.jobs):
            d.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
        # Written in place, not through a temporary name: a job checking the folder meanwhile
        # (check_state_dir) must find only the store's names there; the mark's presence counts.
        with contextlib.suppress(FileExistsError):
            fd = os.open(self.root / STATE_MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, _MARKER_TEXT.encode("utf-8"))
            finally:
                os.close(fd)

    def entry_path(self, key: str) -> Path:
        return self.entries / key

    def work_dir(self, key: str) -> Path:
        path = self.work_root / key
        path.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
        return path

    def keys(self) -> list[str]:
        """Keys of the entry folders (a folder not named by a key is foreign: never listed)."""
        if not self.entries.exists():
            return []
        return sorted(p.name for p in self.entries.iterdir() if is_key(p.name) and p.is_dir())

    def work_keys(self) -> list[str]:
        """Keys that have a work folder (without creating one)."""
        if not self.work_root.exists():
            return []
        return sorted(p.name for p in self.work_root.iterdir() if is_key(p.name) and p.is_dir())

    def staged_commits(self) -> list[Path]:
        """Staging folders under tmp/: commits under way, or left by a killed job."""
        if not self.tmp.exists():
            return []
        return sorted(p for p in self.tmp.glob(f"{_COMMIT_PREFIX}*") if staging_key(p))

    def quarantined(self) -> list[Path]:
        """Corrupt entries moved aside, and work folders of committed keys left half-deleted."""
        if not self.tmp.exists():
            return []
        return sorted(
            p
            for p in self.tmp.iterdir()
            if _keyed(p.name, _CORRUPT_PREFIX) or _keyed(p.name, _RETIRED_PREFIX)
        )

    def lock_keys(self) -> list[str]:
        """Keys that have a lock file (held or not)."""
        if not self.locks.exists():
            return []
        names = (p.name.removesuffix(".lock") for p in self.locks.glob("*.lock") if p.is_file())
        return sorted(name for name in names if is_key(name))

    def foreign(self) -> list[str]:
        """What the store did not make under the state folder: gc, verify and retention skip it."""
        if not self.root.is_dir():
            return []
        found = [p.name for p in self.root.iterdir() if p.name not in STATE_NAMES]
        for folder, ours in self._keyed_folders().items():
            if folder.is_dir():
                found += [f"{folder.name}/{p.name}" for p in folder.iterdir() if not ours(p)]
            elif folder.exists():
                found.append(folder.name)
        return sorted(found)

    def own(self) -> list[str]:
        """What the store made under the state folder (relative paths): what restore replaces."""
        if not self.root.is_dir():
            return []
        keyed = self._keyed_folders()
        found = []
        for p in self.root.iterdir():
            if p.name not in STATE_NAMES:
                continue
            if p in keyed and p.is_dir():
                found += [f"{p.name}/{c.name}" for c in p.iterdir() if keyed[p](c)]
            elif p not in keyed:
                found.append(p.name)
        return sorted(found)

    def _keyed_folders(self) -> dict[Path, Callable[[Path], bool]]:
        """The store's folders whose children it names by key, each with the test of a child it
        made (anything else in them is foreign)."""
        return {
            self.entries: lambda p: is_key(p.name) and p.is_dir(),
            self.work_root: lambda p: is_key(p.name) and p.is_dir(),
            self.tmp: lambda p: any(
                _keyed(p.name, prefix)
                for prefix in (_COMMIT_PREFIX, _CORRUPT_PREFIX, _RETIRED_PREFIX)
            ),
            self.locks: lambda p: p.name.endswith(".lock") and is_key(p.name[:-5]),
            self.jobs: lambda p: _JOB_FILE.fullmatch(p.name) is not None,  # write_job's
        }

    # ---------------------------------------------------------------- events
    def log_event(self, event: str, key: str, stage: str, **extra: Any) -> None:
        """Append one line; O_APPEND writes under 4 KiB do not interleave between processes."""
        record = {
            "time": round(time.time(), 3),
            "event": event,
            "stage": stage,
            "key": key,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            **(
                {"slurm_job_id": os.environ["SLURM_JOB_ID"]} if "SLURM_JOB_ID" in os.environ else {}
            ),
            **extra,
        }
        line = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
        self.root.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
        fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def events(self) -> list[dict]:
        if not self.events_path.exists():
            return []
        out = []
        for line in self.events_path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
        return out

    # ---------------------------------------------------------------- locking
    def lock_path(self, key: str) -> Path:
        return self.locks / f"{key}.lock"

    def _take(self, key: str, wait: bool) -> int | None:
        """flock the key's lock file: its fd, or None when another process holds it (wait=False).

        Unlink-safe: gc unlinks a lock file only while holding it, so a process that opened the
        old file and got its flock afterwards holds a lock nobody else sees. After flock, the fd
        and the path must name the same file; if they do not, close and take the file now there.
        """
        self.locks.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
        path = self.lock_path(key)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
                if _same_file(fd, path):
                    return fd
            except BlockingIOError:
                os.close(fd)
                return None
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # unlinked or replaced while we waited for it: try again

    @contextlib.contextmanager
    def _hold(self, key: str, fd: int) -> Iterator[None]:
        self._held[key] = fd
        try:
            yield
        finally:
            del self._held[key]
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold the key's lock: a second job for the same key waits, then finds the entry.

        With CAMPAIGN_FLOCK=off this does nothing: jobs for one key may then both compute, and
        the commit's rename keeps one result.
        """
        if not flock_enabled():
            yield
            return
        fd = self._take(key, wait=True)
        assert fd is not None
        with self._hold(key, fd):
            yield

    @contextlib.contextmanager
    def try_lock(self, key: str) -> Iterator[bool]:
        """Hold the key's lock if it is free: yields True, or False at once when it is held."""
        if not flock_enabled():
            yield True
            return
        fd = self._take(key, wait=False)
        if fd is None:
            yield False
            return
        with self._hold(key, fd):
            yield True

    def locked(self, key: str) -> bool:
        """Whether another process holds the key's lock now; takes it for an instant, creates
        nothing (what `gc --dry-run` reports)."""
        if not flock_enabled() or key in self._held:
            return False
        try:
            fd = os.open(self.lock_path(key), os.O_RDWR)
        except FileNotFoundError:
            return False  # a held lock's file is always in place: only its holder unlinks it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def forget_lock(self, key: str) -> None:
        """Unlink the key's lock file, only while this object holds the lock: a process waiting
        on the old file then finds it gone and takes a fresh one (see `_take`)."""
        if key in self._held:
            with contextlib.suppress(FileNotFoundError):
                self.lock_path(key).unlink()

    # ---------------------------------------------------------------- entries
    def read_entry(self, key: str) -> Entry | None:
        path = self.entry_path(key)
        if not path.is_dir():
            return None
        try:
            meta = json.loads((path / "entry.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            meta = {}
        return Entry(key=key, path=path, meta=meta)

    def problems(self, entry: Entry) -> list[str]:
        """Re-hash every output of an entry; one line per problem, empty when the entry is sound."""
        meta = entry.meta
        if meta.get("key") != entry.key or "outputs" not in meta:
            return [f"{entry.key}/entry.json: missing or unreadable"]
        if meta.get("algorithm") != ALGORITHM:
            return [f"{entry.key}/entry.json: hashed with {meta.get('algorithm')}, not {ALGORITHM}"]
        found = []
        for name, info in sorted(meta["outputs"].items()):
            path = entry.output_path(name)
            if not path.exists():
                found.append(f"{entry.key}/outputs/{name}: missing")
                continue
            actual = hash_tree(path)
            if actual != info["hash"]:
                found.append(
                    f"{entry.key}/outputs/{name}: hash {actual[:16]}… but entry.json says "
                    f"{info['hash'][:16]}…"
                )
        return found

    def quarantine(self, key: str) -> None:
        """Move a corrupt entry out of the store (kept under tmp/ for inspection)."""
        self.tmp.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
        with contextlib.suppress(FileNotFoundError):
            os.rename(
                self.entry_path(key), self.tmp / f"{_CORRUPT_PREFIX}{key}-{uuid.uuid4().hex[:8]}"
            )

    def lookup(self, key: str, stage: str) -> Entry | None:
        """A verified entry, or None; a corrupt one is reported, quarantined, treated as absent."""
        entry = self.read_entry(key)
        if entry is None:
            return None
        problems = self.problems(entry)
        if not problems:
            return entry
        for problem in problems:
            print(f"store: corrupt entry {problem}; recomputing", flush=True)
        self.log_event("corrupt", key, stage, problems=problems[:5])
        self.quarantine(key)
        return None

    def new_staging(self, key: str) -> Path:
        self.tmp.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
        # The full key in the name: gc tries the key's lock to tell a live commit from a dead one.
        # ...and the pid: a job cleans up exactly its own staging folders.
        staging = self.tmp / f"{_COMMIT_PREFIX}{key}-{os.getpid()}.{uuid.uuid4().hex[:8]}"
        (staging / "outputs").mkdir(parents=True, mode=_DIR_MODE)
        return staging

    def commit(self, key: str, staging: Path, meta: dict) -> Entry:
        """Seal a staged entry and move it into the store with one rename.

        Two processes committing the same key: one rename wins; the other finds a sound entry
        and discards its own copy (or replaces an entry that fails verification).
        """
        outputs = {}
        for child in sorted((staging / "outputs").iterdir()):
            outputs[child.name] = {
                "hash": hash_tree(child),
                "kind": "dir" if child.is_dir() else "file",
                "bytes": _tree_bytes(child),
            }
        meta = {
            **meta,
            "key": key,
            "algorithm": ALGORITHM,
            "format": ENTRY_FORMAT,
            "outputs": outputs,
        }
        (staging / "entry.json").write_text(
            json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        _make_read_only(staging / "outputs")
        _fsync_tree(staging)
        self.entries.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
        target = self.entry_path(key)
        for _attempt in range(3):
            try:
                os.rename(staging, target)
            except OSError as e:
                if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            else:
                fsync_path(self.entries)
                self.retire_work(key)
                return Entry(key=key, path=target, meta=meta)
            existing = self.read_entry(key)
            if existing is not None and not self.problems(existing):
                remove_tree(staging)
                self.retire_work(key)
                return existing
            self.quarantine(key)
        raise CampaignError(f"store: could not commit entry {key} after 3 attempts")

    def retire_work(self, key: str) -> None:
        """The entry is the result now: move the key's work folder aside, then delete it.

        One rename, so two committers of one key (without flock) never delete the same folder
        at once; a crash mid-delete leaves tmp/retired-*, which gc collects.
        """
        aside = self.tmp / f"{_RETIRED_PREFIX}{key}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(self.work_root / key, aside)
        except FileNotFoundError:
            return
        with contextlib.suppress(OSError):  # the entry is committed; gc finishes the delete
            remove_tree(aside)

    def materialize(self, entry: Entry, outputs: dict[str, Path]) -> None:
        """Place each output at its path: a private copy of the entry's files (a reflink where
        the filesystem has them), with a fresh mtime, so Snakemake sees the output as newer than
        its inputs. Written beside the output and renamed over it; copies of the same output
        that a killed job left beside it go first (one job at a time makes an output)."""
        now = time.time()
        for name, dest in outputs.items():
            src = entry.output_path(name)
            if not src.exists():
                raise CampaignError(f"store entry {entry.key} has no output '{name}'")
            dest = Path(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            _owner_only_parents(dest)
            for leftover in unfinished_copies(dest):
                remove_tree(leftover)
            tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}{_COPY_SUFFIX}")
            try:
                _copy_out(src, tmp, now)
            except BaseException:
                remove_tree(tmp)  # a full disk, Ctrl-C: no half copy stays beside the output
                raise
            if dest.is_dir() and not dest.is_symlink():
                remove_tree(dest)
            os.replace(tmp, dest)

    def remove(self, key: str) -> None:
        """Drop the entry and its work folder; the lock file too when this object holds the key's
        lock (a lock file another process holds or waits on is never unlinked)."""
        remove_tree(self.entry_path(key))
        self.remove_work(key)
        self.forget_lock(key)

    def remove_work(self, key: str) -> None:
        remove_tree(self.work_root / key)

    # ---------------------------------------------------------------- job records
    def job_id(self, outputs: dict[str, Path]) -> str:
        """One record per (checkout, output set): campaigns sharing a store keep their own."""
        return hash_value([str(Path.cwd()), sorted(str(p) for p in outputs.values())])[:24]

    def write_job(self, job_id: str, record: dict) -> None:
        self.jobs.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
        atomic_write_text(self.jobs / f"{job_id}.json", canonical_json(record) + "\n")

    def job_records(self) -> list[dict]:
        return list(self.job_records_by_id().values())

    def job_records_by_id(self) -> dict[str, dict]:
        """{job id: record} of every readable job record."""
        records = {}
        if not self.jobs.exists():
            return records
        for path in self.jobs.glob("*.json"):
            if (record := self.read_job(path.stem)) is not None:
                records[path.stem] = record
        return records

    def read_job(self, job_id: str) -> dict | None:
        """The job's record as it is now (None when missing or unreadable)."""
        with contextlib.suppress(OSError, json.JSONDecodeError):
            return json.loads((self.jobs / f"{job_id}.json").read_text(encoding="utf-8"))
        return None

    def jobs_by_output(self, project: Path | None = None) -> dict[str, dict]:
        """This checkout's records (of `project`, default the working folder) by output path."""
        here = str(project or Path.cwd())
        out: dict[str, dict] = {}
        for record in self.job_records():
            if record.get("project", here) != here:
                continue
            for output in record.get("outputs", []):
                out[output] = record
        return out
