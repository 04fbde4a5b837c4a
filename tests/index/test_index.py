"""The experiment index (results/index.parquet) from a real tiny campaign: one row per run,
quantized variant and floor; hashes that match what the runner's job records and store entries
say; the query in docs/results.md answered as the evaluation's comparisons say; bad input
refused."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from campaign.core.hashing import hash_tree, hash_value
from conftest import REPO, campaign, copy_finished

INDEX = "results/index.parquet"


# ---- unit checks: no campaign needed --------------------------------------------------------


def test_a_run_finds_its_decision_by_cell_id_whatever_the_wording():
    """The run's decision is its cell's comparison against the control, found by the plan's
    cell id: a rewording of the comparison's subject changes nothing."""
    from campaign.index.stage import _run_decision

    comparison = {"subject": "lr went up (any wording)", "decision": "adopt", "estimate": 0.05,
                  "ci_low": 0.01, "ci_high": 0.09}  # fmt: skip
    found = _run_decision("cell-control", "cell-moved", {"cell-moved": comparison})
    assert (found["decision"], found["decision_against"]) == ("adopt", "control")
    assert found["decision_ci_low"] == 0.01 and found["decision_reason"] is None
    control = _run_decision("cell-control", "cell-control", {"cell-moved": comparison})
    assert control["decision"] is None and control["decision_reason"] == "the control cell"
    missing = _run_decision("cell-control", "cell-other", {"cell-moved": comparison})
    assert missing["decision"] is None and "cell-other" in missing["decision_reason"]


def test_tree_hash_is_the_store_hash_without_snakemakes_timestamp(tmp_path):
    from campaign.index.stage import tree_hash

    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "sub" / "w.safetensors").write_bytes(b"\x00\x01")
    clean = hash_tree(model)
    (model / ".snakemake_timestamp").write_text("")
    assert hash_tree(model) != clean  # the folder Snakemake leaves differs from the store's
    assert tree_hash(model) == clean
    (model / "config.json").write_text('{"a": 1}')
    assert tree_hash(model) != clean


def test_plan_factors_are_the_columns_between_run_and_seed_typed(tmp_path):
    from campaign.core.errors import CampaignError
    from campaign.index.stage import read_plan

    table = tmp_path / "runs.tsv"
    table.write_text(
        "run\ttrain.lr\ttrain.lora\tseed\ttier\n"
        "run-a\t0.001\tnull\t1\tcontrol\n"
        "run-b\t0.003\tr8\t2\tmain\n"
    )
    factors, rows = read_plan(table)
    assert factors == ["train.lr", "train.lora"]
    assert rows["run-b"]["typed"] == {"train.lr": 0.003, "train.lora": "r8"}
    assert rows["run-a"]["levels"] == {"train.lr": "0.001", "train.lora": "null"}
    assert rows["run-b"]["seed"] == 2 and rows["run-a"]["tier"] == "control"
    # A garbled table (an unclosed quote) is one error naming the file.
    table.write_text('run\tseed\ttier\n"run-a\t1\n')
    with pytest.raises(CampaignError, match=r"runs\.tsv: not a readable plan table"):
        read_plan(table)


def test_an_input_given_twice_or_not_at_all_is_named():
    from campaign.core.errors import CampaignError
    from campaign.index.stage import build_rows

    with pytest.raises(CampaignError, match=r"input 'summary'"):
        build_rows({"summary": []})
    with pytest.raises(CampaignError, match=r"input 'metrics'"):
        one = {n: [Path(f"{n}.x")] for n in ("summary", "train", "validation", "test", "runs")}
        build_rows(one | {"metrics": [Path("a"), Path("b")]})


# ---- a finished tiny campaign ---------------------------------------------------------------


@pytest.fixture(scope="module")
def finished(finished_campaign, tmp_path_factory) -> Path:
    """This module's copy of the session's finished tiny campaign (conftest.finished_campaign)."""
    return copy_finished(finished_campaign, tmp_path_factory.mktemp("index") / "project")


