"""The store and stage runner: keys, hits, corruption, concurrent commits, job records."""

import json
import multiprocessing as mp
import os
from pathlib import Path

import pytest

from campaign.core.errors import CampaignError
from campaign.core.hashcache import HashCache
from campaign.core.hashing import hash_tree
from campaign.core.runner import reproduce, run_stage
from campaign.core.store import Store

SPEC = {"model": {"task": "sequence_classification"}, "train": {"lr": 0.001}, "seed": 1}


def misses(store: Store) -> int:
    return sum(e["event"] == "miss" for e in store.events())


def test_second_run_is_a_hit_with_equal_bytes(tmp_path):
    store = Store(tmp_path / "state")
    out = tmp_path / "results" / "spec.json"
    first = run_stage("run_spec", SPEC, {}, {"spec": out}, store)
    assert not first.hit and json.loads(out.read_text())["seed"] == 1
    original = out.read_bytes()
    out.unlink()
    second = run_stage("run_spec", SPEC, {}, {"spec": out}, store)
    assert second.hit and second.key == first.key
    assert out.read_bytes() == original
    assert misses(store) == 1
    entry = json.loads((store.entry_path(first.key) / "entry.json").read_text())
    assert entry["algorithm"] == "blake3"
    assert entry["stage"] == "run_spec"
    assert entry["wall_seconds"] >= 0 and entry["peak_rss_bytes"] > 0
    assert entry["environment"]["python"]
    assert entry["key_material"]["params"] == SPEC


def test_key_changes_with_params_and_inputs(tmp_path):
    store = Store(tmp_path / "state")
    a = run_stage("run_spec", SPEC, {}, {"spec": tmp_path / "a.json"}, store)
    b = run_stage("run_spec", {**SPEC, "seed": 2}, {}, {"spec": tmp_path / "b.json"}, store)
    assert a.key != b.key
    # Same params, another output path: same content key, served from the store.
    c = run_stage("run_spec", SPEC, {}, {"spec": tmp_path / "elsewhere.json"}, store)
    assert c.hit and c.key == a.key


