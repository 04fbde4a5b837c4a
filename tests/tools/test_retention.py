"""Tests for `campaign gc --retention` (campaign.tools.retention): inside its window an
unreferenced entry and a completed run's checkpoints are kept and listed with their due day;
past it they go; raw-data copies (data-phase entries) go once unreferenced whatever the
window; the dry run changes nothing; plain gc ignores the windows."""

from __future__ import annotations

import os
import time

from test_maintenance import key_of, make_entry

from campaign.core.store import Store
from campaign.tools.status import collect_garbage

RETENTION = {"checkpoints_days": 7, "unreferenced_days": 30, "raw_data": "referenced"}
DAY = 86400


def age(path, days: float) -> None:
    t = time.time() - days * DAY
    os.utime(path, (t, t))


def setup(tmp_path):
    store = Store(tmp_path / "state")
    young = make_entry(store, "young", stage="train")  # unreferenced, 2 days old
    old = make_entry(store, "old", stage="train")  # unreferenced, 40 days old
    raw = make_entry(store, "raw", stage="split")  # copies of the raw text, 2 days old
    done = make_entry(store, "done", stage="train")  # referenced, completed 3 days ago
    (store.work_root / done).mkdir(parents=True)
    (store.work_root / done / "ckpt-20").write_bytes(b"x")
    stale = make_entry(store, "stale", stage="train")  # referenced, completed 10 days ago
    (store.work_root / stale).mkdir(parents=True)
    (store.work_root / stale / "ckpt-20").write_bytes(b"x")
    for key, days in ((young, 2), (old, 40), (raw, 2), (done, 3), (stale, 10)):
        age(store.entry_path(key), days)
    return store, {"young": young, "old": old, "raw": raw, "done": done, "stale": stale}


def test_retention_keeps_what_is_inside_its_window(tmp_path, capsys) -> None:
    store, k = setup(tmp_path)
    collect_garbage(store, {k["done"], k["stale"]}, dry_run=False, retention=RETENTION)
    assert store.keys() == sorted([k["young"], k["done"], k["stale"]])
    assert store.work_keys() == [k["done"]]  # checkpoints 3 days after: kept; 10 days: gone
    out = capsys.readouterr().out
    assert "unreferenced; kept until" in out and "checkpoints kept until" in out
    assert "kept 2 key(s) inside their retention window" in out


def test_dry_run_changes_nothing_and_plain_gc_ignores_retention(tmp_path, capsys) -> None:
    store, k = setup(tmp_path)
    keys, work = store.keys(), store.work_keys()
    collect_garbage(store, {k["done"], k["stale"]}, dry_run=True, retention=RETENTION)
    assert store.keys() == keys and store.work_keys() == work
    out = capsys.readouterr().out
    assert "kept          " in out or "kept" in out
    collect_garbage(store, {k["done"], k["stale"]}, dry_run=False)
    assert store.keys() == sorted([k["done"], k["stale"]]) and store.work_keys() == []


def test_null_windows_keep_and_raw_data_keep_follows_the_window(tmp_path) -> None:
    store, k = setup(tmp_path)
    windows = {"checkpoints_days": None, "unreferenced_days": 30, "raw_data": "keep"}
    collect_garbage(store, {k["done"], k["stale"]}, dry_run=False, retention=windows)
    assert store.keys() == sorted([k["young"], k["raw"], k["done"], k["stale"]])
    assert store.work_keys() == sorted([k["done"], k["stale"]])
    assert key_of("old") not in store.keys()
