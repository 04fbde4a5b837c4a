"""The tiny campaign submitted through sbatch to the local single-node SLURM cluster.

Needs the cluster from scripts/slurm-cluster.sh (scripts/test.sh starts it when slurm-wlm is
installed). Skipped without it, unless CAMPAIGN_REQUIRE_SLURM=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from conftest import BIN, copy_project, env, events, result_hashes, run, snakemake

pytestmark = [pytest.mark.slow, pytest.mark.slurm]


def cluster_up() -> tuple[bool, str]:
    if shutil.which("sbatch") is None:
        return False, "sbatch not installed (CAMPAIGN_SLURM=install bash scripts/test.sh)"
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20
        )
    except subprocess.TimeoutExpired:
        return False, "sinfo did not answer in 20 s"
    if proc.returncode != 0 or not {"idle", "mixed"} & set(proc.stdout.split()):
        return False, "local SLURM cluster not running (bash scripts/slurm-cluster.sh start)"
    return True, ""


@pytest.fixture(scope="module", autouse=True)
def require_cluster():
    up, why = cluster_up()
    if not up:
        if os.environ.get("CAMPAIGN_REQUIRE_SLURM") == "1":
            pytest.fail(f"CAMPAIGN_REQUIRE_SLURM=1 but {why}")
        pytest.skip(why)


def test_tiny_campaign_through_sbatch(tmp_path):
    project = copy_project(tmp_path / "cluster")
    proc = run(
        ["timeout", "900", str(BIN / "snakemake"), "--profile", "profiles/slurm"],
        project,
        timeout=960,
    )
    assert "Nothing to be done" not in proc.stdout + proc.stderr

    # The manifest job ran inside a SLURM allocation: its store entry and events say which.
    manifest = [e for e in events(project) if e["stage"] == "manifest" and e["event"] == "commit"]
    assert len(manifest) == 1 and manifest[0].get("slurm_job_id"), manifest
    job_id = manifest[0]["slurm_job_id"]
    entry = json.loads(
        (project / ".campaign" / "store" / manifest[0]["key"] / "entry.json").read_text()
    )
    assert entry["environment"]["slurm_job_id"] == job_id
    # ... and the scheduler knows that job as a finished Snakemake job for rule manifest.
    queue = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%i|%k|%T"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=30,
    )
    assert queue.returncode == 0, queue.stderr
    jid, comment, state = queue.stdout.strip().split("|")
    assert jid == job_id and state == "COMPLETED" and "manifest" in comment
    # Bookkeeping rules stay on the submitting host (localrules).
    local = [e for e in events(project) if e["stage"] == "run_spec" and e["event"] == "commit"]
    assert local and not any(e.get("slurm_job_id") for e in local)

    # Same results as a workstation run.
    workstation = copy_project(tmp_path / "local")
    snakemake(workstation)
    assert result_hashes(project, timed=False) == result_hashes(workstation, timed=False)
