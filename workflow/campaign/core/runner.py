"""The stage runner: every stage goes through here, so a result is computed once per content key.

key = BLAKE3(stage name, stage code version, the stage's params subset, input content hashes,
relevant library versions). A verified store entry for the key is materialized in place of
running the stage; otherwise the stage runs with a private work folder (.campaign/work/<key>)
that outlives Snakemake's deletion of outputs, and its outputs are committed atomically.
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

from campaign.core.code import code_version as module_code_version
from campaign.core.errors import CampaignError
from campaign.core.fsutil import remove_tree
from campaign.core.hashcache import HashCache
from campaign.core.hashing import ALGORITHM, hash_tree, hash_value
from campaign.core.registry import get_stage
from campaign.core.stage import Stage
from campaign.core.store import Store

KEY_FORMAT = 1


@dataclass
class StageContext:
    """What a stage function gets: its params subset, inputs, where to write, a work folder."""

    stage: str
    spec: Any
    inputs: dict[str, list[Path]]
    outputs: dict[str, Path]  # staging paths: write each output exactly here
    work_dir: Path  # private to this key; survives restarts (checkpoints go here)
    root: Path  # the project folder, for paths named in params


@dataclass(frozen=True)
class RunResult:
    key: str
    hit: bool
    seconds: float


def code_version(stage: Stage) -> str:
    """The stage's import closure inside the package, docstrings and comments aside."""
    return module_code_version(stage.module)


def library_versions(stage: Stage) -> dict[str, str]:
    out = {}
    for lib in stage.libraries:
        try:
            out[lib] = importlib.metadata.version(lib)
        except importlib.metadata.PackageNotFoundError:
            out[lib] = "absent"
    return out


def environment() -> dict:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "campaign": importlib.metadata.version("campaign"),
        **({"slurm_job_id": os.environ["SLURM_JOB_ID"]} if "SLURM_JOB_ID" in os.environ else {}),
    }


def hash_inputs(inputs: dict[str, list[Path]], cache: HashCache) -> dict[str, list[dict]]:
    """{name: [{path, hash}, ...]} with paths as given (relative to the project)."""
    out = {}
    for name, paths in sorted(inputs.items()):
        rows = []
        for p in paths:
            if not Path(p).exists():
                raise CampaignError(f"input '{name}': {p} does not exist")
            rows.append({"path": str(p), "hash": cache.hash_tree(p)})
        out[name] = rows
    return out


def content_key(stage: Stage, spec: Any, input_hashes: dict[str, list[dict]]) -> tuple[str, dict]:
    """The key and the material it hashes. Input paths are left out: content decides."""
    material = {
        "format": KEY_FORMAT,
        "algorithm": ALGORITHM,
        "stage": stage.name,
        "code": code_version(stage),
        "params": stage.key_params(spec),
        "inputs": {name: [r["hash"] for r in rows] for name, rows in input_hashes.items()},
        "libraries": library_versions(stage),
    }
    return hash_value(material), material


def _peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux; children count for stages that spawn workers.
    self_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(self_kib, child_kib) * 1024


def execute(
    stage: Stage,
    spec: Any,
    inputs: dict[str, list[Path]],
    outputs: dict[str, Path],
    work_dir: Path,
    root: Path,
) -> None:
    """Run a stage function into the given output paths, and check it wrote all of them."""
    ctx = StageContext(stage.name, spec, inputs, outputs, work_dir, root)
    stage.function()(ctx)
    missing = [name for name, path in outputs.items() if not path.exists()]
    if missing:
        raise CampaignError(f"stage {stage.name} did not write output(s): {', '.join(missing)}")