def _stage_inputs(project: Path, **replace: list[str]) -> dict[str, list[str]]:
    """The index stage's inputs as the rule gives them, found in a finished project."""
    runs = sorted(p.name for p in (project / "results" / "runs").iterdir())
    jobs = sorted(
        p.parent.relative_to(project).as_posix()
        for p in (project / "results" / "quantize").glob("*/*/result.json")
    )
    inputs = {
        "summary": ["results/data/summary.json"],
        **{s: [f"results/data/splits/{s}.parquet"] for s in ("train", "validation", "test")},
        "runs": ["results/plan/runs.tsv"],
        "run_manifests": [f"results/runs/{r}/run_manifest.json" for r in runs],
        "models": [f"results/runs/{r}/model" for r in runs],
        "predictions_validation": [
            f"results/runs/{r}/predictions_validation.parquet" for r in runs
        ],
        "predictions_test": [f"results/runs/{r}/predictions_test.parquet" for r in runs],
        "variants_result": [f"{j}/result.json" for j in jobs],
        "variants_model": [f"{j}/model" for j in jobs],
        "variants_validation": [f"{j}/predictions_validation.parquet" for j in jobs],
        "variants_test": [f"{j}/predictions_test.parquet" for j in jobs],
        "metrics": ["results/evaluation/metrics.parquet"],
        "comparisons": ["results/evaluation/comparisons.parquet"],
        "decisions": ["results/evaluation/decisions.json"],
        "jobs": ["results/budget/jobs.parquet"],
    }
    return inputs | replace


def run_index(project: Path, out: Path, state: Path, check: bool = True, **replace):
    """`campaign index` as the rule runs it, with some inputs replaced."""
    args = ["index", "--spec", "null", "--state-dir", str(state), "--out", f"index={out}"]
    for name, paths in _stage_inputs(project, **replace).items():
        args += ["--in", f"{name}={paths[0] if paths else ''}", *paths[1:]]
    return campaign(project, *args, check=check)


def _records(project: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (project / ".campaign" / "jobs").glob("*.json")]


def _entry(project: Path, stage: str, output: str) -> dict:
    """The store entry of the job whose record lists `output` (the runner's own record), with
    the key the record names."""
    found = [r for r in _records(project) if r["stage"] == stage and output in r["outputs"]]
    assert len(found) == 1, (stage, output)
    entry = project / ".campaign" / "store" / found[0]["key"] / "entry.json"
    return {**json.loads(entry.read_text()), "record_key": found[0]["key"]}


@pytest.mark.slow
def test_one_row_per_run_variant_and_floor(finished):
    index = pd.read_parquet(finished / INDEX)
    plan = pd.read_csv(finished / "results/plan/runs.tsv", sep="\t")
    variants = pd.read_parquet(finished / "results/quantize/variants.parquet")
    metrics = pd.read_parquet(finished / "results/evaluation/metrics.parquet")
    assert index["name"].is_unique
    runs = index[index["kind"] == "run"].set_index("run")
    assert sorted(runs.index) == sorted(plan["run"]) and (runs["variant"] == "trained").all()
    quantized = index[index["kind"] == "quantized"]
    assert sorted(quantized["name"]) == sorted(variants["run"] + "/" + variants["variant"])
    floors = sorted(v for v in metrics["variant"].unique() if v.startswith("floor/"))
    assert sorted(index[index["kind"] == "floor"]["name"]) == floors and floors
    # Factor levels and seeds as the plan table has them, in columns named like its own.
    factors = list(plan.columns[1 : list(plan.columns).index("seed")])
    assert factors and set(factors) <= set(index.columns)
    for _, p in plan.iterrows():
        assert runs.loc[p["run"], "seed"] == p["seed"]
        for f in factors:
            assert runs.loc[p["run"], f] == p[f]
    summary = json.loads((finished / "results/data/summary.json").read_text())
    assert (index["dataset_hash"] == summary["dataset_hash"]).all()
    # Metrics with intervals for every run (decision metric, both splits), and cost per run.
    for split in ("validation", "test"):
        v, lo, hi = (runs[f"{split}_{k}"] for k in ("value", "ci_low", "ci_high"))
        assert ((lo <= v) & (v <= hi)).all()
    jobs = pd.read_parquet(finished / "results/budget/jobs.parquet").set_index("run")
    assert (runs["cost"] == jobs.loc[runs.index, "cost"]).all() and (runs["hours"] > 0).all()
    assert index.loc[index["kind"] != "run", "cost"].isna().all()
    assert index.loc[index["kind"] != "run", "cost_reason"].notna().all()


