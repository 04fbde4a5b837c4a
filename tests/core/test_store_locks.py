"""Key locks: unlink-safe lock files, try-locks that never wait, CAMPAIGN_FLOCK=off, and commits
that stay correct without flock (one rename wins, the loser discards its copy)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from campaign.core.errors import CampaignError
from campaign.core.runner import run_stage
from campaign.core.store import Store, flock_enabled

SPEC = {"model": {"task": "sequence_classification"}, "train": {"lr": 0.001}, "seed": 1}
KEY = "ab" * 32

# Takes a key's lock, says so, and holds it until its stdin closes.
HOLDER = """
import sys
from campaign.core.store import Store
with Store(sys.argv[1]).lock(sys.argv[2]):
    print("locked", flush=True)
    sys.stdin.read()
"""


def flock_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "CAMPAIGN_FLOCK"}
    return {**env, **extra}


def start_holder(store: Store, key: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store.root), key],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=flock_env(**env),
    )


def hold(store: Store, key: str) -> subprocess.Popen:
    """A process holding the key's lock (returns once it holds it)."""
    proc = start_holder(store, key)
    assert proc.stdout.readline() == "locked\n"
    return proc


def release(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    proc.wait(timeout=30)


def inode(path: Path) -> int:
    return path.stat().st_ino


def wait_blocked_in_flock(pid: int, timeout_s: float = 30) -> None:
    """Until /proc/locks lists `pid` waiting for a flock (a `->` line)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if "->" in fields and "FLOCK" in fields and str(pid) in fields:
                return
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} never waited for the lock")


def test_try_lock_does_not_wait_for_a_held_key(tmp_path):
    store = Store(tmp_path / "state")
    holder = hold(store, KEY)
    try:
        t0 = time.monotonic()
        with store.try_lock(KEY) as held:
            assert not held
        assert time.monotonic() - t0 < 5
        assert store.locked(KEY)
    finally:
        release(holder)
    assert not store.locked(KEY)
    with store.try_lock(KEY) as held:
        assert held


def test_remove_never_unlinks_a_lock_file_another_process_holds(tmp_path):
    store = Store(tmp_path / "state")
    store.work_dir(KEY)
    holder = hold(store, KEY)
    try:
        before = inode(store.lock_path(KEY))
        store.remove(KEY)
        assert not (store.work_root / KEY).exists()
        assert inode(store.lock_path(KEY)) == before  # still the file the holder locked
        with store.try_lock(KEY) as held:
            assert not held
    finally:
        release(holder)
    # Holding the lock itself, remove also unlinks the lock file.
    with store.try_lock(KEY) as held:
        assert held
        store.remove(KEY)
        assert not store.lock_path(KEY).exists()


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs /proc/locks (Linux)")
def test_a_waiter_on_an_unlinked_lock_file_takes_the_new_one(tmp_path):
    # gc holds the lock and unlinks the file while a job waits on it. The job then holds a lock
    # on a file nobody else can see; it must notice and lock the file now at the path, so that
    # a third process (here: the test) finds the key locked.
    store = Store(tmp_path / "state")
    with store.try_lock(KEY) as held:
        assert held
        waiter = start_holder(store, KEY)
        try:
            wait_blocked_in_flock(waiter.pid)
            store.forget_lock(KEY)
            assert not store.lock_path(KEY).exists()
        except BaseException:
            waiter.kill()
            raise
    try:
        assert waiter.stdout.readline() == "locked\n"
        assert store.lock_path(KEY).exists()
        with store.try_lock(KEY) as held:
            assert not held, "two processes hold the same key's lock"
    finally:
        release(waiter)


def test_flock_off_makes_the_lock_a_no_op(tmp_path):
    store = Store(tmp_path / "state")
    holder = hold(store, KEY)
    try:
        enter = (
            "import sys\nfrom campaign.core.store import Store\n"
            "with Store(sys.argv[1]).lock(sys.argv[2]):\n    print('in')\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", enter, str(store.root), KEY],
            env=flock_env(CAMPAIGN_FLOCK="off"),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.stdout == "in\n", out.stderr
    finally:
        release(holder)
    assert flock_enabled({}) and not flock_enabled({"CAMPAIGN_FLOCK": "off"})
    with pytest.raises(CampaignError, match="CAMPAIGN_FLOCK='maybe': expected on or off"):
        flock_enabled({"CAMPAIGN_FLOCK": "maybe"})


class MeetAtCommit(Store):
    """A store whose commit first waits for the other process to be ready to commit too: the
    two renames race every time. With flock on, the second job would wait for the first's lock
    and the barrier would break."""

    def __init__(self, state_dir: str, barrier):
        super().__init__(state_dir)
        self.barrier = barrier

    def commit(self, key, staging, meta):
        self.barrier.wait(timeout=30)
        return super().commit(key, staging, meta)


def _job_without_flock(state_dir: str, out: str, barrier) -> None:
    os.environ["CAMPAIGN_FLOCK"] = "off"
    run_stage("run_spec", SPEC, {}, {"spec": Path(out)}, MeetAtCommit(state_dir, barrier))


@pytest.mark.parametrize("attempt", range(5))
def test_two_jobs_without_flock_commit_one_sound_entry(tmp_path, attempt):
    store = Store(tmp_path / "state")
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(2)
    outs = [tmp_path / f"out{i}.json" for i in range(2)]
    procs = [
        ctx.Process(target=_job_without_flock, args=(str(store.root), str(out), barrier))
        for out in outs
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    events = [e["event"] for e in store.events()]
    assert events.count("miss") == 2 and events.count("commit") == 2  # both computed
    [key] = store.keys()
    entry = store.read_entry(key)
    assert store.problems(entry) == []
    stored = entry.output_path("spec").read_bytes()
    assert json.loads(stored) == SPEC
    assert [out.read_bytes() for out in outs] == [stored, stored]
    assert list(store.tmp.iterdir()) == []  # the loser's staging folder is gone
    assert list(store.work_root.iterdir()) == []
