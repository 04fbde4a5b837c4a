"""`campaign status` counts jobs, not output files: a training job's outputs are one job."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from campaign.tools.status import status_lines

TRAIN_OUTPUTS = ("model", "metrics.parquet", "predictions_test.parquet", "run_manifest.json")
RUNS = ("run-0123456789ab", "run-ba9876543210")


def row(path: str, rule: str, plan: str = "no update") -> dict:
    """A row of `snakemake --summary`, as it prints one per output file."""
    status = "ok" if Path(path).exists() else "missing"
    return {"output_file": path, "date": "-", "rule": rule, "status": status, "plan": plan}


def table(lines: list[str]) -> dict[str, list[int]]:
    """The per-rule table: rule -> counts in the header's order."""
    return {
        line.split()[0]: [int(n) for n in line.split()[1:]]
        for line in lines[1:]
        if len(line.split()) == 7 and all(n.isdigit() for n in line.split()[1:])
    }


def test_status_counts_one_state_per_job(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done, partial = RUNS
    for run in RUNS:
        Path(f"results/runs/{run}").mkdir(parents=True)
        Path(f"results/runs/{run}/spec.json").write_text("{}")
    for name in TRAIN_OUTPUTS:
        Path(f"results/runs/{done}/{name}").write_text("x")
    Path(f"results/runs/{partial}/model").write_text("x")  # one of its outputs, not all
    rows = [
        row("results/data/manifest.parquet", "manifest", "update pending"),
        row("results/data/summary.json", "manifest", "update pending"),
        *(row(f"results/runs/{run}/spec.json", "run_spec") for run in RUNS),
        *(row(f"results/runs/{run}/{name}", "train") for run in RUNS for name in TRAIN_OUTPUTS),
    ]
    # The second run's spec job is running in this very process.
    running = {
        "state": "running",
        "key": "k",
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "outputs": [f"results/runs/{partial}/spec.json"],
    }
    lines, counts = status_lines(rows, {f"results/runs/{partial}/spec.json": running})
    assert lines[0].split()[:4] == ["jobs", "per", "rule", "done"]
    #                      done running stale interrupted failed missing
    assert table(lines) == {
        "manifest": [0, 0, 0, 0, 0, 1],
        "run_spec": [1, 1, 0, 0, 0, 0],
        "train": [1, 0, 0, 0, 0, 1],
    }
    assert dict(counts) == {"done": 2, "running": 1, "missing": 2}
    listed = [line for line in lines if line.split()[0] in ("missing", "running")]
    assert listed == [
        "missing      manifest       results/data/manifest.parquet (+1 more)",
        f"running      run_spec       results/runs/{partial}/spec.json  (pid {os.getpid()})",
        f"missing      train          results/runs/{partial}/model (+3 more)",
    ]
    assert lines[-1] == "summary: 2 done, 1 running, 2 missing"


@pytest.mark.slow
def test_status_command_lists_jobs(tiny_project):
    from conftest import campaign

    out = campaign(tiny_project, "status", check=False).stdout
    counts = table(out.splitlines())
    # The tiny plan has 4 runs: 4 spec jobs and 4 training jobs (each of several outputs).
    assert counts["train"] == [0, 0, 0, 0, 0, 4], out
    assert counts["run_spec"] == [0, 0, 0, 0, 0, 4], out
    assert counts["manifest"] == [0, 0, 0, 0, 0, 1], out
    jobs = sum(sum(c) for c in counts.values())
    summary = [line for line in out.splitlines() if line.startswith("summary:")]
    assert summary == [f"summary: {jobs} missing"], out
    assert sum(line.startswith("missing") for line in out.splitlines()) == jobs
    # Nothing has run: no plan table yet, so the remaining hours and money are not known.
    assert out.strip().splitlines()[-1].startswith("remaining: unknown until the plan table")


def test_an_adaptive_campaign_counts_the_runs_its_latest_look_asked_for(tmp_path):
    from campaign.plan.look_runs import campaign_runs
    from campaign.tools.forecast import read_plan_table, remaining_line
    from campaign.tools.status import adaptive_line

    # a, b: the plan's kept runs (1 h each); e, f: adaptive candidates (2 h each). Look 1
    # appended e; f no look asked for.
    lines = ["run\tseed\ttier\tprojected_hours\tkept", "a\t1\tmain\t1.0\ttrue"]
    lines += ["b\t2\tmain\t1.0\ttrue", "e\t3\tadaptive\t2.0\tfalse", "f\t3\tadaptive\t2.0\tfalse"]
    (tmp_path / "runs.tsv").write_text("\n".join(lines) + "\n")
    look = {"look": 1, "runs": ["a", "b", "e"], "appended": ["e"], "final": False}
    (tmp_path / "look_1.json").write_text(json.dumps(look | {"max_looks": 3}))
    campaign = campaign_runs(tmp_path / "runs.tsv", [tmp_path / "look_1.json"])
    # a trained, b training (its progress file is live), e appended and not started.
    states = {"a": "done", "b": "running", "e": "missing"}
    assert adaptive_line(campaign, states) == (
        "adaptive: look 1 asks for 3 runs (1 appended by the looks): 1 trained, 1 running, "
        "1 to do; a later look may append up to 1 more"
    )
    # What is left: b (1 h) and the appended e (2 h), not f: 3 h, 3.00 EUR at 1/h.
    plan = read_plan_table(tmp_path / "runs.tsv", campaign.runs)
    budget = {"reference_offer": "box", "currency": "EUR", "offers": [{"name": "box", "hourly": 1}]}
    assert remaining_line(plan, {"a"}, None, budget) == (
        "remaining: 2 of 3 planned runs, 3 h 0 min (as projected; not yet calibrated by the "
        "budget), 3.00 EUR on box (1 EUR/h)"
    )
    last = look | {"look": 2, "appended": [], "final": True}
    (tmp_path / "look_2.json").write_text(json.dumps(last))
    paths = [tmp_path / "look_1.json", tmp_path / "look_2.json"]
    states = {"a": "done", "b": "stale", "e": "done"}
    assert adaptive_line(campaign_runs(tmp_path / "runs.tsv", paths), states) == (
        "adaptive: look 2 (the last) asks for 3 runs (1 appended by the looks): 2 trained, "
        "1 stale, 0 running, 0 to do"
    )


def test_a_run_the_summary_does_not_list_is_told_by_its_job_record(tmp_path, monkeypatch):
    from campaign.tools.status import run_states

    # Snakemake's summary lists a (done) and b (stale); e and f, appended by a look, it does
    # not: e's train job is recorded done with its manifest there, f's never started.
    monkeypatch.chdir(tmp_path)
    Path("results/runs/e").mkdir(parents=True)
    Path("results/runs/e/run_manifest.json").write_text("{}")
    records = {"results/runs/e/run_manifest.json": {"state": "done"}}
    listed = {"a": "done", "b": "stale"}
    assert run_states(["a", "b", "e", "f"], listed, records, {"g"}) == {
        "a": "done",
        "b": "stale",
        "e": "done",
        "f": "missing",
    }
    # A live progress file says running, whatever else says.
    assert run_states(["b"], listed, records, {"b"}) == {"b": "running"}


def trained_run(tmp_path: Path):
    """(params, its first 3 runs a b c, the store, a's key, a's job record) in tmp_path (the
    working directory): the split files written, run a trained before (the store holds the
    entry its key names now, outputs stand-ins committed as the runner commits them: the model
    a folder holding a weights file), b and c never trained."""
    import yaml

    from campaign.core.params import validate
    from campaign.core.registry import get_stage
    from campaign.core.runner import job_key
    from campaign.core.store import Store
    from campaign.plan import plan_index, run_spec_of
    from campaign.tools.status import train_inputs
    from conftest import FIXTURES

    params = validate(yaml.safe_load((FIXTURES / "tiny_params.yaml").read_text()))
    a, b, c = list(plan_index(params))[:3]
    for paths in train_inputs({"run": a}).values():
        paths[0].parent.mkdir(parents=True, exist_ok=True)
        paths[0].write_bytes(paths[0].name.encode())  # the split files (content is all it takes)
    store = Store(tmp_path / ".campaign")
    store.ensure()
    key = job_key(get_stage("train"), run_spec_of(params, a), train_inputs({"run": a}), store,
                  Path("."), 1)[3]  # fmt: skip
    staging = store.new_staging(key)
    for name in get_stage("train").outputs:
        (staging / "outputs" / name).write_text(name)
    (staging / "outputs" / "model").unlink()
    (staging / "outputs" / "model").mkdir()
    (staging / "outputs" / "model" / "model.safetensors").write_bytes(b"w" * 1000)
    store.commit(key, staging, {"stage": "train", "key_material": {"execution": {"threads": 1}}})
    record = {f"results/runs/{a}/run_manifest.json": {"state": "done", "key": key}}
    return params, (a, b, c), store, key, record


def test_a_stale_run_whose_key_has_a_store_entry_counts_trained_and_costs_nothing(
    tmp_path, monkeypatch
):
    from campaign.plan.look_runs import CampaignRuns
    from campaign.tools.forecast import remaining_line
    from campaign.tools.status import adaptive_line, stored_runs, train_inputs

    monkeypatch.chdir(tmp_path)
    params, (a, b, c), store, key, record = trained_run(tmp_path)
    # Snakemake marks a stale (its inputs' mtimes are newer, say a copied project) and c missing.
    states = {a: "stale", b: "stale", c: "missing"}
    assert stored_runs([a, b, c], states, params, store, record) == {a}
    for paths in train_inputs({}).values():
        os.utime(paths[0], (1, 1))  # a checkout's or a copy's times
    assert stored_runs([a, b, c], states, params, store, {}) == {a}  # mtimes don't count
    # Priced: b and c only (1 h each at 1 EUR/h), a costs a store hit.
    plan = [{"run": r, "projected_hours": 1.0} for r in (a, b, c)]
    budget = {"reference_offer": "box", "currency": "EUR", "offers": [{"name": "box", "hourly": 1}]}
    assert remaining_line(plan, {a}, None, budget).startswith(
        "remaining: 2 of 3 planned runs, 2 h 0 min (as projected; not yet calibrated by the "
        "budget), 2.00 EUR"
    )
    look = CampaignRuns((a, b, c), looks=1, final=True, adaptive=True)
    assert adaptive_line(look, states, {a}) == (
        "adaptive: look 1 (the last) asks for 3 runs: 1 trained (1 of them store hits), 1 stale, "
        "0 running, 1 to do"
    )
    # New split content: a's key changes, so its rerun trains; nothing is a hit.
    train_inputs({})["validation"][0].write_bytes(b"other rows")
    assert stored_runs([a, b, c], states, params, store, record) == set()


def test_no_run_is_a_store_hit_while_a_job_upstream_of_train_is_pending(tmp_path, monkeypatch):
    from campaign.tools.status import stored_runs

    monkeypatch.chdir(tmp_path)
    params, (a, b, c), store, key, record = trained_run(tmp_path)
    states = {a: "stale", b: "stale", c: "missing"}
    split = "results/data/splits/train.parquet"
    done = [row(split, "split"), row("results/plan/runs.tsv", "plan_table")]
    # A finished campaign: the split is up to date; a's rerun is a store hit. Pending jobs
    # downstream of train (evaluate, report) change nothing.
    downstream = [row("results/eval/metrics.parquet", "evaluate", "update pending")]
    assert stored_runs([a, b, c], states, params, store, record, done + downstream) == {a}
    # split.stratify_tolerance edited: Snakemake will rewrite the split before any run trains,
    # so the split files on disk (which a's old entry matches) are not what the runs will read.
    edited = [{**done[0], "status": "params changed", "plan": "update pending"}, done[1]]
    assert stored_runs([a, b, c], states, params, store, record, edited) == set()
    # So is a stale manifest, or a preflight to rerun (the plan table it feeds may keep others).
    for rule in ("manifest", "preflight"):
        pending = [*done, row(f"results/{rule}.out", rule, "update pending")]
        assert stored_runs([a, b, c], states, params, store, record, pending) == set()


def test_a_truncated_or_foreign_store_entry_is_no_store_hit(tmp_path, monkeypatch):
    import json
    import shutil

    from campaign.core.runner import stored_key
    from campaign.plan import run_spec_of
    from campaign.tools.status import stored_runs, train_inputs

    monkeypatch.chdir(tmp_path)
    params, (a, b, c), store, key, record = trained_run(tmp_path)
    states = {a: "stale"}
    sound = tmp_path / "sound"
    shutil.copytree(store.entry_path(key), sound)
    spec, inputs = run_spec_of(params, a), train_inputs({"run": a})
    assert stored_key("train", spec, inputs, store, threads=1) == key
    # The model's weights file cut to 999 of its 1000 bytes: the rerun would train, priced.
    weights = store.entry_path(key) / "outputs" / "model" / "model.safetensors"
    weights.chmod(0o600)
    weights.write_bytes(b"w" * 999)
    assert stored_key("train", spec, inputs, store, threads=1) is None
    assert stored_runs([a], states, params, store, record) == set()
    # A file where the entry records a folder, of the same bytes, is no hit either.
    shutil.rmtree(store.entry_path(key) / "outputs" / "model")
    (store.entry_path(key) / "outputs" / "model").write_bytes(b"w" * 1000)
    assert stored_key("train", spec, inputs, store, threads=1) is None
    # The sound copy back: a hit; then an entry.json of another hash algorithm or format is not.
    shutil.rmtree(store.entry_path(key))
    shutil.copytree(sound, store.entry_path(key))
    assert stored_runs([a], states, params, store, record) == {a}
    meta_path = store.entry_path(key) / "entry.json"
    meta = json.loads(meta_path.read_text())
    for other in ({"algorithm": "md5"}, {"format": meta["format"] + 1}):
        meta_path.chmod(0o600)
        meta_path.write_text(json.dumps(meta | other))
        assert stored_key("train", spec, inputs, store, threads=1) is None, other
