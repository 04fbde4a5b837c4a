"""A result a stage wrote from the store and something else wrote over since (a trainer that
clobbered a split file) is restored from its entry by the next job that reads it, and said in
that job's log: the next correct run trains on the split, not on the garbage."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pandas as pd
import yaml

from campaign.cli import main
from campaign.core.params import load_params
from campaign.core.registry import get_stage
from campaign.core.runner import run_stage
from campaign.core.store import Store

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "fixtures" / "tiny_params.yaml"
sys.path.insert(0, str(REPO / "tests"))
from trainkit import OUTPUTS, tiny_spec  # noqa: E402


def test_a_clobbered_split_is_restored_from_the_store_by_the_next_job(tmp_path, monkeypatch, capfd):
    (tmp_path / "data" / "raw").mkdir(parents=True)
    shutil.copy(REPO / "data" / "raw" / "demo.jsonl", tmp_path / "data" / "raw" / "demo.jsonl")
    params = load_params(TINY)
    params["campaign"]["state_dir"] = "state"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    splits = {o: Path("results") / o for o in get_stage("split").outputs}
    argv = ["split", "--params", "params.yaml", "--in", "sources=data/raw/demo.jsonl"]
    argv += ["--log", "split.log"] + [a for o, p in splits.items() for a in ("--out", f"{o}={p}")]
    assert main(argv) == 0
    good = splits["train"].read_bytes()
    splits["train"].write_bytes(b"not parquet: a trainer wrote here")  # the clobber

    inputs = {name: [splits[name]] for name in ("train", "validation", "test")}
    outputs = {n: Path("run") / n for n in OUTPUTS}
    result = run_stage("train", tiny_spec(max_steps=2), inputs, outputs, Store("state"))
    assert not result.hit
    assert splits["train"].read_bytes() == good
    assert len(pd.read_parquet(outputs["predictions_test"])) > 0
    log = capfd.readouterr().out
    assert f"train: input {splits['train']} is not what split committed" in log, log
    assert "restored it from the store" in log
