"""`campaign gc`: drop what nothing needs: entries and work folders the plan does not reference,
staging folders of killed commits, quarantined entries, lock files with nothing left to guard.
Only what the store made (named by a content key, core/store.py) is ever removed; anything else
under the state folder is listed as left alone.
It takes each key's lock first (without waiting): a key a running job holds is skipped and
reported.
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from campaign.core.errors import CampaignError
from campaign.core.fsutil import remove_tree
from campaign.core.params import get_key
from campaign.core.store import Entry, Store, staging_key, unfinished_copies
from campaign.plan import Run, run_id
from campaign.tools.jobs import snakemake_summary
from campaign.tools.liveness import record_alive
from campaign.tools.verify import say_left_alone


def referenced_keys(params_path: str, store: Store, snakefile: str) -> tuple[set[str], list[str]]:
    """(keys to keep, planned outputs nobody can account for).

    Kept: keys this checkout's job records name for the outputs the current DAG plans; entries
    made by the current code of their stage whose file outputs have the content of an existing
    planned output (a checkout filled by `dvc pull` has outputs but no job records); keys other
    checkouts sharing the store record. An entry made by other code (an older version of the
    stage, or a stage that no longer exists) can never be a store hit again, so only a record
    keeps it.
    """
    from campaign.core.hashing import hash_file
    from campaign.core.registry import stages
    from campaign.core.runner import code_version

    current = {name: code_version(stage) for name, stage in stages().items()}
    rows = snakemake_summary(params_path, snakefile)
    records = store.jobs_by_output()
    keep = {records[r["output_file"]].get("key") for r in rows if r["output_file"] in records}
    present = {hash_file(p) for r in rows if (p := Path(r["output_file"])).is_file()}
    for key in store.keys():
        entry = store.read_entry(key)
        meta = entry.meta if entry else {}
        made_by = meta.get("key_material", {}).get("code")
        if made_by is None or made_by != current.get(meta.get("stage")):
            continue
        outputs = meta.get("outputs", {})
        if any(o.get("kind") == "file" and o.get("hash") in present for o in outputs.values()):
            keep.add(key)
    here = str(Path.cwd())
    keep |= {r.get("key") for r in store.job_records() if r.get("project", here) != here}
    unaccounted = [
        r["output_file"]
        for r in rows
        if r["output_file"] not in records and not Path(r["output_file"]).exists()
    ]
    return {k for k in keep if k}, unaccounted


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def disk_bytes(path: Path) -> int:
    """Bytes of the files under a folder (or of one file); 0 when it is gone."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except FileNotFoundError:
                continue
    return total


def _run_id_of(spec: Any) -> str | None:
    """The run id of a planned run's spec (train and run_spec entries), else None."""
    if not (isinstance(spec, dict) and isinstance(spec.get("train"), dict) and "seed" in spec):
        return None
    try:
        return run_id(spec)
    except (KeyError, TypeError, ValueError):
        return None  # a spec of an older layout: no id to show


def describe_entry(entry: Entry | None, runs: Mapping[str, Run]) -> tuple[str, str, str]:
    """(stage, run id, factor levels) of an entry; "-" where it has none.

    A planned run's levels come from the plan; a run no longer planned shows what its spec
    holds at the current factors' keys.
    """
    meta = entry.meta if entry else {}
    stage = str(meta.get("stage", "?"))
    spec = meta.get("spec")
    rid = _run_id_of(spec)
    if rid is None:
        return stage, "-", "-"
    if rid in runs:
        cell = list(runs[rid].cell)
    else:
        factors = next(iter(runs.values())).cell if runs else ()
        cell = []
        for dotted, _level in factors:
            try:
                cell.append((dotted, get_key(spec, dotted)))
            except (KeyError, TypeError):
                continue
    return stage, rid, " ".join(f"{k}={v}" for k, v in cell) or "-"


def busy_keys(store: Store) -> dict[str, str]:
    """Keys of jobs recorded as running that may still run: gc leaves them alone even when flock
    cannot tell (CAMPAIGN_FLOCK=off, or a job on another node). key -> where it runs."""
    busy = {}
    for record in store.job_records():
        key = record.get("key")
        if not key or record.get("state") != "running":
            continue
        if record.get("host") not in (None, socket.gethostname()) and not record.get(
            "slurm_job_id"
        ):
            busy[key] = f"recorded as running on {record['host']}"
        elif where := record_alive(record):
            busy[key] = f"running: {where}"
    return busy


