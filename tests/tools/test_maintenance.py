"""gc and `verify --remove` against a store in use: keys a running job holds are skipped and
reported (never waited on), leftovers of killed jobs are collected, the dry run describes each
entry (stage, run, factor levels, size) and changes nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from campaign.core.hashing import hash_value
from campaign.core.params import load_params
from campaign.core.store import Store
from campaign.plan import plan_index, run_id
from campaign.tools.gc import collect_garbage
from campaign.tools.verify import verify_store
from conftest import FIXTURES

# Takes a key's lock, says so, and holds it until its stdin closes.
HOLDER = """
import sys
from campaign.core.store import Store
with Store(sys.argv[1]).lock(sys.argv[2]):
    print("locked", flush=True)
    sys.stdin.read()
"""


def hold(store: Store, key: str) -> subprocess.Popen:
    """A process holding the key's lock, as a running job does (returns once it holds it)."""
    env = {k: v for k, v in os.environ.items() if k != "CAMPAIGN_FLOCK"}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store.root), key],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout.readline() == "locked\n"
    return proc


def release(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    proc.wait(timeout=30)


def key_of(name: str) -> str:
    return hash_value(["test", name])


def make_entry(store: Store, name: str, stage: str = "manifest", spec=None, size=3000) -> str:
    key = key_of(name)
    staging = store.new_staging(key)
    (staging / "outputs" / "out").write_bytes(os.urandom(size))
    store.commit(key, staging, {"stage": stage, **({"spec": spec} if spec else {})})
    return key


def tiny_runs() -> dict:
    return plan_index(load_params(FIXTURES / "tiny_params.yaml"))


def test_gc_skips_a_key_a_running_job_holds_and_drops_the_rest(tmp_path, capsys):
    store = Store(tmp_path / "state")
    kept, free, busy = (make_entry(store, n) for n in ("kept", "free", "busy"))
    with store.try_lock(free):
        pass  # leaves a lock file behind, as every job does
    holder = hold(store, busy)
    try:
        lock_file = store.lock_path(busy).stat().st_ino
        t0 = time.monotonic()
        assert collect_garbage(store, {kept}, dry_run=False) == 0
        assert time.monotonic() - t0 < 20, "gc waited for the lock"
        assert store.keys() == sorted([kept, busy])
        assert store.lock_path(busy).stat().st_ino == lock_file  # the holder's file, untouched
        assert not store.lock_path(free).exists()  # unlinked while gc held it
    finally:
        release(holder)
    out = capsys.readouterr().out
    assert any(
        line.startswith("skipped") and busy in line and "locked by a running job" in line
        for line in out.splitlines()
    ), out
    assert "removed 1 entries" in out and "skipped 1 key(s) in use" in out
    # Once the job is done, the next gc takes it.
    collect_garbage(store, {kept}, dry_run=False)
    assert store.keys() == [kept]


def test_gc_collects_killed_commits_but_not_one_under_way(tmp_path, capsys):
    store = Store(tmp_path / "state")
    dead, live = key_of("dead"), key_of("live")
    killed = store.new_staging(dead)  # its job was killed: nobody holds the key
    (killed / "outputs" / "model").write_bytes(b"half a model")
    assert dead in killed.name  # the full key: gc can try its lock
    holder = hold(store, live)
    try:
        running = store.new_staging(live)
        retired = store.tmp / f"retired-{dead}-0000"  # a work folder whose delete was cut short
        retired.mkdir()
        collect_garbage(store, set(), dry_run=False)
        assert not killed.exists() and not retired.exists()
        assert running.exists()
    finally:
        release(holder)
    out = capsys.readouterr().out
    assert f"removed       unfinished commit  {killed.name}" in out
    assert f"skipped       unfinished commit  {running.name}" in out


def test_gc_collects_orphaned_work_folders_and_those_of_committed_keys(tmp_path, capsys):
    store = Store(tmp_path / "state")
    orphan, resume, busy = key_of("orphan"), key_of("resume"), key_of("busy")
    (store.work_dir(orphan) / "ckpt-5").write_bytes(b"x")  # its run left the plan
    (store.work_dir(resume) / "ckpt-5").write_bytes(b"x")  # planned, killed: resumes from here
    (store.work_dir(busy) / "ckpt-5").write_bytes(b"x")  # not planned, but a job runs it
    # Killed between commit and cleaning up its work folder: the entry is the result now.
    done = make_entry(store, "done")
    (store.work_root / done).mkdir()
    (store.work_root / done / "ckpt-20").write_bytes(b"x")
    holder = hold(store, busy)
    try:
        collect_garbage(store, {resume, done}, dry_run=False)
    finally:
        release(holder)
    assert store.work_keys() == sorted([resume, busy])
    assert store.keys() == [done] and not store.problems(store.read_entry(done))
    out = capsys.readouterr().out
    assert f"work folder  {done}" in out and "its entry is committed" in out
    assert f"work folder  {orphan}" in out and "not referenced by the plan" in out


def test_gc_dry_run_lists_stage_run_levels_and_size_and_changes_nothing(tmp_path, capsys):
    store = Store(tmp_path / "state")
    runs = tiny_runs()
    planned = next(r for r in runs.values() if dict(r.cell)["train.lr"] == 0.003)
    dropped = {**planned.spec, "train": {**planned.spec["train"], "lr": 0.005}}
    keys = {
        "planned": make_entry(store, "planned", "run_spec", planned.spec, size=100),
        "dropped": make_entry(store, "dropped", "train", dropped, size=5 << 20),
        "manifest": make_entry(store, "manifest", "manifest", size=2048),
    }
    before = sorted(p.relative_to(store.root) for p in store.root.rglob("*"))
    collect_garbage(store, set(), dry_run=True, runs=runs)
    assert sorted(p.relative_to(store.root) for p in store.root.rglob("*")) == before
    out = capsys.readouterr().out
    lines = {name: next(ln for ln in out.splitlines() if key in ln) for name, key in keys.items()}
    assert lines["planned"].split()[:5] == [
        "would",
        "remove",
        "run_spec",
        planned.run_id,
        "train.lr=0.003",
    ]
    assert lines["dropped"].split()[:5] == [
        "would",
        "remove",
        "train",
        run_id(dropped),
        "train.lr=0.005",
    ]
    assert re.search(r"\s5\.0 MiB\s", lines["dropped"]), lines["dropped"]
    assert lines["manifest"].split()[:5] == ["would", "remove", "manifest", "-", "-"]
    assert re.search(r"\s2\.\d KiB\s", lines["manifest"]), lines["manifest"]
    assert "would remove 3 entries (5.0 MiB)" in out


def test_verify_remove_skips_a_key_a_running_job_holds(tmp_path, capsys):
    store = Store(tmp_path / "state")
    key = make_entry(store, "corrupt")
    stored = store.read_entry(key).output_path("out")
    os.chmod(stored, 0o600)
    stored.write_bytes(b"flipped")
    holder = hold(store, key)
    try:
        t0 = time.monotonic()
        assert verify_store(store, remove=True) == [key]
        assert time.monotonic() - t0 < 20, "verify waited for the lock"
        assert store.keys() == [key]  # the job may be reading it: left in place
        assert store.quarantined() == []
    finally:
        release(holder)
    out = capsys.readouterr().out
    assert f"skipped  manifest     {key}  locked by a running job" in out
    assert "1 corrupt (0 moved out of the store, 1 skipped: locked by a running job)" in out
    assert verify_store(store, remove=True) == [key]
    assert store.keys() == [] and len(store.quarantined()) == 1
    assert "1 corrupt (1 moved out of the store)" in capsys.readouterr().out


@pytest.mark.slow
def test_gc_force_and_dry_run_through_the_command(tiny_project):
    from conftest import campaign

    store = Store(tiny_project / ".campaign")
    runs = tiny_runs()
    planned = next(iter(runs.values()))
    old = {**planned.spec, "train": {**planned.spec["train"], "lr": 0.02}}
    planned_key = make_entry(store, "planned", "run_spec", planned.spec)
    old_key = make_entry(store, "old", "run_spec", old)

    # Nothing has run: no planned output has a file or a job record.
    refused = campaign(tiny_project, "gc", check=False)
    assert refused.returncode == 2 and "pass --force" in refused.stderr
    dry = campaign(tiny_project, "gc", "--dry-run", "--force")
    assert re.search(rf"would remove\s+run_spec\s+{planned.run_id}\s+train.lr=0.001\s", dry.stdout)
    assert re.search(rf"would remove\s+run_spec\s+{run_id(old)}\s+train.lr=0.02\s", dry.stdout)
    assert "would remove 2 entries" in dry.stdout
    assert store.keys() == sorted([planned_key, old_key])
    campaign(tiny_project, "gc", "--force")
    assert store.keys() == []
