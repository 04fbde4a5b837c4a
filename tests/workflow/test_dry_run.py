"""The dry-run reader the end-to-end tests decide with (conftest.planned_jobs): an empty job list
counts only next to Snakemake's own "Nothing to be done", so a change in the listing's format
fails instead of reading as "nothing to rerun"."""

from __future__ import annotations

import subprocess

import pytest

from conftest import planned_jobs

LISTING = """Building DAG of jobs...
Job stats:
job         count
--------  -------
all             1
metrics         1
total           2

rule metrics:
    input: results/plan/runs.tsv
    output: results/metrics.json, results/metrics.txt
    jobid: 1
    reason: Code has changed since last execution

localrule all:
    input: results/metrics.json
    jobid: 0
"""


def dry_run(stdout: str, stderr: str = "") -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(["snakemake", "-n"], 0, stdout, stderr)


def test_jobs_are_read_from_the_listing():
    assert planned_jobs(dry_run(LISTING)) == [("all", ""), ("metrics", "results/metrics.json")]


def test_nothing_to_do_needs_snakemakes_own_line():
    assert (
        planned_jobs(dry_run("Building DAG of jobs...\n", "Nothing to be done (all requested"))
        == []
    )
    # A listing the parser cannot read (here: rules renamed "job") is not "nothing to do".
    unreadable = LISTING.replace("rule metrics:", "job metrics:").replace("localrule", "job")
    with pytest.raises(AssertionError, match="does not say 'Nothing to be done'"):
        planned_jobs(dry_run(unreadable))


def test_jobs_next_to_nothing_to_be_done_is_a_contradiction():
    with pytest.raises(AssertionError, match="lists 2 jobs but Snakemake says"):
        planned_jobs(dry_run(LISTING, "Nothing to be done (all requested files are present)"))