@pytest.mark.slow
def test_hashes_and_code_version_match_the_job_records_and_store(finished):
    index = pd.read_parquet(finished / INDEX)
    for _, row in index[index["kind"] == "run"].iterrows():
        entry = _entry(finished, "train", f"results/runs/{row['run']}/model")
        outputs = entry["outputs"]
        assert row["model_hash"] == outputs["model"]["hash"]
        assert row["predictions_validation_hash"] == outputs["predictions_validation"]["hash"]
        assert row["predictions_test_hash"] == outputs["predictions_test"]["hash"]
        assert row["code_version"] == entry["key_material"]["code"]
        assert row["store_key"] == entry["record_key"] and pd.isna(row["store_key_reason"])
        recorded = {s: entry["key_material"]["inputs"][s] for s in ("train", "validation", "test")}
        for s, hashes in recorded.items():
            assert [row[f"{s}_split_hash"]] == hashes
        assert row["split_hash"] == hash_value({s: h[0] for s, h in recorded.items()})
        manifest = json.loads(
            (finished / "results/runs" / row["run"] / "run_manifest.json").read_text()
        )
        assert row["train_precision"] == manifest["spec"]["train"]["precision"]
        assert pd.isna(row["train_base_quantization"])  # the tiny campaign trains fp32 bases
        weights = finished / "results/runs" / row["run"] / "model" / row["weights_file"]
        assert row["weights_hash"] == hash_tree(weights)
    for _, row in index[index["kind"] == "quantized"].iterrows():
        folder = f"results/quantize/{row['run']}/{row['variant']}"
        entry = _entry(finished, "quantize", f"{folder}/result.json")
        assert row["model_hash"] == entry["outputs"]["model"]["hash"]
        assert row["predictions_test_hash"] == entry["outputs"]["predictions_test"]["hash"]
        assert row["store_key"] == entry["record_key"]
        assert row["code_version"] == entry["key_material"]["code"]
        run_row = index[(index["kind"] == "run") & (index["run"] == row["run"])].iloc[0]
        assert row["train_precision"] == run_row["train_precision"]
    # The floor's outputs record no key: null, with the reason, rather than a guess.
    floors = index[index["kind"] == "floor"]
    assert floors["store_key"].isna().all() and floors["store_key_reason"].notna().all()


def _beat_control_independently(project: Path, comparisons: pd.DataFrame) -> list[str]:
    """Runs whose cell the evaluation adopted against the control, from the comparisons table
    and the plan table alone: the cell's moved levels are read from the comparison's name."""
    decisions = json.loads((project / "results/evaluation/decisions.json").read_text())
    plan = pd.read_csv(project / "results/plan/runs.tsv", sep="\t", dtype=str)
    adopted = comparisons[
        (comparisons["kind"] == "cell")
        & (comparisons["split"] == decisions["decide_on"])
        & (comparisons["reference"] == "control")
        & (comparisons["decision"] == "adopt")
    ]
    control = plan[plan["tier"] == "control"].iloc[0]
    factors = list(plan.columns[1 : list(plan.columns).index("seed")])
    out = []
    for subject in adopted["subject"]:
        moved = dict(re.findall(r"(\S+) \S+ -> ([^,]+?)(?:,|\s\(cell\))", subject))
        want = {f: moved.get(f, control[f]) for f in factors}
        out += list(plan[(plan[factors] == pd.Series(want)).all(axis=1)]["run"])
    return sorted(out)


