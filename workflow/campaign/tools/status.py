"""`campaign status`: the planned jobs (Snakemake's own DAG) against the store.

Snakemake knows which outputs the current params plan and whether they are up to date; the job
records in the state folder know which store key made each output and whether its job is running
or failed. Together they answer "where is my campaign" without guessing a path. Status counts
jobs, not output files: a training job's outputs are one job. It also shows each running job's
progress file (step, elapsed, ETA; campaign.core.progress) and what the rest of the plan costs
(campaign.tools.forecast). In an adaptive campaign the plan is the runs the latest look asked
for (campaign.plan.look_runs: the kept runs and the appended ones), counted trained, running and
to do, then each look in the evaluation's words (campaign.evaluate.look_lines). A run Snakemake
would rerun (stale, or its outputs gone) whose training key, as its params, code and inputs are
now, has a sound store entry (stored_runs) is counted trained and not priced: its rerun is a
store hit. Not while a job upstream of train (split, manifest, ...) is pending: then every run
stays priced.

The jobs and their states: campaign.tools.jobs; whether a running job still runs:
campaign.tools.liveness; `campaign gc`: campaign.tools.gc (its entry is re-exported here, where
the command line imports it).
"""

from __future__ import annotations

import socket
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from campaign.core.defaults import train_key
from campaign.core.errors import CampaignError
from campaign.core.store import Store
from campaign.plan import CampaignRuns
from campaign.tools.forecast import read_calibration, read_plan_table, remaining_line
from campaign.tools.gc import collect_garbage, garbage_collect
from campaign.tools.jobs import (
    STATES,
    group_jobs,
    job_record,
    job_state,
    snakemake_summary,
    train_states,
)
from campaign.tools.liveness import pid_alive

__all__ = [
    "adaptive_line",
    "collect_garbage",
    "garbage_collect",
    "print_status",
    "progress_lines",
    "run_states",
    "status_lines",
    "stored_line",
    "stored_runs",
    "train_inputs",
    "upstream_stages",
]


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
    lines = [f"{'jobs per rule':<16} " + "  ".join(f"{s:>11}" for s in STATES)]
    for rule, c in per_rule.items():
        lines.append(f"{rule:<16} " + "  ".join(f"{c.get(s, 0):>11}" for s in STATES))
    lines += details
    lines.append("summary: " + ", ".join(f"{counts[s]} {s}" for s in STATES if counts[s]))
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
        alive = rec.get("host") == socket.gethostname() and pid > 0 and pid_alive(pid)
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


def run_states(
    runs: Sequence[str], listed: Mapping[str, str], records: Mapping[str, dict], live: set[str]
) -> dict[str, str]:
    """{run: its training job's state}: running when its progress file is live, else Snakemake's
    where its summary lists the job (listed: {run: state}), else the job record of the train
    stage's declared run manifest: done with the file there, running while its process lives,
    missing otherwise. Snakemake's --summary does not list the runs an adaptive look appended
    (it does not expand the looks' checkpoints); the job records do."""
    from campaign.core.registry import get_stage
    from campaign.tools.liveness import record_alive

    manifest = get_stage("train").outputs["run_manifest"].path
    out = {}
    for run in runs:
        path = manifest.format(run=run)
        record = records.get(path) or {}
        if run in live:
            out[run] = "running"
        elif run in listed:
            out[run] = listed[run]
        elif record.get("state") == "done" and Path(path).exists():
            out[run] = "done"
        elif record.get("state") == "running" and record_alive(record):
            out[run] = "running"
        else:
            out[run] = "missing"
    return out


def train_inputs(wildcards: Mapping[str, str]) -> dict[str, list[Path]]:
    """The train stage's inputs for one run as its rule gives them: each From input's path
    (the split files); the Derived one (the base model folder) the runner derives itself."""
    from campaign.core.registry import get_stage, produced
    from campaign.core.stage import From

    stage = get_stage("train")
    return {
        name: [Path(produced(source).path.format(**wildcards))]
        for name, source in stage.inputs.items()
        if isinstance(source, From)
    }


def upstream_stages(stage: str = "train") -> set[str]:
    """The stages whose outputs the stage's job reads, and theirs, and so on (its `after` files
    included): for train the split, the manifest, the plan table and the preflight."""
    from campaign.core.registry import get_stage

    found: set[str] = set()
    todo = [stage]
    while todo:
        declared = get_stage(todo.pop())
        for source in {**declared.inputs, **declared.after}.values():
            name = getattr(source, "stage", None)
            if name is not None and name not in found:
                found.add(name)
                todo.append(name)
    return found


