"""The stage runner: every stage goes through here, so a result is computed once per content key.

The runner is the only way a stage gets its inputs: it resolves them (campaign.core.keys:
derived from the params or given, never both different), hashes them into the key, and after the
stage has run checks that none changed meanwhile. A verified store entry for the key is
materialized in place of running the stage; otherwise the stage runs with a private work folder
(.campaign/work/<key>) that outlives Snakemake's deletion of outputs, and its outputs are
committed atomically. Stages that compute with torch run with pinned execution settings (threads,
deterministic algorithms), which are part of the key.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import resource
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaign.core.closeness import max_abs_diff
from campaign.core.errors import CampaignError, Interrupted, Preempted, raise_if_signalled
from campaign.core.fsutil import remove_tree
from campaign.core.hashcache import HashCache
from campaign.core.hashing import ALGORITHM, hash_tree
from campaign.core.io import resolve
from campaign.core.keys import (
    code_version,
    content_key,
    execution_module,
    execution_settings,
    hash_inputs,
    input_hash,
    resolve_inputs,
)
from campaign.core.registry import get_stage
from campaign.core.stage import Stage
from campaign.core.store import ENTRY_FORMAT, Entry, Store

DEFAULT_THREADS = 1  # a stage command run by hand computes like a rule with no `threads:`


@dataclass
class StageContext:
    """What a stage function gets: its params subset, inputs, where to write, a work folder."""

    stage: str
    spec: Any
    inputs: dict[str, list[Path]]  # resolved and hashed by the runner: read exactly these
    outputs: dict[str, Path]  # staging paths: write each output exactly here
    work_dir: Path  # private to this key; survives restarts (checkpoints go here)
    root: Path  # the project folder
    execution: dict | None = None  # pinned settings of a computing stage (device, threads)
    key: str | None = None  # the content key this computation is stored under
    code_version: str | None = None  # the stage's code version, as hashed into the key


@dataclass(frozen=True)
class RunResult:
    key: str
    hit: bool
    seconds: float


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed (run from the checkout)"


def environment() -> dict:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "campaign": _version("campaign"),
        **({"slurm_job_id": os.environ["SLURM_JOB_ID"]} if "SLURM_JOB_ID" in os.environ else {}),
    }


def _peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux; children count for stages that spawn workers.
    self_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(self_kib, child_kib) * 1024


def execute(stage: Stage, ctx: StageContext) -> None:
    """Run the stage's function with `ctx` (its execution settings pinned first), and check it
    wrote all of ctx.outputs."""
    if ctx.execution is not None:
        execution_module(stage).pin(ctx.execution)
    resolve(stage.entry)(ctx)
    missing = [name for name, path in ctx.outputs.items() if not path.exists()]
    if missing:
        raise CampaignError(f"stage {stage.name} did not write output(s): {', '.join(missing)}")


def _changed_inputs(before: dict[str, list[dict]], cache: HashCache) -> list[str]:
    """The inputs whose content is no longer what was hashed into the key (or that are gone)."""
    changed = []
    for name, rows in sorted(before.items()):
        for row in rows:
            path = Path(row["path"])
            if not path.exists() or input_hash(path, cache, row.get("view")) != row["hash"]:
                changed.append(f"'{name}' {row['path']}")
    return changed


@dataclass
class _Job:
    """One stage run as the runner prepared it: the stage and its params subset, its inputs
    (resolved and hashed), its execution settings, its key and key material, where its
    outputs go, and its job record (id, record, start time)."""

    stage: Stage
    spec: Any
    resolved: dict[str, list[Path]]
    input_hashes: dict[str, list[dict]]
    execution: dict | None
    key: str
    material: dict
    outputs: dict[str, Path]
    root: Path
    record: dict
    job_id: str
    started: float

    def done(self, store: Store, event: str, hit: bool) -> float:
        """Log the event and record the job done; the seconds since the job started."""
        seconds = time.time() - self.started
        store.log_event(event, self.key, self.stage.name, seconds=round(seconds, 3))
        store.write_job(
            self.job_id, {**self.record, "state": "done", "hit": hit, "ended": time.time()}
        )
        return seconds


def _hit_or_compute(store: Store, job: _Job) -> RunResult:
    """Under the key's lock: materialize a sound entry, or compute, check and commit one."""
    name, key = job.stage.name, job.key
    entry = store.lookup(key, name)
    if entry is not None and job.stage.effect:
        return _effect_again(store, job)
    if entry is not None:
        store.materialize(entry, job.outputs)
        seconds = job.done(store, "hit", hit=True)
        print(f"{name}: store hit {key[:16]} ({seconds:.2f} s)", flush=True)
        return RunResult(key, True, seconds)

    store.log_event("miss", key, name)
    print(f"{name}: store miss {key[:16]}; computing", flush=True)
    staging = store.new_staging(key)
    wall = _compute(store, job, staging)
    _drop_undeclared(staging, job)
    raise_if_signalled()  # a signal whose exception library code swallowed: not a success
    _check_inputs_unchanged(store, job)
    # The commit also retires the key's work folder: it held resumable state; the entry is the
    # result now.
    entry = store.commit(key, staging, _entry_meta(job, wall))
    store.materialize(entry, job.outputs)
    seconds = job.done(store, "commit", hit=False)
    print(f"{name}: committed {key[:16]} ({wall:.2f} s)", flush=True)
    return RunResult(key, False, seconds)


