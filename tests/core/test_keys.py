"""What goes into a content key, and that a stage reads exactly what its key hashed: inputs the
params name are derived and checked, a missing input is an error, an input rewritten while the
stage runs is refused; licence text, privacy, operational train keys and paths are out of the
keys they do not affect; device and threads are in; a SIGTERM or Ctrl-C is an interruption."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from campaign.core import runner
from campaign.core.errors import CampaignError, Interrupted
from campaign.core.keys import content_key, execution_settings, resolve_inputs
from campaign.core.params import load_params
from campaign.core.registry import get_stage
from campaign.core.runner import run_stage
from campaign.core.store import Store
from campaign.data.sources import assign_files
from campaign.plan import plan_index
from conftest import REPO, env

TINY = REPO / "tests" / "fixtures" / "tiny_params.yaml"
DEMO = REPO / "data" / "raw" / "demo.jsonl"


def params() -> dict:
    return load_params(TINY)


def key_of(stage: str, p: dict, inputs=None, execution=None, **wildcards) -> str:
    """The content key a stage gets from params `p`, with fixed input hashes."""
    s = get_stage(stage)
    hashes = inputs or {name: [{"path": "x", "hash": f"h-{name}"}] for name in s.inputs}
    return content_key(s, s.spec(p, **wildcards), hashes, execution)[0]


# ------------------------------------------------------------------ what is in a key
def test_licence_and_origin_change_the_manifest_key_but_not_the_split_key():
    a, b = params(), params()
    b["data"]["sources"][0]["licence"] = "MIT"
    b["data"]["sources"][0]["origin"] = "somewhere else"
    assert key_of("manifest", a) != key_of("manifest", b)  # the manifest records the licence
    assert key_of("split", a) == key_of("split", b)
    # ... and so does a source path (the file counts by its content, an input).
    b["data"]["sources"][0]["path"] = "elsewhere/demo.jsonl"
    assert key_of("split", a) == key_of("split", b)


def test_privacy_changes_the_split_key_but_not_the_manifest_key():
    a, b = params(), params()
    b["data"]["privacy"] = "redact"
    assert key_of("manifest", a) == key_of("manifest", b)
    assert key_of("split", a) != key_of("split", b)


def test_operational_settings_stay_out_of_preflight_and_training_keys():
    a, b = params(), params()
    b["train"]["checkpoint_every"] = 3
    b["train"]["keep_checkpoints"] = 9
    b["preflight"]["max_hours"] = 1.5  # held by the plan table, not the preflight
    b["ablation"]["factors"]["train"]["lr"] = [1.0e-3, 2.0e-3, 3.0e-3]  # a bigger plan
    assert key_of("preflight", a) == key_of("preflight", b)
    run = next(iter(plan_index(a)))
    assert key_of("train", a, run=run) == key_of("train", b, run=run)
    b["train"]["max_steps"] = 21  # a result-changing key: both change
    assert key_of("preflight", a) != key_of("preflight", b)


def test_a_pretrained_model_counts_by_content_not_by_where_it_lies():
    from campaign.plan import identity

    a, b = params(), params()
    for p, where in ((a, "models/minilm"), (b, "/elsewhere/minilm")):
        p["model"]["source"] = where
        p["model"]["tokenizer"] = {"source": "model"}
    spec_a = {"model": a["model"], "train": a["train"], "seed": 1}
    spec_b = {"model": b["model"], "train": b["train"], "seed": 1}
    assert identity(spec_a) == identity(spec_b)
    stage = get_stage("train")
    same = {"base_model": [{"path": "p", "hash": "content"}], "train": [{"path": "t", "hash": "t"}]}
    other = {**same, "base_model": [{"path": "p", "hash": "other content"}]}
    assert content_key(stage, spec_a, same)[0] == content_key(stage, spec_b, same)[0]
    assert content_key(stage, spec_a, same)[0] != content_key(stage, spec_a, other)[0]


def test_a_pretrained_run_is_not_named_by_the_config_it_does_not_read():
    from campaign.plan import run_id

    p = params()
    p["model"]["source"] = "models/minilm"
    bare = {"task": p["model"]["task"], "source": "models/minilm", "tokenizer": {"source": "model"}}
    # What the schema used to demand of every source, and a tokenizer recipe nothing trains.
    full = {**bare, "config": p["model"]["config"], "tokenizer": {**p["model"]["tokenizer"]}}
    full["tokenizer"]["source"] = "model"
    ids = {run_id({"model": m, "train": p["train"], "seed": 1}) for m in (bare, full)}
    assert len(ids) == 1
    from_config = {"model": params()["model"], "train": p["train"], "seed": 1}
    assert run_id(from_config) not in ids


def test_device_and_threads_are_in_the_key_of_a_computing_stage():
    stage = get_stage("train")
    one, two = execution_settings(stage, 1), execution_settings(stage, 2)
    assert one["device"] == "cpu" and one["threads"] == 1 and one["deterministic"] is True
    p = params()
    run = next(iter(plan_index(p)))
    assert key_of("train", p, execution=one, run=run) != key_of("train", p, execution=two, run=run)
    cuda = {**one, "device": "cuda", "cuda": "12.8", "cudnn": 91000}
    assert key_of("train", p, execution=one, run=run) != key_of("train", p, execution=cuda, run=run)
    # Data stages do not compute with torch: no execution settings.
    assert execution_settings(get_stage("split"), 4) is None


# ------------------------------------------------------------------ what a stage reads
def data_spec(tmp_path: Path, pattern: str = "data/*.jsonl") -> dict:
    spec = copy.deepcopy(params()["data"])
    spec["sources"][0]["path"] = pattern
    return spec


def write_records(path: Path, n: int, start: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()[start : start + n]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def manifest_outputs(tmp_path: Path, name: str) -> dict[str, Path]:
    return {n: tmp_path / name / n for n in ("manifest", "summary", "diff")}


def test_a_stage_run_by_hand_hashes_the_files_its_params_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_records(tmp_path / "data" / "a.jsonl", 20)
    store = Store(tmp_path / "state")
    spec = data_spec(tmp_path)
    first = run_stage("manifest", spec, {}, manifest_outputs(tmp_path, "one"), store)
    # Same params, new data under the same glob: another key, and the new record is read.
    write_records(tmp_path / "data" / "b.jsonl", 5, start=100)
    second = run_stage("manifest", spec, {}, manifest_outputs(tmp_path, "two"), store)
    assert not second.hit and second.key != first.key
    assert len(pd.read_parquet(tmp_path / "two" / "manifest")) == 25


def test_in_paths_must_be_the_files_the_params_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_records(tmp_path / "data" / "a.jsonl", 20)
    write_records(tmp_path / "data" / "b.jsonl", 5, start=100)
    write_records(tmp_path / "other.jsonl", 5, start=200)
    spec = data_spec(tmp_path)
    stage = get_stage("manifest")
    given = {"sources": [Path("data/a.jsonl")]}  # one of the two files the glob names
    with pytest.raises(CampaignError, match="input 'sources': the params name data/a.jsonl, "):
        resolve_inputs(stage, spec, given, Path("."))
    with pytest.raises(CampaignError, match="but --in gave other.jsonl"):
        resolve_inputs(stage, spec, {"sources": [Path("other.jsonl")]}, Path("."))
    resolved = resolve_inputs(stage, spec, {}, Path("."))
    assert resolved == {"sources": [Path("data/a.jsonl"), Path("data/b.jsonl")], "previous": []}
    spec["previous_manifest"] = "old/manifest.parquet"
    with pytest.raises(CampaignError, match="input 'previous': the params name old/manifest"):
        resolve_inputs(stage, spec, {"previous": [Path("new/manifest.parquet")]}, Path("."))


def test_a_declared_input_that_is_missing_is_an_error(tmp_path):
    p = params()
    run = next(iter(plan_index(p)))
    spec = get_stage("train").spec(p, run=run)
    outputs = {n: tmp_path / n for n in get_stage("train").outputs}
    with pytest.raises(CampaignError, match=r"train: missing input 'train' \(--in train=PATH\)"):
        run_stage("train", spec, {}, outputs, Store(tmp_path / "state"))
    with pytest.raises(CampaignError, match="unknown input"):
        run_stage("train", spec, {"tokens": [DEMO]}, outputs, Store(tmp_path / "state"))


def test_files_are_matched_to_sources_by_glob_rules_without_listing_the_disk():
    sources = [
        {"path": "data/*.csv", "format": "csv", "licence": "l", "origin": "o"},
        {"path": "data/**/*.jsonl", "format": "jsonl", "licence": "l", "origin": "o"},
        {"path": "extra/one.parquet", "format": "parquet", "licence": "l", "origin": "o"},
    ]
    files = ["data/a.csv", "data/x/y/b.jsonl", "data/c.jsonl", "extra/one.parquet"]
    assert assign_files(sources, files) == [
        (0, files[0]),
        (1, files[1]),
        (1, files[2]),
        (2, files[3]),
    ]
    # `*` stays within one folder, as glob's does.
    with pytest.raises(CampaignError, match="data/sub/a.csv: named by no source"):
        assign_files(sources, ["data/sub/a.csv"])


def test_an_input_rewritten_while_the_stage_runs_is_not_committed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data" / "demo.jsonl"
    data.parent.mkdir()
    data.write_bytes(DEMO.read_bytes())
    p = params()
    spec = get_stage("split").spec(p)
    spec["sources"][0]["path"] = "data/demo.jsonl"
    outputs = {n: tmp_path / "out" / n for n in get_stage("split").outputs}
    store = Store(tmp_path / "state")

    real_execute = runner.execute

    def execute_then_rewrite(*args, **kwargs):  # a data export landing while the split runs
        real_execute(*args, **kwargs)
        late = {**json.loads(DEMO.read_text().splitlines()[0]), "id": "late-record"}
        with data.open("a") as f:
            f.write(json.dumps(late) + "\n")

    monkeypatch.setattr(runner, "execute", execute_then_rewrite)
    with pytest.raises(CampaignError, match="changed while the stage ran; nothing was commit"):
        run_stage("split", spec, {}, outputs, store)
    assert store.keys() == [] and not any(p.exists() for p in outputs.values())
    assert [r["state"] for r in store.job_records()] == ["failed"]


# ------------------------------------------------------------------ redaction before dedup
def test_records_equal_after_redaction_form_one_unit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()[:300]]
    twins = [
        {
            **rows[0],
            "id": "twin-a",
            "author": "twin-author-a",
            "text": "mail alice@example.com now",
        },
        {**rows[1], "id": "twin-b", "author": "twin-author-b", "text": "mail bob@example.org now"},
    ]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows + twins))
    p = params()
    spec = get_stage("split").spec(p)
    spec["sources"][0]["path"] = "data/d.jsonl"
    spec["split"]["stratify_tolerance"] = 1.0  # 302 records: balance is not what this tests
    spec["split"]["size_tolerance"] = 1.0

    def units(privacy: str) -> dict[str, str]:
        s = {**spec, "privacy": privacy}
        out = {n: tmp_path / privacy / n for n in get_stage("split").outputs}
        run_stage("split", s, {}, out, Store(tmp_path / "state"))
        frames = [pd.read_parquet(out[n]) for n in ("train", "validation", "test")]
        table = pd.concat(frames)
        return dict(zip(table["id"], table["unit"], strict=True)), table

    kept, _ = units("report")
    assert kept["twin-a"] != kept["twin-b"]  # different text: different units
    redacted, table = units("redact")
    # The same text once the addresses are masked: one unit, so one split, never a leak.
    assert redacted["twin-a"] == redacted["twin-b"]
    texts = set(table[table["id"].isin(["twin-a", "twin-b"])]["text"])
    assert len(texts) == 1 and "@" not in next(iter(texts))


# ------------------------------------------------------------------ interruptions
def start_computing_split(tmp_path) -> tuple[subprocess.Popen, Store]:
    """`campaign split` started on a copy of the demo data, returned once it is computing."""
    data = tmp_path / "data" / "demo.jsonl"
    data.parent.mkdir()
    # Three copies of the demo's records (new ids): the split computes for seconds, so the
    # signal lands while it computes even on a fast, quiet machine (one copy once finished
    # within the 0.2 s the test waits after the miss, and the job committed).
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()]
    copies = [{**r, "id": f"{r['id']}-{k}"} for k in range(3) for r in rows]
    data.write_text("".join(json.dumps(r) + "\n" for r in copies))
    p = params()
    spec = get_stage("split").spec(p)
    spec["sources"][0]["path"] = "data/demo.jsonl"
    outs = [arg for n in get_stage("split").outputs for arg in ("--out", f"{n}=out/{n}")]
    job = subprocess.Popen(
        [sys.executable, "-m", "campaign", "split", "--spec", json.dumps(spec)]
        + ["--state-dir", "state", *outs],
        cwd=tmp_path,
        env={**env(), "PYTHONPATH": str(REPO / "workflow")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Ctrl-C reaches a job started from a terminal, whose SIGINT is at its default. A test
        # run started in the background of a shell without job control (`cmd &` in a script)
        # inherits SIGINT ignored, and Python then keeps ignoring it: the job would finish.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    store = Store(tmp_path / "state")
    deadline = time.monotonic() + 60
    while not any(e["event"] == "miss" for e in store.events()):  # it is computing now
        assert job.poll() is None, job.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.2)
    return job, store


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 128 + 15), (signal.SIGINT, 130)])
def test_sigterm_and_ctrl_c_are_recorded_as_interrupted(tmp_path, sig, code):
    job, store = start_computing_split(tmp_path)
    job.send_signal(sig)
    got = job.wait(timeout=60)
    records = store.job_records()
    assert got == code, (records, store.events())
    assert [r["state"] for r in records] == ["interrupted"], records
    assert [e["event"] for e in store.events()] == ["miss", "interrupted"]
    assert store.keys() == [] and list(store.tmp.glob("commit-*")) == []
    assert not (tmp_path / "out" / "train").exists()


@pytest.mark.parametrize(
    "sig, raised", [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Interrupted)]
)
def test_a_signal_whose_exception_a_library_swallowed_is_still_not_a_success(
    tmp_path, monkeypatch, sig, raised
):
    """The command's handler raises at once, but code it runs may swallow the exception (one
    Ctrl-C in twenty-five landed in a third-party import and was lost: the split committed and
    exited 0). The runner asks whether a signal came before it commits."""
    from campaign import cli
    from campaign.core.errors import forget_signals

    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data" / "demo.jsonl"
    data.parent.mkdir()
    data.write_bytes(DEMO.read_bytes())
    spec = get_stage("split").spec(params())
    spec["sources"][0]["path"] = "data/demo.jsonl"
    outputs = {n: tmp_path / "out" / n for n in get_stage("split").outputs}
    store = Store(tmp_path / "state")
    real_execute = runner.execute
    handler = {signal.SIGINT: cli._on_sigint, signal.SIGTERM: cli._on_sigterm}[sig]

    def execute_swallowing_a_signal(*args, **kwargs):
        real_execute(*args, **kwargs)
        try:  # what a library's broad `except` does to the handler's exception
            handler(sig, None)
        except BaseException:  # noqa: BLE001
            pass

    monkeypatch.setattr(runner, "execute", execute_swallowing_a_signal)
    try:
        with pytest.raises(raised):
            run_stage("split", spec, {}, outputs, store)
    finally:
        forget_signals()
    assert store.keys() == [] and not any(p.exists() for p in outputs.values())
    assert [r["state"] for r in store.job_records()] == ["interrupted"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 128 + 15), (signal.SIGINT, 130)])
def test_an_interruption_on_a_full_disk_ends_as_an_interruption(tmp_path, sig, code):
    """The event log fills up (/dev/full answers ENOSPC) while the job computes, then the job
    is stopped: recording the interruption must not raise a second error over it. The job ends
    with the interruption's status (a scheduler requeues on that), no traceback, and its record
    says interrupted, not running (gc would take it for a live job)."""
    job, store = start_computing_split(tmp_path)
    full = store.root / "events.full"
    full.symlink_to("/dev/full")
    os.replace(full, store.events_path)
    job.send_signal(sig)
    got = job.wait(timeout=60)
    out = job.stdout.read()
    assert got == code, out
    assert "Traceback" not in out and "disk is full" not in out, out
    assert [r["state"] for r in store.job_records()] == ["interrupted"]
    assert store.keys() == [] and not (tmp_path / "out" / "train").exists()


def test_the_code_version_covers_the_modules_that_pin_execution_and_derive_inputs():
    """campaign.train.execution pins threads and deterministic algorithms before a training job
    runs: an edit there changes results, so it is in the code version of every stage it pins."""
    from campaign.core.code import import_closure, module_hashes
    from campaign.core.registry import get_stage

    # The preflight pins through its own module (one thread a check, its cores: checks at once).
    for name, pins in (
        ("train", "campaign.train.execution"),
        ("preflight", "campaign.preflight.execution"),
    ):
        stage = get_stage(name)
        assert stage.execution == pins
        assert {pins, "campaign.train.execution"} <= set(module_hashes(*stage.code_modules)), name
    train = get_stage("train")
    assert "campaign.train.execution" not in import_closure(train.module)  # what was missed
    assert train.derive_inputs.partition(":")[0] in module_hashes(*train.code_modules)


def test_reproduce_an_entry_whose_params_name_data_outside_the_project(tmp_path):
    """A params file may name its data by an absolute path outside the project: the entry
    records that path, and `campaign reproduce KEY` reads it from there (it once crashed making
    it relative to the project)."""
    outside = tmp_path / "elsewhere" / "demo.jsonl"
    outside.parent.mkdir()
    outside.write_bytes(DEMO.read_bytes())
    project = tmp_path / "project"
    project.mkdir()
    p = params()
    p["data"]["sources"][0]["path"] = str(outside)
    stage = get_stage("manifest")
    outs = [arg for n in stage.outputs for arg in ("--out", f"{n}=out/{n}")]
    e = {**env(), "PYTHONPATH": str(REPO / "workflow")}

    def campaign_cmd(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "campaign", *args, "--state-dir", "state"]
        return subprocess.run(cmd, cwd=project, env=e, capture_output=True, text=True, timeout=300)

    made = campaign_cmd("manifest", "--spec", json.dumps(stage.spec(p)), *outs)
    assert made.returncode == 0, made.stderr
    (key,) = Store(project / "state").keys()
    got = campaign_cmd("reproduce", key)
    assert got.returncode == 0, got.stdout + got.stderr
    assert "Traceback" not in got.stderr
    assert got.stdout.strip().splitlines()[-1] == (
        "reproduce: all 3 compared output(s) reproduced bit for bit"
    )
    # Data that moved since: one line naming it, not a traceback.
    outside.rename(outside.with_suffix(".moved"))
    gone = campaign_cmd("reproduce", key)
    assert gone.returncode == 2 and "Traceback" not in gone.stderr
    assert gone.stderr.strip() == f"error: {key}: input 'sources' {outside} no longer exists"