def _readme_example() -> str:
    text = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    section = text.split("\n## The experiment index", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _run_readme(folder: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", _readme_example()],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.slow
def test_readme_query_finds_the_runs_that_beat_the_control(finished, tmp_path):
    comparisons = pd.read_parquet(finished / "results/evaluation/comparisons.parquet")
    index = pd.read_parquet(finished / INDEX)
    # On the campaign as it finished (the code in docs/results.md, literally).
    expected = _beat_control_independently(finished, comparisons)
    out = _run_readme(finished)
    assert f"{len(expected)} run(s) on data " in out
    # The same evaluation with the moved cell adopted: the index must now name its runs.
    decide_on = json.loads((finished / "results/evaluation/decisions.json").read_text())
    cells = (comparisons["kind"] == "cell") & (comparisons["split"] == decide_on["decide_on"])
    assert cells.any()
    comparisons.loc[cells, "decision"] = "adopt"
    changed = tmp_path / "comparisons.parquet"
    comparisons.to_parquet(changed)
    expected = _beat_control_independently(finished, comparisons)
    assert expected  # the moved cell's seeds
    folder = tmp_path / "answer"
    (folder / "results/data").mkdir(parents=True)
    (folder / "results/data/summary.json").write_text(
        (finished / "results/data/summary.json").read_text()
    )
    run_index(finished, folder / INDEX, tmp_path / "state", comparisons=[str(changed)])
    out = _run_readme(folder)
    assert f"{len(expected)} run(s) on data " in out
    assert sorted(re.findall(r"run-[0-9a-f]{12}", out)) == expected
    # Data version X: another data version matches nothing.
    again = pd.read_parquet(folder / INDEX)
    assert again[again["dataset_hash"] == "0" * 64].empty
    assert set(again.columns) == set(index.columns)


@pytest.mark.slow
def test_same_inputs_give_the_same_bytes(finished, tmp_path):
    # Two separate computations (two empty stores), not a store hit.
    run_index(finished, tmp_path / "a.parquet", tmp_path / "state-a")
    run_index(finished, tmp_path / "b.parquet", tmp_path / "state-b")
    a = (tmp_path / "a.parquet").read_bytes()
    assert a == (tmp_path / "b.parquet").read_bytes()
    assert a == (finished / INDEX).read_bytes()
    # A licence edit rewrites the data summary but not its dataset hash: the same key (a hit).
    summary = json.loads((finished / "results/data/summary.json").read_text())
    summary["per_licence"] = {"CC-BY-4.0": summary["records"]}
    relicensed = tmp_path / "summary.json"
    relicensed.write_text(json.dumps(summary))
    out = run_index(
        finished, tmp_path / "c.parquet", tmp_path / "state-a", summary=[str(relicensed)]
    )
    assert "store hit" in out.stdout and (tmp_path / "c.parquet").read_bytes() == a
    summary["dataset_hash"] = "0" * 64
    relicensed.write_text(json.dumps(summary))
    out = run_index(
        finished, tmp_path / "d.parquet", tmp_path / "state-a", summary=[str(relicensed)]
    )
    assert "store miss" in out.stdout
    assert set(pd.read_parquet(tmp_path / "d.parquet")["dataset_hash"]) == {"0" * 64}


@pytest.mark.slow
def test_a_metrics_table_without_ci_low_is_refused_in_one_line(finished, tmp_path):
    metrics = pd.read_parquet(finished / "results/evaluation/metrics.parquet")
    bad = tmp_path / "metrics.parquet"
    metrics.drop(columns=["ci_low"]).to_parquet(bad)
    out = tmp_path / "index.parquet"
    proc = run_index(finished, out, tmp_path / "state", check=False, metrics=[str(bad)])
    assert proc.returncode != 0
    message = proc.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert str(bad) in message and "'ci_low'" in message
    assert not out.exists()


def test_an_appended_run_is_the_campaigns_with_the_look_that_added_it(tmp_path):
    from campaign.core.errors import CampaignError
    from campaign.index.stage import added_at_look
    from campaign.plan.look_runs import campaign_runs

    # a: the plan's; e: appended by look 1 (kept false in runs.tsv, as every candidate); f: a
    # candidate no look asked for.
    (tmp_path / "runs.tsv").write_text(
        "run\tseed\ttier\tkept\na\t1\tcontrol\ttrue\ne\t2\tadaptive\tfalse\nf\t2\tadaptive\tfalse\n"
    )
    looks = [tmp_path / "look_1.json", tmp_path / "look_2.json"]
    looks[0].write_text(
        json.dumps({"look": 1, "runs": ["a", "e"], "appended": ["e"], "final": False})
    )
    looks[1].write_text(json.dumps({"look": 2, "runs": ["a", "e"], "appended": [], "final": True}))
    campaign = campaign_runs(tmp_path / "runs.tsv", looks)
    manifest = Path("results/runs/x/run_manifest.json")
    assert added_at_look(campaign, "e", manifest) == 1
    assert added_at_look(campaign, "a", manifest) is None
    with pytest.raises(CampaignError, match=r"run_manifest.json: run f was trained but no look"):
        added_at_look(campaign, "f", manifest)