def _effect_again(store: Store, job: _Job) -> RunResult:
    """A store hit of a stage whose job is an effect (Stage.effect): the stage runs again, so
    the world outside shows this result (the entry is the same computation: kept as it is),
    and its fresh outputs are placed."""
    name, key = job.stage.name, job.key
    staging = store.new_staging(key)
    try:
        _compute(store, job, staging)
        raise_if_signalled()
        store.materialize(Entry(key, staging, {}), job.outputs)
    finally:
        remove_tree(staging)
        store.retire_work(key)
    seconds = job.done(store, "hit", hit=True)
    print(f"{name}: store hit {key[:16]}; its effect done again ({seconds:.2f} s)", flush=True)
    return RunResult(key, True, seconds)


def _compute(store: Store, job: _Job, staging: Path) -> float:
    """Run the stage into the staging folder (its work folder is the key's); wall seconds."""
    staged = {name: staging / "outputs" / name for name in job.outputs}
    t0 = time.time()
    work_dir, code = store.work_dir(job.key), job.material["code"]
    ctx = StageContext(job.stage.name, job.spec, job.resolved, staged, work_dir, job.root)
    ctx.execution, ctx.key, ctx.code_version = job.execution, job.key, code
    execute(job.stage, ctx)
    return time.time() - t0


def _drop_undeclared(staging: Path, job: _Job) -> None:
    """The store holds what a stage declares: what else its job wrote among its outputs (a
    train.command's files beside its model folder) is named in the job's log, with its size,
    and not committed."""
    extra = sorted(p for p in (staging / "outputs").iterdir() if p.name not in job.outputs)
    if not extra:
        return
    sizes = [(p.name, _tree_bytes(p)) for p in extra]
    named = ", ".join(f"{name} ({size / 2**20:.2f} MiB)" for name, size in sizes)
    print(
        f"{job.stage.name}: not committed, not an output the stage declares "
        f"({', '.join(job.outputs)}): {named}",
        flush=True,
    )
    for p in extra:
        remove_tree(p)


def _tree_bytes(path: Path) -> int:
    if path.is_file() or path.is_symlink():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file())


def _check_inputs_unchanged(store: Store, job: _Job) -> None:
    """What was read must still be what was hashed: an input rewritten while the stage ran (a
    data export, a checkout) would give a result under the wrong key."""
    cache = HashCache(store.root / "hashcache.sqlite")
    try:
        changed = _changed_inputs(job.input_hashes, cache)
    finally:
        cache.close()
    if changed:
        restored = restore_inputs(store, job.stage.name, job.resolved)
        again = " (restored from the store)" if restored else ""
        raise CampaignError(
            f"{job.stage.name}: input {', '.join(changed)} changed while the stage ran{again}; "
            f"nothing was committed (run it again)"
        )


