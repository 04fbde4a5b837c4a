"""Tests for `campaign gc --retention` (campaign.tools.retention): a completed run's checkpoints
(its work folder) expire `checkpoints_days` after its job record says it completed, whatever the
folder's age; an unreferenced entry stays inside its window and is listed with its due day;
work folders of unfinished jobs are kept; raw-data copies (data-phase entries) go once
unreferenced whatever the window; the dry run lists what would go with its bytes and changes
nothing; plain gc ignores the windows."""

from __future__ import annotations

import os
import time

from test_maintenance import key_of, make_entry

from campaign.core.store import Store
from campaign.tools.gc import collect_garbage
from campaign.tools.retention import job_times

RETENTION = {"checkpoints_days": 7, "unreferenced_days": 30, "raw_data": "referenced"}
DAY = 86400


def age(path, days: float) -> None:
    t = time.time() - days * DAY
    os.utime(path, (t, t))


def job(store: Store, name: str, key: str, state: str, days_ago: float, hit=False) -> None:
    """A job record as the runner writes it: `state` since `days_ago` days."""
    ended = time.time() - days_ago * DAY
    record = {"key": key, "state": state, "started": ended - 60, "outputs": [f"out/{name}"]}
    if state != "running":
        record |= {"ended": ended, "hit": hit}
    store.write_job(f"job-{name}", record)


def checkpoints(store: Store, key: str, size: int = 5000) -> None:
    (store.work_root / key).mkdir(parents=True)
    (store.work_root / key / "ckpt-20").write_bytes(os.urandom(size))


def setup(tmp_path):
    store = Store(tmp_path / "state")
    young = make_entry(store, "young", stage="train")  # unreferenced, 2 days old
    old = make_entry(store, "old", stage="train")  # unreferenced, 40 days old
    raw = make_entry(store, "raw", stage="split")  # copies of the raw text, 2 days old
    # Referenced runs with checkpoints. Their folders' ages say the opposite of their records:
    # gc must go by when the job record says the run completed.
    done = make_entry(store, "done", stage="train")  # completed 3 days ago, folder 40 days old
    stale = make_entry(store, "stale", stage="train")  # completed 10 days ago, folder new
    hit = make_entry(store, "hit", stage="train")  # completed 10 days ago, a store hit 1 day ago
    unknown = make_entry(store, "unknown", stage="train")  # no job record
    for key in (done, stale, hit, unknown):
        checkpoints(store, key)
    job(store, "done", done, "done", 3)
    job(store, "stale", stale, "done", 10)
    job(store, "hit", hit, "done", 10)
    job(
        store, "hit", hit, "done", 1, hit=True
    )  # the same job, rerun by mtime: its record rewritten
    for key, days in ((young, 2), (old, 40), (raw, 2), (done, 40), (stale, 0)):
        age(store.entry_path(key), days)
        if (store.work_root / key).exists():
            age(store.work_root / key, days)
    # Each entry was committed when its run completed (the record of `unknown` is gone).
    for key, days in ((done, 3), (stale, 10), (hit, 10), (unknown, 2)):
        age(store.entry_path(key) / "entry.json", days)
    # Unfinished jobs of keys the plan no longer references, never committed.
    resumable, abandoned = key_of("resumable"), key_of("abandoned")
    killed = key_of("killed")  # SIGKILL'd 2 days ago: its record still says running
    for key in (resumable, abandoned, killed):
        checkpoints(store, key)
    job(store, "resumable", resumable, "interrupted", 2)
    job(store, "abandoned", abandoned, "failed", 45)
    job(store, "killed", killed, "running", 2)
    keys = {"young": young, "old": old, "raw": raw, "done": done, "stale": stale, "hit": hit}
    keys |= {"unknown": unknown, "resumable": resumable, "abandoned": abandoned, "killed": killed}
    return store, keys


def referenced(k: dict) -> set[str]:
    return {k["done"], k["stale"], k["hit"], k["unknown"]}


def test_job_times_by_hand() -> None:
    t = job_times(
        [
            {"key": "a", "state": "done", "ended": 100.0},
            {"key": "a", "state": "done", "ended": 500.0, "hit": True},  # a hit: not a completion
            {"key": "b", "state": "failed", "ended": 50.0},
            {"key": "b", "state": "interrupted", "ended": 70.0},
            {"key": "c", "state": "running", "started": 10.0},
            {"state": "done", "ended": 1.0},  # no key: ignored
        ]
    )
    assert t.completed == {"a": 100.0}
    assert t.latest == {"a": ("done", 500.0), "b": ("interrupted", 70.0), "c": ("running", 10.0)}


def test_checkpoints_expire_after_the_run_completed_not_by_folder_age(tmp_path, capsys) -> None:
    store, k = setup(tmp_path)
    collect_garbage(store, referenced(k), dry_run=False, retention=RETENTION)
    assert store.keys() == sorted([k["young"], k["done"], k["stale"], k["hit"], k["unknown"]])
    # completed 3 days ago: kept; 10 days ago: gone (a later store hit, which rewrites the same
    # job record, does not extend it); no job record but committed 2 days ago: kept; an
    # interrupted job and a killed one (record left "running") 2 days ago: kept to resume
    assert store.work_keys() == sorted([k["done"], k["unknown"], k["resumable"], k["killed"]])
    out = capsys.readouterr().out
    assert "unreferenced; kept until" in out
    assert "checkpoints kept until" in out
    assert "unfinished job (interrupted)" in out and "unfinished job (running)" in out
    assert "kept 5 key(s) inside their retention window" in out


def test_dry_run_lists_what_would_go_with_bytes_and_changes_nothing(tmp_path, capsys) -> None:
    store, k = setup(tmp_path)
    keys, work = store.keys(), store.work_keys()
    collect_garbage(store, referenced(k), dry_run=True, retention=RETENTION)
    assert store.keys() == keys and store.work_keys() == work
    out = capsys.readouterr().out
    gone = [line for line in out.splitlines() if line.startswith("would remove  work folder")]
    assert sorted(line.split()[4] for line in gone) == sorted(
        [k["stale"], k["hit"], k["abandoned"]]
    )
    assert all("KiB" in line or " B " in line for line in gone), gone
    # the summary says how many work folders and how many bytes would go
    assert "3 work folders (" in out and "would remove 2 entries" in out
    collect_garbage(store, referenced(k), dry_run=False)  # plain gc: no windows
    assert store.keys() == sorted(referenced(k)) and store.work_keys() == []


def test_null_windows_keep_and_raw_data_keep_follows_the_window(tmp_path) -> None:
    store, k = setup(tmp_path)
    windows = {"checkpoints_days": None, "unreferenced_days": 30, "raw_data": "keep"}
    collect_garbage(store, referenced(k), dry_run=False, retention=windows)
    assert store.keys() == sorted([k["young"], k["raw"], *referenced(k)])
    assert store.work_keys() == sorted([*referenced(k), k["resumable"], k["killed"]])
    assert key_of("old") not in store.keys()
