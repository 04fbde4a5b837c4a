"""Bad input through the real commands: one line naming the problem, non-zero exit, no outputs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from test_manifest import BAD_DATA

from campaign.cli import main
from conftest import FIXTURES, copy_project, events, snakemake

BAD_PARAMS = {
    "broken_yaml.yaml": "broken_yaml.yaml line 50: not valid YAML",
    "cutoff_without_temporal.yaml": "split.temporal_cutoff: only used by method 'temporal'",
    "fractions_sum_above_one.yaml": "split.fractions: sum to 1.1, expected 1",
    "split_without_test.yaml": "split.fractions.test: missing required key",
    "unknown_privacy_policy.yaml": "data.privacy: expected one of report, redact, fail",
    "campaign_name_with_spaces.yaml": "campaign.name: must match",
    "factor_not_a_list.yaml": "ablation.factors.train.lr: expected a list of numbers; got number",
    "factor_outside_train_and_model.yaml": "ablation.factors.optimizer: unknown key",
    "missing_licence.yaml": "data.sources[0].licence: missing required key",
    "no_seeds.yaml": "ablation.seeds: must list at least 1 item",
    "not_a_mapping.yaml": "not_a_mapping.yaml: expected a mapping of sections",
    "plan_exceeds_max_runs.yaml": "ablation.max_runs: the plan has 4 runs (2 cells × 2 seeds)",
    "source_matches_nothing.yaml": "data.sources[0].path: no file matches 'data/raw/missing-",
    "unknown_format.yaml": "data.sources[0].format: expected one of csv, jsonl, parquet",
    "unknown_precision.yaml": "train.precision: expected one of fp32, bf16, fp16; got string 'fp8'",
    "unknown_train_key.yaml": "train.momentum: unknown key",
    "yaml_float_as_text.yaml": "ablation.factors.train.lr[0]: expected a number; got string '1e-3'",
    "zero_micro_batch.yaml": "train.micro_batch: must be >= 1; got 0",
}


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    return code, err


def test_bad_params_table_covers_the_corpus():
    assert sorted(BAD_PARAMS) == sorted(p.name for p in (FIXTURES / "bad_params").iterdir())


@pytest.mark.parametrize("name", sorted(BAD_PARAMS))
def test_bad_params_file(capsys, monkeypatch, name):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    code, err = run_cli(capsys, "validate", "--params", f"tests/fixtures/bad_params/{name}")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert BAD_PARAMS[name] in lines[0]


@pytest.fixture(scope="module")
def bad_project(tmp_path_factory) -> Path:
    project = copy_project(tmp_path_factory.mktemp("bad") / "project")
    shutil.copytree(FIXTURES / "bad_data", project / "bad_data")
    return project


@pytest.mark.parametrize("name", sorted(BAD_DATA))
def test_bad_data_file_through_the_stage_command(capsys, monkeypatch, bad_project, name):
    monkeypatch.chdir(bad_project)
    params = yaml.safe_load((bad_project / "params.yaml").read_text())
    params["data"]["sources"] = [
        {
            "path": f"bad_data/{name}",
            "format": Path(name).suffix[1:],
            "licence": "CC0-1.0",
            "origin": "test fixture",
        }
    ]
    params["campaign"]["state_dir"] = f"state-{name}"
    Path(f"{name}.yaml").write_text(yaml.safe_dump(params))
    out = Path("out") / name
    code, err = run_cli(
        capsys,
        "manifest",
        "--params",
        f"{name}.yaml",
        "--in",
        f"sources=bad_data/{name}",
        "--out",
        f"manifest={out}/manifest.parquet",
        "--out",
        f"summary={out}/summary.json",
        "--out",
        f"diff={out}/diff.json",
    )
    assert code == 2
    lines = err.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0] == f"error: bad_data/{name}{BAD_DATA[name]}"
        or (lines[0].startswith(f"error: bad_data/{name}{BAD_DATA[name]}"))
    ), err
    assert not out.exists() or not any(out.iterdir()), "partial output left behind"
    state = Path(f"state-{name}")
    assert not (state / "store").exists() or not any((state / "store").iterdir())
    failed = list((state / "jobs").glob("*.json"))
    assert failed and '"state":"failed"' in failed[0].read_text()


@pytest.mark.slow
def test_snakemake_run_on_bad_data_stops_with_the_error_and_keeps_nothing(tiny_project):
    bad = tiny_project / "data" / "raw" / "demo.jsonl"
    lines = bad.read_text().splitlines()
    lines[41] = lines[41].replace('"label":', '"lable":')
    bad.write_text("\n".join(lines) + "\n")
    proc = snakemake(tiny_project, check=False)
    assert proc.returncode != 0
    assert "error: data/raw/demo.jsonl line 42: field 'label' is missing" in proc.stderr
    assert not (tiny_project / "results" / "data").exists() or not any(
        (tiny_project / "results" / "data").iterdir()
    )
    # Independent jobs (the run specs) may finish and stay in the store; the manifest may not.
    stages = {e["stage"] for e in events(tiny_project) if e["event"] == "commit"}
    assert "manifest" not in stages
    assert any(e["stage"] == "manifest" and e["event"] == "fail" for e in events(tiny_project))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["zero_micro_batch.yaml", "source_matches_nothing.yaml"])
def test_snakemake_refuses_bad_params_in_one_line(tiny_project, name):
    shutil.copy(FIXTURES / "bad_params" / name, tiny_project / "params.yaml")
    proc = snakemake(tiny_project, "-n", check=False)
    assert proc.returncode != 0
    errors = {line for line in proc.stderr.splitlines() if line.startswith("error: ")}
    assert len(errors) == 1 and BAD_PARAMS[name] in errors.pop(), proc.stderr