def run_stage(
    stage_name: str,
    spec: Any,
    inputs: dict[str, list[Path]],
    outputs: dict[str, Path],
    store: Store,
    root: Path = Path("."),
) -> RunResult:
    """Materialize the stage's outputs from the store, computing and committing them if needed."""
    stage = get_stage(stage_name)
    unknown = set(outputs) ^ set(stage.outputs)
    if unknown:
        raise CampaignError(
            f"stage {stage.name} writes {', '.join(stage.outputs)}; got outputs "
            f"{', '.join(sorted(outputs))}"
        )
    store.ensure()
    started = time.time()
    job_id = store.job_id(outputs)
    cache = HashCache(store.root / "hashcache.sqlite")
    try:
        input_hashes = hash_inputs(inputs, cache)
    except CampaignError as e:
        store.log_event("fail", "", stage.name, error=str(e)[:500])
        store.write_job(
            job_id,
            {
                "stage": stage.name,
                "key": None,
                "state": "failed",
                "outputs": [str(p) for p in outputs.values()],
                "project": str(Path.cwd()),
                "error": str(e)[:2000],
            },
        )
        raise
    finally:
        cache.close()
    key, material = content_key(stage, spec, input_hashes)
    job = {
        "stage": stage.name,
        "key": key,
        "outputs": [str(p) for p in outputs.values()],
        "project": str(Path.cwd()),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "started": round(started, 3),
    }
    store.write_job(job_id, {**job, "state": "running"})
    staging = None
    try:
        with store.lock(key):
            entry = store.lookup(key, stage.name)
            if entry is not None:
                store.materialize(entry, outputs)
                seconds = time.time() - started
                store.log_event("hit", key, stage.name, seconds=round(seconds, 3))
                store.write_job(job_id, {**job, "state": "done", "hit": True, "ended": time.time()})
                print(f"{stage.name}: store hit {key[:16]} ({seconds:.2f} s)", flush=True)
                return RunResult(key, True, seconds)

            store.log_event("miss", key, stage.name)
            print(f"{stage.name}: store miss {key[:16]}; computing", flush=True)
            work_dir = store.work_dir(key)
            staging = store.new_staging(key)
            staged = {name: staging / "outputs" / name for name in outputs}
            t0 = time.time()
            execute(stage, spec, inputs, staged, work_dir, root)
            wall = time.time() - t0
            meta = {
                "stage": stage.name,
                "key_material": material,
                "spec": spec,
                "inputs": input_hashes,
                "wall_seconds": round(wall, 3),
                "peak_rss_bytes": _peak_rss_bytes(),
                "created": round(time.time(), 3),
                "environment": environment(),
            }
            entry = store.commit(key, staging, meta)
            staging = None
            store.materialize(entry, outputs)
            # The work folder held resumable state; the entry is the result now.
            remove_tree(work_dir)
            seconds = time.time() - started
            store.log_event("commit", key, stage.name, seconds=round(seconds, 3))
            store.write_job(job_id, {**job, "state": "done", "hit": False, "ended": time.time()})
            print(f"{stage.name}: committed {key[:16]} ({wall:.2f} s)", flush=True)
            return RunResult(key, False, seconds)
    except BaseException as e:
        if staging is not None:
            remove_tree(staging)
        message = str(e) if isinstance(e, CampaignError) else f"{type(e).__name__}: {e}"
        store.log_event("fail", key, stage.name, error=message[:500])
        store.write_job(
            job_id, {**job, "state": "failed", "error": message[:2000], "ended": time.time()}
        )
        raise


def reproduce(store: Store, key: str, scratch: Path, root: Path = Path(".")) -> list[dict]:
    """Recompute an entry from scratch (fresh work folder) and compare every output hash.

    Returns one row per output: name, stored hash, recomputed hash, equal. Inputs must still have
    the content the entry recorded.
    """
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
    meta = entry.meta
    stage = get_stage(meta["stage"])
    inputs: dict[str, list[Path]] = {}
    for name, rows in meta["inputs"].items():
        inputs[name] = []
        for row in rows:
            path = root / row["path"]
            if not path.exists():
                raise CampaignError(f"{key}: input '{name}' {row['path']} no longer exists")
            if hash_tree(path) != row["hash"]:
                raise CampaignError(
                    f"{key}: input '{name}' {row['path']} has changed since the entry was made; "
                    f"check out the version it recorded"
                )
            inputs[name].append(path)
    material = meta["key_material"]
    if material["code"] != code_version(stage):
        print(f"reproduce: note: the {stage.name} code has changed since {key[:16]} was made")
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "outputs").mkdir(exist_ok=True)
    outputs = {name: scratch / "outputs" / name for name in meta["outputs"]}
    work_dir = scratch / "work"
    work_dir.mkdir(exist_ok=True)
    with contextlib.chdir(root):
        execute(stage, meta.get("spec", material["params"]), inputs, outputs, work_dir, Path("."))
    rows = []
    for name, info in sorted(meta["outputs"].items()):
        actual = hash_tree(outputs[name])
        rows.append(
            {
                "output": name,
                "stored": info["hash"],
                "recomputed": actual,
                "equal": actual == info["hash"],
            }
        )
    return rows