@dataclass
class Garbage:
    """What gc drops, by kind; work folders with the reason they are garbage."""

    entries: list[str] = field(default_factory=list)
    work: dict[str, str] = field(default_factory=dict)
    commits: list[Path] = field(default_factory=list)
    quarantined: list[Path] = field(default_factory=list)
    locks: list[str] = field(default_factory=list)

    def keys(self) -> list[str]:
        staged = {staging_key(p) or "" for p in self.commits}
        return sorted({*self.entries, *self.work, *staged, *self.locks} - {""})


def find_garbage(store: Store, keep: set[str]) -> Garbage:
    """Entries not in `keep`; work folders of keys not in `keep` or whose entry is committed (the
    job died before cleaning up); all staging folders (gc then drops those whose key lock is
    free: their writer is gone); folders set aside under tmp/ (quarantined entries, retired work
    folders); lock files of keys with nothing else."""
    keys = set(store.keys())
    garbage = Garbage(entries=sorted(keys - keep))
    work = store.work_keys()
    for key in work:
        if key in keys and key not in keep:
            continue  # goes with its entry
        if key not in keep:
            garbage.work[key] = "not referenced by the plan"
        elif (entry := store.read_entry(key)) is not None and not store.problems(entry):
            garbage.work[key] = "its entry is committed"
    garbage.commits = store.staged_commits()
    garbage.quarantined = store.quarantined()
    others = keys | set(work) | {staging_key(p) for p in garbage.commits}
    garbage.locks = [k for k in store.lock_keys() if k not in others]
    return garbage


def _drop_key(store: Store, key: str, garbage: Garbage) -> None:
    """Remove what gc found for one key; the caller holds the key's lock."""
    if key in garbage.entries:
        store.remove(key)  # entry, work folder and (held) lock file
    if key in garbage.work:
        store.remove_work(key)
    for path in garbage.commits:
        if staging_key(path) == key:
            remove_tree(path)
    if store.read_entry(key) is None and not (store.work_root / key).exists():
        store.forget_lock(key)


@dataclass(frozen=True)
class Item:
    """One thing gc drops, described before anything goes."""

    kind: str  # entry, work, commit, aside
    key: str  # whose lock guards it ("" for a folder set aside: nothing uses it)
    size: int
    text: str


def garbage_items(store: Store, garbage: Garbage, runs: Mapping[str, Run]) -> list[Item]:
    """One described item per entry, work folder, staging folder and folder set aside."""
    described = sorted(
        ((describe_entry(store.read_entry(key), runs), key) for key in garbage.entries),
        key=lambda item: (item[0][1], item[0][0], item[1]),  # by run: its entries side by side
    )
    items = []
    for (stage, rid, levels), key in described:
        size = disk_bytes(store.entry_path(key)) + disk_bytes(store.work_root / key)
        text = f"{stage:<12} {rid:<16} {levels:<24} {human_bytes(size):>10}  {key}"
        items.append(Item("entry", key, size, text))
    for key, why in sorted(garbage.work.items()):
        size = disk_bytes(store.work_root / key)
        text = f"work folder  {key}  {human_bytes(size)}  ({why})"
        items.append(Item("work", key, size, text))
    for path in garbage.commits:
        size = disk_bytes(path)
        text = f"unfinished commit  {path.name}  {human_bytes(size)}"
        items.append(Item("commit", staging_key(path) or "", size, text))
    for path in garbage.quarantined:
        size = disk_bytes(path)
        text = f"set aside    {path.name}  {human_bytes(size)}"
        items.append(Item("aside", "", size, text))
    return items


