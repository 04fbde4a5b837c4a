"""The planned jobs as Snakemake sees them (`snakemake --summary`), grouped by job, and each
job's state from its outputs and the runner's job record: what `campaign status` counts and
`campaign gc` keeps."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.plan import RUN_ID_PATTERN
from campaign.tools.liveness import record_alive

# A job's outputs share its wildcards; the only wildcard of the rules is the run id.
_RUN_PART = re.compile(rf"(?:^|/)({RUN_ID_PATTERN})(?:/|$)")
STATES = ("done", "running", "stale", "interrupted", "failed", "missing")


def snakemake_summary(params_path: str, snakefile: str) -> list[dict]:
    """Rows of `snakemake --summary` (output_file, date, rule, status, plan) for the current DAG."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--summary",
        "--snakefile",
        snakefile,
        "--cores",
        "1",
    ]
    # The Snakefile reads the campaign from CAMPAIGN_PARAMS (and refuses another --configfile).
    env = {**os.environ, "CAMPAIGN_PARAMS": params_path}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
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


def train_states(rows: list[dict], records: Mapping[str, dict]) -> dict[str, str]:
    """{run id: its training job's state (one of STATES)} for the training jobs Snakemake
    plans."""
    states = {}
    for job in group_jobs(rows):
        match = _RUN_PART.search(job[0]["output_file"])
        if job[0]["rule"] == "train" and match:
            states[match.group(1)] = job_state(job, job_record(job, records))[0]
    return states