def restore_inputs(store: Store, stage: str, inputs: dict[str, list[Path]]) -> list[str]:
    """Inputs that a job of this checkout materialized from a store entry and that are no
    longer what the entry holds (a trainer wrote over a split file) are restored from it, each
    said in the job's log: the stages write results/, nothing else does. An entry that fails
    verification restores nothing (its own job recomputes it). Returns the paths restored."""
    by_output = {os.path.abspath(p): r for p, r in store.jobs_by_output().items()}
    if not by_output:
        return []
    restored = []
    cache = HashCache(store.root / "hashcache.sqlite")
    try:
        for path in (Path(p) for paths in inputs.values() for p in paths):
            record = by_output.get(os.path.abspath(path))
            if not record or record.get("state") != "done" or not record.get("key"):
                continue
            names = dict(zip(record["outputs"], record.get("output_names", []), strict=False))
            name = names.get(next((o for o in names if os.path.abspath(o) == os.path.abspath(path)),
                                  ""))  # fmt: skip
            entry = store.read_entry(record["key"])
            info = (entry.meta.get("outputs") or {}).get(name) if entry and name else None
            if info is None or (path.exists() and cache.hash_tree(path) == info.get("hash")):
                continue
            if store.problems(entry):
                continue
            # Under the entry's lock, checked again: two jobs reading one clobbered file (two
            # seeds' training on a split) restore it once, and neither removes the other's copy.
            with store.lock(entry.key):
                if path.exists() and cache.hash_tree(path) == info.get("hash"):
                    continue
                store.materialize(entry, {name: path})
            restored.append(str(path))
            print(
                f"{stage}: input {path} is not what {record.get('stage')} committed (store "
                f"entry {entry.key[:16]}); restored it from the store",
                flush=True,
            )
    finally:
        cache.close()
    return restored


def _entry_meta(job: _Job, wall: float) -> dict:
    """entry.json: the key material, the inputs hashed, and the facts that differ between
    identical computations (wall time, peak memory, environment)."""
    return {
        "stage": job.stage.name,
        "key_material": job.material,
        "spec": job.spec,
        "inputs": job.input_hashes,
        "volatile": list(job.stage.volatile),
        "wall_seconds": round(wall, 3),
        "peak_rss_bytes": _peak_rss_bytes(),
        "created": round(time.time(), 3),
        "environment": environment(),
    }


def job_key(
    stage: Stage, spec: Any, inputs: dict[str, list[Path]], store: Store, root: Path, threads: int
) -> tuple[dict[str, list[Path]], dict[str, list[dict]], dict | None, str, dict]:
    """(inputs resolved, their hashes, execution settings, key, key material) of one job: what
    run_stage hashes before it looks in the store, and what `stored_key` asks of a job not run."""
    cache = HashCache(store.root / "hashcache.sqlite")
    try:
        resolved = resolve_inputs(stage, spec, inputs, root)
        input_hashes = hash_inputs(resolved, cache, dict(stage.input_views))
        execution = execution_settings(stage, threads)
        key, material = content_key(stage, spec, input_hashes, execution)
    finally:
        cache.close()
    return resolved, input_hashes, execution, key, material