def collect_garbage(
    store: Store,
    keep: set[str],
    dry_run: bool,
    runs: Mapping[str, Run] | None = None,
    retention: dict | None = None,
) -> int:
    """Drop (with `dry_run`: list) what `find_garbage` finds, key by key under the key's lock.

    The lock is tried, never waited on: a key a running job holds (or that a job record says is
    running) is skipped and reported. `runs` (the plan's, by id) describes the entries.
    `retention` (params ``retention``, with ``gc --retention``): keys inside their retention
    window are kept and listed with the day they fall due (``tools.retention``).
    """

    from campaign.tools.retention import held_keys

    garbage = find_garbage(store, keep)
    items = garbage_items(store, garbage, runs or {})
    busy = busy_keys(store)
    retained = held_keys(store, garbage, retention, time.time()) if retention else {}
    skipped: dict[str, str] = {}
    for key in garbage.keys():
        if key in retained:
            skipped[key] = retained[key]
        elif key in busy:
            skipped[key] = busy[key]
        elif dry_run:
            if store.locked(key):
                skipped[key] = "locked by a running job"
        else:
            with store.try_lock(key) as held:
                if held:
                    _drop_key(store, key, garbage)
                else:
                    skipped[key] = "locked by a running job"
    if not dry_run:
        for path in garbage.quarantined:
            remove_tree(path)
    verb = "would remove" if dry_run else "removed"
    for item in items:
        if item.key in skipped:
            verb_here = "kept" if item.key in retained else "skipped"
            print(f"{verb_here:<12}  {item.text}  [{skipped[item.key]}]")
        else:
            print(f"{verb:<12}  {item.text}")
    dropped = [item for item in items if item.key not in skipped]
    count = Counter(item.kind for item in dropped)
    size = sum(item.size for item in dropped if item.kind == "entry")
    work_size = sum(item.size for item in dropped if item.kind == "work")
    locks = [k for k in garbage.locks if k not in skipped]
    kept = len(set(store.keys()) & keep)
    print(
        f"{verb} {count['entry']} entries ({human_bytes(size)}), {count['work']} work folders "
        f"({human_bytes(work_size)}), "
        f"{count['commit']} unfinished commits, {count['aside']} quarantined or retired "
        f"folders, {len(locks)} stale lock files; kept {kept} referenced entries"
        + (f"; kept {len(retained)} key(s) inside their retention window" if retained else "")
        + (
            f"; skipped {len(skipped) - len(retained)} key(s) in use by a running job"
            if len(skipped) > len(retained)
            else ""
        )
    )
    sweep_unfinished_copies(store, dry_run)
    say_left_alone(store)
    return 0


def sweep_unfinished_copies(store: Store, dry_run: bool) -> list[Path]:
    """Remove (with `dry_run`: list) the copies of outputs that a job killed while it
    materialized them left beside them (`.<name>.<id>.tmp`, core/store.py), for every output this
    checkout's job records name, except those of a job that still runs (it may be copying)."""
    here = str(Path.cwd())
    found: list[Path] = []
    for record in store.job_records():
        if record.get("project", here) != here:
            continue
        if record.get("state") == "running" and record_alive(record):
            continue
        for output in record.get("outputs", []):
            found += unfinished_copies(Path(output))
    verb = "would remove" if dry_run else "removed"
    for path in sorted(set(found)):
        print(f"{verb:<12}  unfinished copy  {path}  {human_bytes(disk_bytes(path))}")
        if not dry_run:
            remove_tree(path)
    return sorted(set(found))


def garbage_collect(
    params_path: str,
    store: Store,
    dry_run: bool,
    snakefile: str = "Snakefile",
    force: bool = False,
    retention: bool = False,
) -> int:
    """Drop store entries, work folders and leftovers the current plan does not reference.

    Refuses when planned outputs have neither a file nor a job record (their entries cannot be
    told apart from garbage) unless `force`: then those entries go too. `retention`: hold back
    what is inside the windows of params ``retention``.
    """
    from campaign.core.params import load_params
    from campaign.plan import plan_index

    keep, unaccounted = referenced_keys(params_path, store, snakefile)
    if unaccounted and not force:
        raise CampaignError(
            f"gc: {len(unaccounted)} planned output(s) have neither a file nor a job record "
            f"(e.g. {unaccounted[0]}), so their store entries cannot be told apart from garbage; "
            f"run snakemake first, or pass --force"
        )
    if unaccounted:
        print(
            f"gc: --force: {len(unaccounted)} planned output(s) have neither a file nor a job "
            f"record (e.g. {unaccounted[0]}); their entries are collected like any other"
        )
    params = load_params(params_path)
    windows = params["retention"] if retention else None
    return collect_garbage(store, keep, dry_run, plan_index(params), windows)