def stored_runs(
    runs: Sequence[str],
    states: Mapping[str, str],
    params: dict,
    store: Store,
    records: Mapping[str, dict],
    rows: Sequence[dict] = (),
) -> set[str]:
    """The runs not trained or running (states: run_states') whose training job would be a
    store hit now (campaign.core.runner.stored_key: the key of its params, code and inputs as
    they are has an entry): Snakemake reruns them (an input's mtime changed, the outputs were
    deleted) at the cost of a store hit, no training. Threads as the run's last job recorded
    them (its entry's execution settings), else a rule's default. None while a job upstream of
    train is pending in Snakemake's summary (rows: a split param edited, the manifest stale):
    the split files on disk are not the ones the runs will read, so no key hashed from them
    tells a hit; the runs stay stale and priced."""
    from campaign.core.registry import get_stage
    from campaign.core.runner import DEFAULT_THREADS, stored_key
    from campaign.plan import run_spec_of

    upstream = upstream_stages("train")
    if any(r["rule"] in upstream and r.get("plan", "") != "no update" for r in rows):
        return set()
    manifest = get_stage("train").outputs["run_manifest"].path
    found = set()
    for run in runs:
        if states.get(run, "missing") in ("done", "running"):
            continue
        record = records.get(manifest.format(run=run)) or {}
        entry = store.read_entry(record["key"]) if record.get("key") else None
        execution = (entry.meta.get("key_material", {}) if entry else {}).get("execution") or {}
        threads = int(execution.get("threads", DEFAULT_THREADS))
        try:
            spec = run_spec_of(params, run)
        except CampaignError:  # a run the params no longer plan: Snakemake would not rerun it
            continue
        if stored_key("train", spec, train_inputs({"run": run}), store, threads=threads):
            found.add(run)
    return found


def stored_line(stored: set[str], states: Mapping[str, str]) -> str:
    """`store hits: ...`: the runs Snakemake would rerun that cost a store hit, by state."""
    by = Counter(states.get(r, "missing") for r in stored)
    how = ", ".join(f"{n} {state}" for state, n in sorted(by.items()))
    return (
        f"store hits: {len(stored)} run(s) Snakemake would rerun ({how}) are in the store: "
        "the rerun materializes them, no training; counted trained, not priced"
    )


def adaptive_line(
    campaign: CampaignRuns, states: Mapping[str, str], stored: set[str] = frozenset()
) -> str:
    """The runs an adaptive campaign's latest look asked for: trained (the store hits among
    them: `stored`, stored_runs'), stale (Snakemake would rerun and train them), running and
    to do (states: run_states'), and the candidates a later look may still append."""
    state = ["stored" if r in stored else states.get(r, "missing") for r in campaign.runs]
    counts = {s: state.count(s) for s in ("done", "stored", "stale", "running")}
    if campaign.looks:
        asks = f"look {campaign.looks}{' (the last)' if campaign.final else ''} asks for"
    else:
        asks = "before the first look: the plan's kept runs,"
    appended = f" ({len(campaign.appended)} appended by the looks)" if campaign.appended else ""
    hits = f" ({counts['stored']} of them store hits)" if counts["stored"] else ""
    stale = f", {counts['stale']} stale" if counts["stale"] else ""
    line = (
        f"adaptive: {asks} {len(state)} runs{appended}: "
        f"{counts['done'] + counts['stored']} trained{hits}{stale}, "
        f"{counts['running']} running, {len(state) - sum(counts.values())} to do"
    )
    if not campaign.final:
        line += f"; a later look may append up to {len(campaign.not_asked)} more"
    return line


def print_status(
    params_path: str,
    store: Store,
    snakefile: str = "Snakefile",
    plan_table: str = "results/plan/runs.tsv",
    forecast: str = "results/budget/forecast.parquet",
    looks_folder: str = "results/adaptive",
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
        from campaign.plan import adaptive_runs, campaign_runs, look_files, plan_index

        params = load_params(params_path)
        runs = [*plan_index(params).values(), *adaptive_runs(params)]
        cards = {r.run_id: int(train_key(r.spec["train"], "devices")) for r in runs}
        campaign = campaign_runs(plan_table, look_files(looks_folder))
        states = run_states(campaign.runs, train_states(rows, records), records, set(etas))
        stored = stored_runs(campaign.runs, states, params, store, records, rows)
        line = remaining_line(
            read_plan_table(Path(plan_table), campaign.runs),
            stored | {r for r, state in states.items() if state == "done"},
            read_calibration(Path(forecast)),
            params.get("budget", {}),
            etas,
            cards,
        )
        print(line)
        if stored:
            print(stored_line(stored, states))
        if campaign.adaptive:
            print(adaptive_line(campaign, states, stored))
    else:
        print(f"remaining: unknown until the plan table ({plan_table}) is written")
    from campaign.evaluate import LOOKS_TITLE, look_lines, read_looks

    looks = look_lines(read_looks(Path(looks_folder)))
    if looks:
        print(f"{LOOKS_TITLE}:\n" + "\n".join(f"  {line}" for line in looks))
    return 1 if counts["failed"] else 0