def stored_key(
    stage_name: str,
    spec: Any,
    inputs: dict[str, list[Path]],
    store: Store,
    root: Path = Path("."),
    threads: int = DEFAULT_THREADS,
) -> str | None:
    """The key a run of the stage would compute now, when the store holds its entry, else None:
    a job Snakemake would rerun because an input's mtime changed costs a store hit then, not a
    computation. The entry must look sound without re-hashing: entry.json names the key, this
    store's hash algorithm and entry format, and every output is there as the file or folder it
    recorded, of the bytes it recorded (a truncated model file is no hit). The outputs are
    re-hashed when the entry is used (Store.lookup), not here: one corrupted since, at the same
    size, is recomputed then (`campaign verify` finds it beforehand). None too when an input is
    absent or the params name other inputs than those given (the job cannot run as it stands)."""
    stage = get_stage(stage_name)
    if not store.entries.is_dir():
        return None
    try:
        key = job_key(stage, spec, inputs, store, root, threads)[3]
    except CampaignError:
        return None
    entry = store.read_entry(key)
    if entry is None or entry.meta.get("key") != key:
        return None
    meta = entry.meta
    if meta.get("algorithm") != ALGORITHM or meta.get("format") != ENTRY_FORMAT:
        return None
    outputs = meta.get("outputs", {})
    if set(outputs) != set(stage.outputs):
        return None
    sound = all(_as_recorded(entry.output_path(n), info) for n, info in outputs.items())
    return key if sound else None


def _as_recorded(path: Path, info: dict) -> bool:
    """Whether a store output is the kind (file, dir) and size in bytes its entry.json records."""
    if path.is_file():
        kind, size = "file", path.stat().st_size
    elif path.is_dir():
        kind, size = "dir", sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    else:
        return False
    return info.get("kind") == kind and info.get("bytes") == size


def run_stage(
    stage_name: str,
    spec: Any,
    inputs: dict[str, list[Path]],
    outputs: dict[str, Path],
    store: Store,
    root: Path = Path("."),
    threads: int = DEFAULT_THREADS,
) -> RunResult:
    """Materialize the stage's outputs from the store, computing and committing them if needed.

    `inputs` are the `--in` paths (the rules give every input; a person may leave out the ones
    the params name). `threads`: the compute threads of a stage that computes with torch (the
    rule's `threads:`), pinned and part of its key.
    """
    stage = get_stage(stage_name)
    unknown = set(outputs) ^ set(stage.outputs)
    if unknown:
        raise CampaignError(
            f"stage {stage.name} writes {', '.join(stage.outputs)}; got outputs "
            f"{', '.join(sorted(outputs))}"
        )
    if not isinstance(threads, int) or threads < 1:
        raise CampaignError(f"--threads: expected a whole number >= 1, got {threads!r}")
    store.ensure()
    started = time.time()
    job_id = store.job_id(outputs)
    job = {
        "stage": stage.name,
        "key": None,
        "outputs": [str(p) for p in outputs.values()],
        "output_names": list(outputs),  # each output's name in the entry, as `outputs` lists
        "project": str(Path.cwd()),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "started": round(started, 3),
    }
    try:
        restore_inputs(store, stage.name, inputs)
        resolved, input_hashes, execution, key, material = job_key(
            stage, spec, inputs, store, root, threads
        )
        job["key"] = key
        store.write_job(job_id, {**job, "state": "running"})
        with store.lock(key):
            try:
                prepared = _Job(stage, spec, resolved, input_hashes, execution, key, material,
                                outputs, root, job, job_id, started)  # fmt: skip
                return _hit_or_compute(store, prepared)
            finally:
                # Still under the key's lock: gc may take it next and must find nothing of ours.
                for leftover in store.tmp.glob(f"commit-{key}-{os.getpid()}.*"):
                    remove_tree(leftover)
    except (KeyboardInterrupt, Interrupted) as e:
        # Preempted: the job checkpointed at a step boundary and asks to be resubmitted.
        state = "preempted" if isinstance(e, Preempted) else "interrupted"
        what = "interrupted (Ctrl-C)" if isinstance(e, KeyboardInterrupt) else f"{state} ({e})"
        extra = {"step": e.step} if isinstance(e, Preempted) else {}
        # The state folder's disk may be full: the job still ends as interrupted (its exit
        # status is what a scheduler requeues on), not as a disk failure raised over it.
        with contextlib.suppress(OSError):
            store.log_event(state, job["key"] or "", stage.name, error=what, **extra)
        with contextlib.suppress(OSError):
            store.write_job(
                job_id, {**job, "state": state, "error": what, "ended": time.time(), **extra}
            )
        raise
    except BaseException as e:
        message = str(e) if isinstance(e, CampaignError) else f"{type(e).__name__}: {e}"
        # The failure may be a full disk under the state folder: recording it there must not
        # raise a second error over the first (the command's one line names the first).
        with contextlib.suppress(OSError):
            store.log_event("fail", job["key"] or "", stage.name, error=message[:500])
        with contextlib.suppress(OSError):
            store.write_job(
                job_id, {**job, "state": "failed", "error": message[:2000], "ended": time.time()}
            )
        raise


