"""What a killed job or a full disk leaves: the copies of an output that a job killed while it
materialized them left beside it (`.<name>.<id>.tmp`) are removed by the next run of that job and
by gc; a full disk ends a stage command with one line, not "unexpected failure; see log"."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
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


def test_gc_keeps_the_copy_of_a_job_that_starts_while_gc_lists(tmp_path, monkeypatch, capsys):
    """gc lists the records (asking SLURM about each), then removes: a job of the same output
    that starts in between has its record (one per output set) turned running, and its copy
    in progress must stay. The race is made deterministic: the record turns running right after
    gc listed the copies."""
    import campaign.tools.gc as gc

    monkeypatch.chdir(tmp_path)
    store = Store(tmp_path / "state")
    output = Path("results/a/model")
    copies, _ = plant_copies(output)
    for copy in copies:  # made two minutes ago, by a job that failed a minute ago
        os.utime(copy, (time.time() - 120, time.time() - 120))
    base = {"project": str(tmp_path), "host": socket.gethostname(), "key": "k1"}
    failed = {**base, "state": "failed", "outputs": [str(output)], "ended": 1.0}
    store.write_job("job", {**failed, "ended": time.time() - 60})
    listed = gc.unfinished_copies

    def then_the_job_starts(dest):
        found = listed(dest)
        store.write_job("job", {**failed, "state": "running", "pid": os.getpid()})
        return found

    monkeypatch.setattr(gc, "unfinished_copies", then_the_job_starts)
    assert collect_garbage(store, set(), dry_run=False) == 0
    assert all(p.exists() for p in copies)
    assert "unfinished copy" not in capsys.readouterr().out
    # Its job ended before these copies were made: they are a later job's, not its leftovers.
    monkeypatch.setattr(gc, "unfinished_copies", listed)
    store.write_job("job", failed)
    collect_garbage(store, set(), dry_run=False)
    assert all(p.exists() for p in copies)
    # Another host's job without SLURM cannot be asked: it counts as running.
    store.write_job("job", {**failed, "state": "running", "host": "elsewhere", "pid": 1})
    collect_garbage(store, set(), dry_run=False)
    assert all(p.exists() for p in copies)
    # Copies older than the end of a job that ended: removed.
    store.write_job("job", {**failed, "ended": time.time() - 60})
    collect_garbage(store, set(), dry_run=False)
    assert not any(p.exists() for p in copies)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("full", ["events", "events+log", "log"])
def test_a_full_disk_ends_a_stage_command_with_one_line(tmp_path, full):
    """/dev/full answers every write with ENOSPC, as a full disk does. The store's event log
    there stops the job at its first write; the job's own log there (`--log`) stops it at its
    first print, and the error line itself must not go into that log first."""
    state = tmp_path / "state"
    state.mkdir()
    if "events" in full:
        (state / "events.jsonl").symlink_to("/dev/full")
    cmd = [sys.executable, "-m", "campaign", "run-spec", "--spec", json.dumps(SPEC)]
    cmd += ["--state-dir", str(state), "--out", f"spec={tmp_path / 'out' / 'spec.json'}"]
    log = "/dev/full" if "log" in full else str(tmp_path / "job.log")
    cmd += ["--log", log]
    e = {**env(), "PYTHONPATH": str(REPO / "workflow")}
    proc = subprocess.run(cmd, cwd=tmp_path, env=e, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    places = f"{state}, {tmp_path / 'out'}, {log}"
    assert lines == [
        f"error: the disk is full (on the disk of one of: {places}): free space and run again; "
        "what was committed to the store is kept, and a training job resumes from its last "
        "checkpoint"
    ], proc.stderr
    assert "Traceback" not in proc.stderr and "unexpected failure" not in proc.stderr
    assert not (tmp_path / "out" / "spec.json").exists()
    if full == "events":
        assert Path(log).read_text().strip().splitlines()[-1] == lines[0]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_spec_with_nan_or_infinity_is_refused_in_one_line(tmp_path, capsys, constant):
    """Python's json reads NaN and Infinity (JSON has neither): a hand-written --spec is refused
    as params are, before the stage runs or writes anything."""
    from campaign.cli import main

    spec = json.dumps(SPEC).replace("0.001", constant)
    out = tmp_path / "out" / "spec.json"
    argv = ["run-spec", "--spec", spec, "--state-dir", str(tmp_path / "state")]
    assert main([*argv, "--out", f"spec={out}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: --spec: expected a finite number; got {constant}"
    assert not out.exists() and not (tmp_path / "state").exists()
