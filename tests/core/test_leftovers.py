"""What a killed job or a full disk leaves: the copies of an output that a job killed while it
materialized them left beside it (`.<name>.<id>.tmp`) are removed by the next run of that job and
by gc; a full disk ends a stage command with one line, not "unexpected failure; see log"."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from campaign.core.runner import run_stage
from campaign.core.store import Store, unfinished_copies
from campaign.tools.gc import collect_garbage
from conftest import REPO, env

SPEC = {"model": {"task": "sequence_classification"}, "train": {"lr": 0.001}, "seed": 1}


def plant_copies(dest: Path) -> tuple[list[Path], Path]:
    """Two copies of `dest` cut short by a kill (a file and a folder), and a user's file whose
    name only looks like one: (the store's, the user's)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    half_file = dest.with_name(f".{dest.name}.0123abcd.tmp")
    half_file.write_bytes(b"x" * 4096)
    half_dir = dest.with_name(f".{dest.name}.deadbeef.tmp")
    (half_dir / "inner").mkdir(parents=True)
    (half_dir / "inner" / "weights").write_bytes(b"y" * 4096)
    mine = dest.with_name(f".{dest.name}.my-notes.tmp")
    mine.write_text("keep me")
    return [half_file, half_dir], mine


def test_the_next_run_removes_the_copies_a_killed_materialization_left(tmp_path):
    store = Store(tmp_path / "state")
    out = tmp_path / "results" / "spec.json"
    run_stage("run_spec", SPEC, {}, {"spec": out}, store)
    ours, mine = plant_copies(out)
    assert unfinished_copies(out) == sorted(ours)
    assert run_stage("run_spec", SPEC, {}, {"spec": out}, store).hit
    assert not any(p.exists() for p in ours)
    assert mine.read_text() == "keep me" and json.loads(out.read_text())["seed"] == 1


def test_gc_removes_copies_left_beside_recorded_outputs_but_not_a_running_jobs(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    store = Store(tmp_path / "state")
    killed, running = Path("results/a/model"), Path("results/b/model")
    dead, mine = plant_copies(killed)
    live, _ = plant_copies(running)
    base = {"project": str(tmp_path), "host": socket.gethostname(), "state": "running"}
    store.write_job("killed", {**base, "key": "k1", "outputs": [str(killed)], "pid": 2**22 + 7})
    store.write_job("live", {**base, "key": "k2", "outputs": [str(running)], "pid": os.getpid()})
    collect_garbage(store, set(), dry_run=True)
    assert all(p.exists() for p in dead)  # the dry run only lists
    collect_garbage(store, set(), dry_run=False)
    assert not any(p.exists() for p in dead) and mine.exists()
    assert all(p.exists() for p in live)  # its job may be copying right now
    out = capsys.readouterr().out
    assert f"would remove  unfinished copy  {dead[0]}  4.0 KiB" in out
    assert f"removed       unfinished copy  {dead[1]}  4.0 KiB" in out


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("with_log", [True, False])
def test_a_full_disk_ends_a_stage_command_with_one_line(tmp_path, with_log):
    """The store's event log on /dev/full, which answers every write with ENOSPC, as a full
    disk does: the job stops at its first write there."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "events.jsonl").symlink_to("/dev/full")
    cmd = [sys.executable, "-m", "campaign", "run-spec", "--spec", json.dumps(SPEC)]
    cmd += ["--state-dir", str(state), "--out", f"spec={tmp_path / 'out' / 'spec.json'}"]
    log = tmp_path / "job.log"
    cmd += ["--log", str(log)] if with_log else []
    e = {**env(), "PYTHONPATH": str(REPO / "workflow")}
    proc = subprocess.run(cmd, cwd=tmp_path, env=e, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "error: the disk is full: free space and run again; what was committed to the store is "
        "kept, and a training job resumes from its last checkpoint"
    ], proc.stderr
    assert "Traceback" not in proc.stderr and "unexpected failure" not in proc.stderr
    assert not (tmp_path / "out" / "spec.json").exists()
    if with_log:
        assert log.read_text().strip().splitlines()[-1] == lines[0]