def test_flipped_byte_is_detected_reported_and_recomputed(tmp_path, capsys):
    store = Store(tmp_path / "state")
    out = tmp_path / "spec.json"
    key = run_stage("run_spec", SPEC, {}, {"spec": out}, store).key
    stored = store.entry_path(key) / "outputs" / "spec"
    good = stored.read_bytes()
    os.chmod(stored, 0o600)
    data = bytearray(good)
    data[5] ^= 0x01
    stat = stored.stat()
    stored.write_bytes(bytes(data))
    os.utime(stored, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # a silent flip: same size, mtime
    capsys.readouterr()
    result = run_stage("run_spec", SPEC, {}, {"spec": out}, store)
    printed = capsys.readouterr().out
    assert f"corrupt entry {key}/outputs/spec" in printed
    assert not result.hit and result.key == key
    assert out.read_bytes() == good
    assert not store.problems(store.read_entry(key))
    corrupt = [e for e in store.events() if e["event"] == "corrupt"]
    assert corrupt and corrupt[0]["key"] == key


def test_missing_entry_json_is_corrupt(tmp_path):
    store = Store(tmp_path / "state")
    key = run_stage("run_spec", SPEC, {}, {"spec": tmp_path / "s.json"}, store).key
    os.chmod(store.entry_path(key), 0o700)
    (store.entry_path(key) / "entry.json").unlink()
    assert store.lookup(key, "run_spec") is None
    assert key not in store.keys()


def _commit_same_key(state_dir: str, barrier, payload: bytes, results) -> None:
    store = Store(state_dir)
    staging = store.new_staging("ab" * 32)
    (staging / "outputs" / "x").write_bytes(payload)
    barrier.wait()
    entry = store.commit("ab" * 32, staging, {"stage": "test"})
    results.put(str(entry.path))


@pytest.mark.parametrize("attempt", range(5))
def test_two_processes_committing_one_key_leave_one_valid_entry(tmp_path, attempt):
    store = Store(tmp_path / "state")
    store.ensure()
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    payload = b"the same result\n" * 1000
    procs = [
        ctx.Process(target=_commit_same_key, args=(str(store.root), barrier, payload, results))
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    paths = {results.get(timeout=5) for _ in procs}
    assert paths == {str(store.entry_path("ab" * 32))}
    assert store.keys() == ["ab" * 32]
    assert store.problems(store.read_entry("ab" * 32)) == []
    assert (store.entry_path("ab" * 32) / "outputs" / "x").read_bytes() == payload
    assert list(store.tmp.iterdir()) == []  # the loser's copy is gone


def _run_spec_job(state_dir: str, out: str) -> None:
    run_stage("run_spec", SPEC, {}, {"spec": Path(out)}, Store(state_dir))


def test_concurrent_jobs_for_one_key_compute_it_once(tmp_path):
    store = Store(tmp_path / "state")
    ctx = mp.get_context("fork")
    procs = [
        ctx.Process(target=_run_spec_job, args=(str(store.root), str(tmp_path / f"o{i}.json")))
        for i in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    events = [e["event"] for e in store.events()]
    assert events.count("miss") == 1 and events.count("hit") == 3
    texts = {(tmp_path / f"o{i}.json").read_text() for i in range(4)}
    assert len(texts) == 1


def test_failed_stage_leaves_no_output_and_records_the_failure(tmp_path, monkeypatch):
    # A stage that fails while running (a bad record), after the runner made its staging folder.
    monkeypatch.chdir(tmp_path)
    Path("bad.jsonl").write_text('{"id": "a", "text": "", "label": "x"}\n')
    spec = {
        "sources": [{"path": "bad.jsonl", "format": "jsonl", "licence": "CC0-1.0", "origin": "t"}],
        "fields": {"id": "id", "text": "text", "label": "label", "group": None, "timestamp": None},
        "previous_manifest": None,
    }
    store = Store(tmp_path / "state")
    outputs = {n: tmp_path / "out" / n for n in ("manifest", "summary", "diff")}
    with pytest.raises(CampaignError, match="bad.jsonl line 1: field 'text' is empty"):
        run_stage("manifest", spec, {"sources": [Path("bad.jsonl")]}, outputs, store)
    assert not any(p.exists() for p in outputs.values())
    assert store.keys() == [] and list(store.tmp.iterdir()) == []  # staging removed
    records = store.job_records()
    assert len(records) == 1 and records[0]["state"] == "failed"
    assert "field 'text' is empty" in records[0]["error"]
    assert [e["event"] for e in store.events()] == ["miss", "fail"]


def test_missing_input_is_recorded_as_a_failed_job(tmp_path):
    store = Store(tmp_path / "state")
    out = tmp_path / "metrics.json"
    inputs = {
        "summary": [tmp_path / "absent.json"],
        "runs": [tmp_path / "runs.tsv"],
        "run_manifests": [],
        "decisions": [tmp_path / "decisions.json"],
    }
    with pytest.raises(CampaignError, match="does not exist"):
        run_stage("metrics", None, inputs, {"metrics": out}, store)
    assert not out.exists()
    assert [r["state"] for r in store.job_records()] == ["failed"]
    assert [e["event"] for e in store.events()] == ["fail"]


def test_reproduce_recomputes_and_compares(tmp_path):
    store = Store(tmp_path / "state")
    key = run_stage("run_spec", SPEC, {}, {"spec": tmp_path / "s.json"}, store).key
    rows = reproduce(store, key[:10], tmp_path / "scratch")
    assert rows == [
        {
            "output": "spec",
            "stored": rows[0]["stored"],
            "recomputed": rows[0]["stored"],
            "equal": True,
        }
    ]
    with pytest.raises(CampaignError, match="no such store entry"):
        reproduce(store, "f" * 64, tmp_path / "scratch2")


def test_hash_cache_serves_unchanged_files_and_sees_a_silent_change(tmp_path):
    import sqlite3

    f = tmp_path / "data.bin"
    f.write_bytes(b"a" * (2 << 20))  # above MIN_CACHED_BYTES
    cache = HashCache(tmp_path / "cache.sqlite")
    first = cache.hash(f)
    cache.close()
    rows = sqlite3.connect(tmp_path / "cache.sqlite").execute("SELECT digest FROM files").fetchall()
    assert rows == [(first,)] and first == hash_tree(f)
    cache = HashCache(tmp_path / "cache.sqlite")
    assert cache.hash(f) == first
    st = f.stat()
    with open(f, "r+b") as handle:
        handle.write(b"b")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime; ctime moves
    assert cache.hash(f) == hash_tree(f) != first
    cache.close()


def test_outputs_are_owner_only_and_read_only_in_the_store(tmp_path):
    os.umask(0o077)
    store = Store(tmp_path / "state")
    key = run_stage("run_spec", SPEC, {}, {"spec": tmp_path / "s.json"}, store).key
    stored = store.entry_path(key) / "outputs" / "spec"
    assert stored.stat().st_mode & 0o777 == 0o400
    assert store.root.stat().st_mode & 0o077 == 0


def test_two_checkouts_sharing_a_store_keep_their_own_mtimes(tmp_path):
    """A materialized output is a file of its own: touching it (Snakemake touches every output
    after its job) or materializing the same entry in another checkout moves neither the store's
    file nor the other checkout's copy, so no downstream job of that checkout looks stale."""
    store = Store(tmp_path / "state")
    a = tmp_path / "a" / "spec.json"
    b = tmp_path / "b" / "spec.json"
    key = run_stage("run_spec", SPEC, {}, {"spec": a}, store).key
    stored = store.entry_path(key) / "outputs" / "spec"
    os.utime(a, (1_000_000_000, 1_000_000_000))  # checkout a's output, older than anything
    assert run_stage("run_spec", SPEC, {}, {"spec": b}, store).hit
    os.utime(b, None)  # Snakemake's touch after the job in checkout b
    assert a.stat().st_mtime == 1_000_000_000
    assert a.stat().st_ino != b.stat().st_ino != stored.stat().st_ino
    assert stored.stat().st_nlink == 1
    assert a.read_bytes() == b.read_bytes() == stored.read_bytes()