def _under(path: Path, root: Path) -> Path:
    """An input path as the stage reads it from `root`: relative where it lies under the root;
    an absolute path elsewhere (a params file may name data outside the project) as recorded."""
    if path.is_absolute():
        with contextlib.suppress(ValueError):
            return path.relative_to(root.resolve())
    return path


def find_entry(store: Store, key: str):
    """The entry of a key or of a unique key prefix."""
    entry = store.read_entry(key)
    if entry is None:
        matches = [k for k in store.keys() if k.startswith(key)]
        if len(matches) == 1:
            entry = store.read_entry(matches[0])
        elif len(matches) > 1:
            raise CampaignError(
                f"key prefix {key} matches {len(matches)} entries; give more digits"
            )
    if entry is None or "key_material" not in entry.meta:
        raise CampaignError(f"{key}: no such store entry")
    return entry


def reproduce(store: Store, key: str, scratch: Path, root: Path = Path(".")) -> list[dict]:
    """Recompute an entry from scratch (fresh work folder) and compare every output hash.

    Returns one row per output: name, stored hash, recomputed hash, equal (None for a volatile
    output: timings and host facts are recorded, not compared), and for an output that differs
    max_abs_diff (campaign.core.closeness; None: it differs in more than float values). Inputs
    must still have the content the entry recorded; a computing stage runs with the recorded
    execution settings.
    """
    entry = find_entry(store, key)
    key = entry.key  # a prefix names the entry; a stage that records its key records all of it
    meta = entry.meta
    stage = get_stage(meta["stage"])
    inputs: dict[str, list[Path]] = {}
    for name, rows in meta["inputs"].items():
        inputs[name] = []
        for row in rows:
            path = root / row["path"]
            if not path.exists():
                raise CampaignError(f"{key}: input '{name}' {row['path']} no longer exists")
            if input_hash(path, None, row.get("view")) != row["hash"]:
                raise CampaignError(
                    f"{key}: input '{name}' {row['path']} has changed since the entry was made; "
                    f"check out the version it recorded"
                )
            inputs[name].append(Path(row["path"]))  # as recorded: relative to the root
    material = meta["key_material"]
    if material["code"] != code_version(stage):
        print(f"reproduce: note: the {stage.name} code has changed since {key[:16]} was made")
    execution = material.get("execution")
    if execution is not None:
        here = execution_settings(stage, execution["threads"])
        if here != execution:
            print(
                f"reproduce: note: {key[:16]} was computed with {execution}; this machine "
                f"gives {here}"
            )
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "outputs").mkdir(exist_ok=True)
    outputs = {name: scratch / "outputs" / name for name in meta["outputs"]}
    work_dir = scratch / "work"
    work_dir.mkdir(exist_ok=True)
    with contextlib.chdir(root):
        inputs = {n: [_under(p, root) for p in ps] for n, ps in inputs.items()}
        spec = meta.get("spec", material["params"])
        ctx = StageContext(stage.name, spec, inputs, outputs, work_dir, Path("."), execution, key)
        ctx.code_version = material["code"]
        execute(stage, ctx)
    volatile = set(meta.get("volatile", ()))
    rows = []
    for name, info in sorted(meta["outputs"].items()):
        actual = hash_tree(outputs[name])
        equal = None if name in volatile else actual == info["hash"]
        row = {"output": name, "stored": info["hash"], "recomputed": actual, "equal": equal}
        if equal is False:  # how far: within float tolerance, or really different (None)
            row["max_abs_diff"] = max_abs_diff(entry.output_path(name), outputs[name])
        rows.append(row)
    return rows
