"""End to end: a tiny campaign through real Snakemake: reruns, kill -9 and resume, CLI tools."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

from campaign.evaluate import read_decisions
from conftest import (
    campaign,
    copy_project,
    events,
    kill_9_mid_training,
    planned_jobs,
    result_hashes,
    snakemake,
    stage_keys,
    warm_store,
)

pytestmark = pytest.mark.slow


def edit_params(project: Path, edit) -> None:
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    edit(params)
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def run_ids(project: Path) -> set[str]:
    return {p.name for p in (project / "results" / "runs").iterdir()}


def test_campaign_runs_then_nothing_to_do(finished_campaign):
    # The session's one run of the tiny campaign (conftest.finished_campaign) ran it.
    hashes = result_hashes(finished_campaign)
    assert {"data/manifest.parquet", "data/summary.json", "plan/runs.tsv", "metrics.json"} <= set(
        hashes
    )
    assert len(run_ids(finished_campaign)) == 4
    metrics = json.loads((finished_campaign / "results" / "metrics.json").read_text())
    assert metrics["plan"] == {"runs": 4, "seeds": 2, "cells": 2}
    # The evaluation decides, and each decision is traceable to its row in the tables.
    evaluation = finished_campaign / "results" / "evaluation"
    decisions = read_decisions(evaluation / "decisions.json")
    comparisons = pd.read_parquet(evaluation / "comparisons.parquet")
    assert decisions.decisions, "no decision on the tiny campaign's lr factor"
    for d in decisions.decisions:
        row = comparisons[
            (comparisons.subject == d.subject) & (comparisons.split == decisions.decide_on)
        ]
        assert len(row) == 1 and row.iloc[0].decision == d.decision, d
        assert row.iloc[0].estimate == pytest.approx(d.estimate)
    scored = set(pd.read_parquet(evaluation / "metrics.parquet").variant)
    assert (
        run_ids(finished_campaign) <= scored and {"floor/majority", "floor/tfidf_logreg"} <= scored
    )
    assert metrics["evaluation"]["best_cell"]["cell"] == decisions.best_cell.cell
    summary = (evaluation / "summary.txt").read_text()
    # The verdict block first (tests/report/test_verdict_numbers.py), then the decisions.
    assert summary.startswith("Verdict (")
    assert f"\n\nKeep: {decisions.verdict.keep}" in summary
    assert "Decisions use the validation" in summary
    # Results and the store may hold personal data: owner-only, every file and folder.
    for top in (finished_campaign / "results", finished_campaign / ".campaign" / "store"):
        for path in [top, *top.rglob("*")]:
            if path.name == ".snakemake_timestamp":
                continue  # Snakemake's own empty marker in directory() outputs
            assert path.stat().st_mode & 0o077 == 0, f"{path} is readable by others"
    again = snakemake(finished_campaign, "-n")
    assert planned_jobs(again) == []
    assert "Nothing to be done" in again.stdout + again.stderr


def test_editing_one_param_reruns_exactly_its_dependents(finished_project):
    before_runs = run_ids(finished_project)
    manifest = finished_project / "results" / "data" / "manifest.parquet"
    manifest_stat = manifest.stat()
    n_events = len(events(finished_project))

    # One ablation level changes: its 2 runs (× 2 seeds) are new; the plan table, the
    # evaluation, the budget and the metrics that summarize them follow; the data, the floor,
    # the quantized control and the other runs are untouched.
    edit_params(
        finished_project, lambda p: p["ablation"]["factors"]["train"].update(lr=[1.0e-3, 2.0e-3])
    )
    dry = snakemake(finished_project, "-n")
    jobs = planned_jobs(dry)
    new_runs = sorted((rule, out) for rule, out in jobs if rule == "run_spec")
    assert [rule for rule, _ in jobs if rule not in ("run_spec", "train")] == [
        "all",
        "artifact_scan",
        "budget",
        "evaluate",
        "index",
        "metrics",
        "plan_table",
        "report",
    ]
    assert len(new_runs) == 2
    assert sorted(out.split("/")[2] for rule, out in jobs if rule == "train") == sorted(
        out.split("/")[2] for _, out in new_runs
    )
    snakemake(finished_project)
    after_runs = run_ids(finished_project)
    assert {f"results/runs/{r}/spec.json" for r in after_runs - before_runs} == {
        out for _, out in new_runs
    }
    assert manifest.stat().st_mtime_ns == manifest_stat.st_mtime_ns
    assert manifest.stat().st_ino == manifest_stat.st_ino
    new_events = events(finished_project)[n_events:]
    assert sorted(e["stage"] for e in new_events if e["event"] == "miss") == [
        "artifact_scan",
        "budget",
        "evaluate",
        "index",
        "metrics",
        "plan_table",
        "report",
        "run_spec",
        "run_spec",
        "train",
        "train",
    ]

    # A licence: the manifest records it, so the manifest, the metrics and the report (licence
    # per source) recompute. The split
    # reads the sources too, so Snakemake reruns it and what follows, but the licence is not in
    # the split's key: a store hit, and nothing after it is recomputed either (the index reads
    # only the data summary's dataset hash: a hit too).
    edit_params(finished_project, lambda p: p["data"]["sources"][0].update(licence="CC-BY-4.0"))
    jobs = planned_jobs(snakemake(finished_project, "-n"))
    rerun_by_mtime = (
        *("train", "preflight", "plan_table", "quantize", "quantize_table"),
        *("floor", "evaluate", "budget", "artifact_scan", "index"),
    )
    assert [rule for rule, _ in jobs if rule not in rerun_by_mtime] == [
        "all",
        "manifest",
        "metrics",
        "report",
        "split",
    ]
    n_events = len(events(finished_project))
    snakemake(finished_project)
    new_events = events(finished_project)[n_events:]
    assert sorted(e["stage"] for e in new_events if e["event"] == "miss") == [
        "manifest",
        "metrics",
        "report",
    ]
    hits = (("split", 1), ("preflight", 1), ("plan_table", 1), ("train", 4), ("quantize", 1))
    after = (("quantize_table", 1), ("floor", 1), ("evaluate", 1), ("budget", 1))
    after += (("artifact_scan", 1), ("index", 1))
    for stage, n in (*hits, *after):
        assert [e["event"] for e in new_events if e["stage"] == stage] == ["hit"] * n, stage
    summary = json.loads((finished_project / "results" / "data" / "summary.json").read_text())
    assert summary["per_licence"] == {"CC-BY-4.0": summary["records"]}


def test_touching_inputs_costs_a_store_hit_and_a_corrupted_entry_is_recomputed(finished_project):
    # A copy of the finished campaign is a finished campaign (what every copy-based test assumes).
    assert planned_jobs(snakemake(finished_project, "-n")) == []
    before = result_hashes(finished_project)
    n_events = len(events(finished_project))
    # One store entry corrupted (a byte of the manifest's summary flipped): `campaign verify`
    # names it.
    manifest_key = next(e["key"] for e in events(finished_project) if e["stage"] == "manifest")
    stored = finished_project / ".campaign" / "store" / manifest_key / "outputs" / "summary"
    good = stored.read_bytes()
    os.chmod(stored, 0o600)
    with open(stored, "r+b") as f:
        f.seek(10)
        byte = f.read(1)
        f.seek(10)
        f.write(bytes([byte[0] ^ 0xFF]))
    verify = campaign(finished_project, "verify", check=False)
    assert verify.returncode == 1
    assert f"CORRUPT  manifest     {manifest_key}/outputs/summary" in verify.stdout
    # What `git checkout` or `dvc pull` does: same bytes, new mtimes.
    for path in [
        finished_project / "data" / "raw" / "demo.jsonl",
        *(finished_project / "workflow" / "campaign").glob("*.py"),
    ]:
        os.utime(path)
    jobs = planned_jobs(snakemake(finished_project, "-n"))
    assert ("manifest", "results/data/manifest.parquet") in jobs
    out = snakemake(finished_project)
    # Every job Snakemake reruns for the new mtimes is a store hit, but the corrupted entry's:
    # detected on use and recomputed under the same key, to the same bytes.
    new = events(finished_project)[n_events:]
    assert [(e["stage"], e["key"]) for e in new if e["event"] == "miss"] == [
        ("manifest", manifest_key)
    ]
    assert sum(e["event"] == "hit" for e in new) >= len(jobs) - 2  # `all`, and the manifest
    log = (finished_project / "logs" / "manifest" / "manifest.log").read_text()
    assert f"corrupt entry {manifest_key}/outputs/summary" in log
    assert stored.read_bytes() == good
    assert campaign(finished_project, "verify").returncode == 0
    assert out.returncode == 0
    assert result_hashes(finished_project) == before
    assert planned_jobs(snakemake(finished_project, "-n")) == []


@pytest.mark.slow(minutes=2)
def test_kill_9_then_the_documented_recovery_finishes_without_recomputing(
    tmp_path, finished_campaign
):
    # The tiny campaign (4 training jobs of 20 steps, a checkpoint every 5): killed at a
    # training job's first checkpoint, 15 steps remain. The session's uninterrupted run of the
    # same params is the clean reference. Its store entries of the stages this test is not about
    # (the preflight, three of the four runs' training, all after training) are in the killed
    # campaign's store: those jobs are hits when their inputs are the clean run's bytes, so the
    # outputs compared below are this campaign's own data, plan and the one run it trains (that
    # every training entry recomputes bit for bit is test_reproduce's), and every job downstream
    # of an output that differed would compute and differ too.
    killed = copy_project(tmp_path / "killed")
    clean = finished_campaign
    (cold_train, *_) = stage_keys(clean, "train")
    cold = frozenset({"manifest", "split", "plan_table", "run_spec"})
    warm_store(killed, clean, cold=cold, cold_keys=frozenset({cold_train}))

    # Kill while a training job is mid-run: right after its first checkpoint lands (the
    # helper makes sure it had not finished).
    caught = kill_9_mid_training(killed)
    before_kill = events(killed)
    committed = {e["key"] for e in before_kill if e["event"] == "commit"}
    interrupted = {e["key"] for e in before_kill if e["event"] == "miss"} - committed
    assert committed and caught.key in interrupted, "the kill must land mid-campaign"
    assert caught.key == cold_train  # the run's key is the clean run's: same spec, same data
    assert caught.steps, "a checkpoint survives in the work folder"

    # The recovery command from README.md.
    snakemake(killed, "--unlock")
    snakemake(killed, timeout=900)  # the rest of the campaign: minutes on a loaded machine

    after = events(killed)[len(before_kill) :]
    recomputed = {e["key"] for e in after if e["event"] == "miss"} & committed
    assert recomputed == set(), "a finished stage was computed again"
    log = (killed / "logs" / "train" / f"{caught.run}.log").read_text(encoding="utf-8")
    assert f"train: resumed from step {caught.steps[-1]}" in log
    # Bit for bit: models, predictions, splits, manifests (timings aside).
    assert result_hashes(killed, timed=False) == result_hashes(clean, timed=False)
    assert planned_jobs(snakemake(killed, "-n")) == []


def test_status_gc_and_reproduce(finished_project):
    status = campaign(finished_project, "status")
    summary = status.stdout.split("summary:")[-1]
    assert "done" in summary and "missing" not in summary and "stale" not in summary
    manifest_key = next(e["key"] for e in events(finished_project) if e["stage"] == "manifest")
    rep = campaign(finished_project, "reproduce", manifest_key[:12])
    assert "reproduced bit for bit" in rep.stdout

    # Drop a level: its runs leave the plan; gc lists their entries, then removes them.
    edit_params(finished_project, lambda p: p["ablation"]["factors"]["train"].update(lr=[1.0e-3]))
    status = campaign(finished_project, "status")
    # The plan table and the metrics no longer match the plan: stale, listed by output.
    assert "stale" in status.stdout.split("summary:")[-1]
    assert any(
        line.startswith("stale") and "results/plan/runs.tsv" in line
        for line in status.stdout.splitlines()
    ), status.stdout
    dry = campaign(finished_project, "gc", "--dry-run")
    store = finished_project / ".campaign" / "store"
    n_before = len(list(store.iterdir()))
    assert "would remove 4 entries" in dry.stdout  # 2 runs: their spec and training entries
    assert len(list(store.iterdir())) == n_before
    campaign(finished_project, "gc")
    assert len(list(store.iterdir())) == n_before - 4
    snakemake(finished_project)
    assert campaign(finished_project, "verify").returncode == 0
