"""`campaign status` and `campaign gc`: the planned jobs (Snakemake's own DAG) against the store.

Snakemake knows which outputs the current params plan and whether they are up to date; the job
records in the state folder know which store key made each output and whether its job is running
or failed. Together they answer "where is my campaign" without guessing a path. Both count jobs,
not output files: a training job's outputs are one job. Status also shows each running job's
progress file (step, elapsed, ETA; campaign.core.progress) and what the rest of the plan costs.

gc drops what nothing needs: entries and work folders the plan does not reference, staging
folders of killed commits, quarantined entries, lock files with nothing left to guard. It takes
each key's lock first (without waiting): a key a running job holds is skipped and reported.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from campaign.core.errors import CampaignError
from campaign.core.fsutil import remove_tree
from campaign.core.params import get_key
from campaign.core.store import Entry, Store, staging_key
from campaign.plan import RUN_ID_PATTERN, Run, run_id

# A job's outputs share its wildcards; the only wildcard of the rules is the run id.
_RUN_PART = re.compile(rf"(?:^|/)({RUN_ID_PATTERN})(?:/|$)")


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


def record_alive(record: dict) -> str | None:
    """Where a job recorded as running still runs ("pid 12", "slurm job 34"), or None if it died."""
    if record.get("slurm_job_id"):
        job = record["slurm_job_id"]
        return f"slurm job {job}" if _slurm_job_alive(job) else None
    if (
        record.get("host") == socket.gethostname()
        and record.get("pid")
        and _pid_alive(record["pid"])
    ):
        return f"pid {record['pid']}"
    return None


def group_jobs(rows: list[dict]) -> list[list[dict]]:
    """The summary's rows grouped by job: rule and run id (one job per rule without a run)."""
    jobs: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        match = _RUN_PART.search(row["output_file"])
        jobs.setdefault((row["rule"], match.group(1) if match else ""), []).append(row)
    return list(jobs.values())


def job_record(rows: list[dict], records: Mapping[str, dict]) -> dict | None:
    """The latest job record naming any of the job's outputs."""
    found = [records[r["output_file"]] for r in rows if r["output_file"] in records]
    return max(found, key=lambda r: r.get("started") or 0, default=None)


def job_state(rows: list[dict], record: dict | None) -> tuple[str, str]:
    """(state, note) for one planned job: done, stale, running, failed, interrupted, missing.

    Done when every output is present and up to date; missing when one is absent.
    """
    present = all(r.get("status") == "ok" or Path(r["output_file"]).exists() for r in rows)
    pending = any(r.get("plan", "") != "no update" for r in rows)
    if record is not None and record.get("state") == "running":
        where = record_alive(record)
        if where:
            return "running", where
        if not present or pending:
            return "interrupted", "its job died; the next snakemake run resumes it"
    stopped = ("interrupted", "preempted")  # preempted: checkpointed at a step, to resume
    if record is not None and record.get("state") in stopped and (not present or pending):
        return "interrupted", f"{record.get('error', 'interrupted')}; the next run resumes it"
    if record is not None and record.get("state") == "failed" and (not present or pending):
        return "failed", record.get("error", "")[:200]
    if not present:
        return "missing", ""
    if pending:
        return "stale", next(r.get("status", "") for r in rows if r.get("plan") != "no update")
    return "done", ""


_STATES = ("done", "running", "stale", "interrupted", "failed", "missing")


def status_lines(rows: list[dict], records: Mapping[str, dict]) -> tuple[list[str], Counter]:
    """The per-rule table of job states, one line per job that is not done, and the counts."""
    counts: Counter = Counter()
    per_rule: dict[str, Counter] = {}
    details = []
    for job in group_jobs(rows):
        rule = job[0]["rule"]
        state, note = job_state(job, job_record(job, records))
        counts[state] += 1
        per_rule.setdefault(rule, Counter())[state] += 1
        if state != "done":
            more = f" (+{len(job) - 1} more)" if len(job) > 1 else ""
            shown = f"{state:<11}  {rule:<14} {job[0]['output_file']}{more}"
            details.append(shown + (f"  ({note})" if note else ""))
    lines = [f"{'jobs per rule':<16} " + "  ".join(f"{s:>11}" for s in _STATES)]
    for rule, c in per_rule.items():
        lines.append(f"{rule:<16} " + "  ".join(f"{c.get(s, 0):>11}" for s in _STATES))
    lines += details
    lines.append("summary: " + ", ".join(f"{counts[s]} {s}" for s in _STATES if counts[s]))
    return lines, counts


def progress_lines(
    found: list[tuple[Path, dict]], now: float | None = None
) -> tuple[list[str], dict[str, float]]:
    """One line per job progress file: a live job's stage, run, step/total, elapsed and ETA
    (carried forward from the file's last update); a file whose job is gone is "not running
    (stale)". Also the live jobs' ETAs in seconds by run id."""
    from campaign.core.progress import format_seconds, progress_line

    now = time.time() if now is None else now
    lines, etas = [], {}
    for path, rec in found:
        try:
            since = max(0.0, now - float(rec.get("updated_at") or now))
            step, total = int(rec.get("step", 0)), int(rec.get("total", 0))
            pid = int(rec.get("pid") or 0)
        except (TypeError, ValueError):
            lines.append(f"unreadable progress file  {path}")
            continue
        label = f"{rec.get('stage', '?')} {rec.get('run') or path.parent.name[:8] + '…'}"
        alive = rec.get("host") == socket.gethostname() and pid > 0 and _pid_alive(pid)
        if not alive and rec.get("host") not in (None, socket.gethostname()):
            alive = since < 600  # another node: trust a recent update
        if alive:
            eta = rec.get("eta_s")
            eta = None if eta is None else max(0.0, float(eta) - since)
            elapsed = float(rec.get("elapsed_s", 0.0)) + since
            if rec.get("run"):
                etas[rec["run"]] = eta
            line = progress_line(label, step, total, elapsed, eta)
            lines.append(f"running      {line} (pid {rec.get('pid')})")
        else:
            lines.append(
                f"not running (stale)  {label}: step {step}/{total}, last update "
                f"{format_seconds(since)} ago by pid {rec.get('pid')} on {rec.get('host')} "
                f"({path})"
            )
    return lines, etas


