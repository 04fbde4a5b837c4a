"""Bad input through the real commands: one line naming the problem, non-zero exit, no outputs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from test_manifest import BAD_DATA

from campaign.cli import main
from conftest import FIXTURES, copy_project, events, snakemake

# Malformed params files, each one problem: (text to replace in tiny_params.yaml, replacement,
# what the one-line error must say). Built from the tiny campaign so they stay valid elsewhere.
BAD_PARAMS = {
    "broken_yaml": ("  max_steps: 20", "  max_steps: [20", "not valid YAML (expected ','"),
    "campaign_name_with_spaces": ("  name: tiny", "  name: my tiny", "campaign.name: must match"),
    "cutoff_without_temporal": (
        "  temporal_cutoff: null",
        '  temporal_cutoff: "2024-01-01"',
        "split.temporal_cutoff: only used by method 'temporal'",
    ),
    "factor_not_a_list": (
        "      lr: [1.0e-3, 3.0e-3]",
        "      lr: 1.0e-3",
        "ablation.factors.train.lr: expected a list of numbers; got number",
    ),
    "factor_outside_train_and_model": (
        "      lr: [1.0e-3, 3.0e-3]",
        "      lr: [1.0e-3, 3.0e-3]\n    optimizer:\n      name: [adam]",
        "ablation.factors.optimizer: unknown key",
    ),
    "fractions_sum_above_one": (
        "test: 0.1}",
        "test: 0.2}",
        "split.fractions: sum to 1.1, expected 1",
    ),
    "missing_licence": (
        "      licence: CC0-1.0\n",
        "",
        "data.sources[0].licence: missing required key",
    ),
    "no_seeds": ("  seeds: [1, 2]", "  seeds: []", "ablation.seeds: must list at least 1 item"),
    "cells_without_design_explicit": (
        "  explicit: {cells: null}",
        "  explicit: {cells: [{train.lr: 1.0e-3}]}",
        "ablation.explicit.cells: only used by design 'explicit'",
    ),
    "source_matches_nothing": (
        "    - path: data/raw/demo.jsonl",
        "    - path: data/raw/missing-*.jsonl",
        "data.sources[0].path: no file matches 'data/raw/missing-",
    ),
    "split_without_test": (
        "validation: 0.1, test: 0.1}",
        "validation: 0.2}",
        "split.fractions.test: missing required key",
    ),
    "unknown_format": (
        "      format: jsonl",
        "      format: xlsx",
        "data.sources[0].format: expected one of csv, jsonl, parquet",
    ),
    "unknown_precision": (
        "  precision: fp32",
        "  precision: fp8",
        "train.precision: expected one of fp32, bf16, fp16; got string 'fp8'",
    ),
    "unknown_privacy_policy": (
        "  privacy: report",
        "  privacy: ignore",
        "data.privacy: expected one of report, redact, fail",
    ),
    "unknown_train_key": (
        "  lr: 1.0e-3\n",
        "  lr: 1.0e-3\n  momentum: 0.9\n",
        "train.momentum: unknown key",
    ),
    "warmup_longer_than_training": (
        "  warmup_steps: 2",
        "  warmup_steps: 50",
        "train.warmup_steps: 50 is more than train.max_steps (20)",
    ),
    "yaml_float_as_text": (
        "      lr: [1.0e-3, 3.0e-3]",
        "      lr: [1e-3, 3e-3]",
        "ablation.factors.train.lr[0]: expected a number; got string '1e-3'",
    ),
    "zero_micro_batch": (
        "  micro_batch: 8",
        "  micro_batch: 0",
        "train.micro_batch: must be >= 1; got 0",
    ),
    "causal_lm_on_an_encoder": (
        "  task: sequence_classification",
        "  task: causal_lm",
        "model.config.architecture: causal_lm needs gpt2",
    ),
    "not_a_mapping": (None, "just a string\n", "expected a mapping of sections"),
}


def write_bad_params(folder: Path, name: str) -> Path:
    old, new, _ = BAD_PARAMS[name]
    text = (FIXTURES / "tiny_params.yaml").read_text()
    if old is None:
        text = new
    else:
        assert text.count(old) == 1, f"{name}: {old!r} must occur once in tiny_params.yaml"
        text = text.replace(old, new)
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    return code, err


def test_tiny_params_are_valid(capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    code, err = run_cli(capsys, "validate", "--params", "tests/fixtures/tiny_params.yaml")
    assert code == 0, err


@pytest.mark.parametrize("name", sorted(BAD_PARAMS))
def test_bad_params_file(capsys, monkeypatch, tmp_path, name):
    path = write_bad_params(tmp_path, name)
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    code, err = run_cli(capsys, "validate", "--params", str(path))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}"), err
    assert BAD_PARAMS[name][2] in lines[0]


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
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: bad_data/{name}{BAD_DATA[name]}"), err
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
@pytest.mark.parametrize("name", ["zero_micro_batch", "source_matches_nothing"])
def test_snakemake_refuses_bad_params_in_one_line(tiny_project, name):
    shutil.copy(write_bad_params(tiny_project, name), tiny_project / "params.yaml")
    proc = snakemake(tiny_project, "-n", check=False)
    assert proc.returncode != 0
    errors = {line for line in proc.stderr.splitlines() if line.startswith("error: ")}
    assert len(errors) == 1 and BAD_PARAMS[name][2] in errors.pop(), proc.stderr


@pytest.mark.parametrize(
    "args, expected",
    [
        (("--configfile", "other.yaml"), "name the campaign with CAMPAIGN_PARAMS=other.yaml"),
        (("--config", "campaign={name: x}"), "--config: edit the params file instead"),
    ],
)
def test_snakemake_takes_the_campaign_from_campaign_params_only(tiny_project, args, expected):
    """One name for the params file: a --configfile other than CAMPAIGN_PARAMS, or --config
    overrides, would make Snakemake run a campaign that `campaign status` does not read."""
    shutil.copy(tiny_project / "params.yaml", tiny_project / "other.yaml")
    proc = snakemake(tiny_project, "-n", *args, check=False)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and expected in errors[0], proc.stderr
