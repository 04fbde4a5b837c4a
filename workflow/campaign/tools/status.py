"""`campaign status` and `campaign gc`: the planned jobs (Snakemake's own DAG) against the store.

Snakemake knows which outputs the current params plan and whether they are up to date; the job
records in the state folder know which store key made each output and whether its job is running
or failed. Together they answer "where is my campaign" without guessing a path.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.fsutil import remove_tree
from campaign.core.store import Store


def snakemake_summary(params_path: str, snakefile: str) -> list[dict]:
    """Rows of `snakemake --summary` (output_file, date, rule, status, plan) for the current DAG."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--summary",
        "--snakefile",
        snakefile,
        "--configfile",
        params_path,
        "--cores",
        "1",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise CampaignError(f"snakemake --summary failed: {last}")
    lines = proc.stdout.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("output_file\t"))
    except StopIteration:
        raise CampaignError("snakemake --summary printed no table") from None
    header = lines[start].split("\t")
    return [
        dict(zip(header, line.split("\t"), strict=False)) for line in lines[start + 1 :] if line
    ]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _slurm_job_alive(job_id: str) -> bool:
    try:
        proc = subprocess.run(
            ["squeue", "-h", "-j", str(job_id), "-o", "%T"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    # Only these states mean the job may still write; CANCELLED, TIMEOUT, OUT_OF_MEMORY,
    # NODE_FAIL, PREEMPTED, ... mean it is over (squeue lists ended jobs for MinJobAge).
    alive = {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "REQUEUED",
        "RESIZING",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "STAGE_OUT",
        "SIGNALING",
    }
    return proc.returncode == 0 and proc.stdout.strip() in alive


def job_state(row: dict, record: dict | None) -> tuple[str, str]:
    """(state, note) for one planned output: done, stale, running, failed, interrupted, missing."""
    present = row.get("status") == "ok" or Path(row["output_file"]).exists()
    pending = row.get("plan", "") != "no update"
    if record is not None and record.get("state") == "running":
        alive = (
            _slurm_job_alive(record["slurm_job_id"])
            if record.get("slurm_job_id")
            else record.get("host") == socket.gethostname() and _pid_alive(record["pid"])
        )
        if alive:
            where = (
                f"slurm job {record['slurm_job_id']}"
                if record.get("slurm_job_id")
                else (f"pid {record['pid']}")
            )
            return "running", where
        if not present or pending:
            return "interrupted", "its job died; the next snakemake run resumes it"
    if record is not None and record.get("state") == "failed" and (not present or pending):
        return "failed", record.get("error", "")[:200]
    if not present:
        return "missing", ""
    if pending:
        return "stale", row.get("status", "")
    return "done", ""


def print_status(params_path: str, store: Store, snakefile: str = "Snakefile") -> int:
    rows = snakemake_summary(params_path, snakefile)
    records = store.jobs_by_output()
    counts: Counter = Counter()
    per_rule: dict[str, Counter] = {}
    details = []
    for row in rows:
        state, note = job_state(row, records.get(row["output_file"]))
        counts[state] += 1
        per_rule.setdefault(row["rule"], Counter())[state] += 1
        if state != "done":
            details.append((state, row["rule"], row["output_file"], note))
    print(f"{'rule':<16} " + "  ".join(f"{s:>11}" for s in _STATES))
    for rule, c in per_rule.items():
        print(f"{rule:<16} " + "  ".join(f"{c.get(s, 0):>11}" for s in _STATES))
    for state, rule, output, note in details:
        print(f"{state:<11}  {rule:<14} {output}" + (f"  ({note})" if note else ""))
    print("summary: " + ", ".join(f"{counts[s]} {s}" for s in _STATES if counts[s]))
    return 1 if counts["failed"] else 0


_STATES = ("done", "running", "stale", "interrupted", "failed", "missing")


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


def garbage_collect(
    params_path: str,
    store: Store,
    dry_run: bool,
    snakefile: str = "Snakefile",
    force: bool = False,
) -> int:
    """Drop store entries and work folders the current plan does not reference."""
    keep, unaccounted = referenced_keys(params_path, store, snakefile)
    if unaccounted and not force:
        raise CampaignError(
            f"gc: {len(unaccounted)} planned output(s) have neither a file nor a job record "
            f"(e.g. {unaccounted[0]}), so their store entries cannot be told apart from garbage; "
            f"run snakemake first, or pass --force"
        )
    drop = [k for k in store.keys() if k not in keep]
    work = [p.name for p in store.work_root.iterdir()] if store.work_root.exists() else []
    drop_work = [k for k in work if k not in keep and k not in drop]
    quarantined = sorted(store.tmp.glob("corrupt-*")) if store.tmp.exists() else []
    size = 0
    for key in drop:
        entry = store.read_entry(key)
        outputs = entry.meta.get("outputs", {}) if entry else {}
        size += sum(o.get("bytes", 0) for o in outputs.values())
        stage = entry.meta.get("stage", "?") if entry else "?"
        print(f"{'would remove' if dry_run else 'remove'}  {stage:<12} {key}")
    verb = "would remove" if dry_run else "removed"
    print(
        f"{verb} {len(drop)} entries ({size / 1e6:.1f} MB), {len(drop_work)} work folders, "
        f"{len(quarantined)} quarantined corrupt entries; kept {len(keep)} referenced entries"
    )
    if not dry_run:
        for key in drop:
            store.remove(key)
        for key in drop_work:
            remove_tree(store.work_root / key)
        for path in quarantined:
            remove_tree(path)
    return 0