def read_plan_table(path: Path) -> list[dict]:
    """The plan's kept runs (runs.tsv): run id and projected hours (None when not measured)."""
    import csv

    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    out = []
    for i, row in enumerate(rows, start=2):
        if "run" not in row or "projected_hours" not in row:
            raise CampaignError(f"{path}: line {i}: expected columns run and projected_hours")
        if str(row.get("kept", "true")).lower() != "true":
            continue
        try:
            hours = float(row["projected_hours"])
        except (TypeError, ValueError):
            hours = None
        out.append({"run": row["run"], "projected_hours": hours})
    return out


def read_calibration(path: Path) -> tuple[float, float] | None:
    """(step factor, overhead hours per job) from the budget's forecast table, when it exists."""
    if not path.exists():
        return None
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path, columns=["step_factor", "overhead_hours"]).to_pylist()
    except Exception as e:  # a forecast of another layout: no correction, say why
        raise CampaignError(f"{path}: cannot read step_factor/overhead_hours ({e})") from None
    for row in table:
        factor, overhead = row["step_factor"], row["overhead_hours"]
        if factor is not None and overhead is not None and factor == factor:
            return float(factor), float(overhead)
    return None


def remaining_hours(
    plan: list[dict],
    finished: set[str],
    calibration: tuple[float, float] | None,
    running_eta_s: Mapping[str, float | None] | None = None,
) -> tuple[float | None, int]:
    """(hours left, runs left) for the plan's runs not finished: each run's projected hours,
    corrected (projected x step factor + overhead) when the budget has calibrated; a running
    run's own ETA where its progress file has one. None hours when a run has no projection."""
    running_eta_s = running_eta_s or {}
    left = [r for r in plan if r["run"] not in finished]
    total = 0.0
    for r in left:
        if running_eta_s.get(r["run"]) is not None:
            total += running_eta_s[r["run"]] / 3600
        elif r["projected_hours"] is None:
            return None, len(left)
        elif calibration is None:
            total += r["projected_hours"]
        else:
            total += r["projected_hours"] * calibration[0] + calibration[1]
    return total, len(left)


def finished_runs(rows: list[dict], records: Mapping[str, dict]) -> set[str]:
    """Run ids whose training job is done."""
    done = set()
    for job in group_jobs(rows):
        match = _RUN_PART.search(job[0]["output_file"])
        if job[0]["rule"] == "train" and match:
            if job_state(job, job_record(job, records))[0] == "done":
                done.add(match.group(1))
    return done


def remaining_line(
    plan: list[dict],
    finished: set[str],
    calibration: tuple[float, float] | None,
    budget: Mapping[str, Any],
    running_eta_s: Mapping[str, float | None] | None = None,
) -> str:
    """`remaining: 2 of 4 planned runs, 12.5 min (calibrated ...), 0.01 EUR on workstation ...`."""
    from campaign.budget import format_money
    from campaign.core.progress import format_seconds

    hours, n_left = remaining_hours(plan, finished, calibration, running_eta_s)
    if n_left == 0:
        return f"remaining: nothing: all {len(plan)} planned runs have finished"
    how = (
        f"calibrated: projected x{calibration[0]:.3g} + {calibration[1] * 3600:.3g} s a job"
        if calibration is not None
        else "as projected; not yet calibrated by the budget"
    )
    head = f"remaining: {n_left} of {len(plan)} planned runs"
    if hours is None:
        return f"{head}, hours unknown (the preflight has not measured throughput)"
    name = budget.get("reference_offer")
    offer = next((o for o in budget.get("offers", []) if o.get("name") == name), None)
    money = (
        f", {format_money(hours * float(offer['hourly']), budget.get('currency', ''))} on "
        f"{name} ({offer['hourly']} {budget.get('currency', '')}/h)"
        if offer is not None
        else ""
    )
    return f"{head}, {format_seconds(hours * 3600)} ({how}){money}"


def print_status(
    params_path: str,
    store: Store,
    snakefile: str = "Snakefile",
    plan_table: str = "results/plan/runs.tsv",
    forecast: str = "results/budget/forecast.parquet",
) -> int:
    from campaign.core.params import load_params
    from campaign.core.progress import find_progress

    rows = snakemake_summary(params_path, snakefile)
    records = store.jobs_by_output()
    lines, counts = status_lines(rows, records)
    print("\n".join(lines))
    running, etas = progress_lines(find_progress(store.work_root))
    if running:
        print("progress:\n" + "\n".join(f"  {line}" for line in running))
    if Path(plan_table).exists():
        budget = load_params(params_path).get("budget", {})
        line = remaining_line(
            read_plan_table(Path(plan_table)),
            finished_runs(rows, records),
            read_calibration(Path(forecast)),
            budget,
            etas,
        )
        print(line)
    else:
        print(f"remaining: unknown until the plan table ({plan_table}) is written")
    return 1 if counts["failed"] else 0


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
    import time

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
    return 0


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
