"""The split stage through its command: privacy policies, the audit policy, owner-only outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from campaign.cli import main
from campaign.tools.demo_data import DEFAULT_N_RECORDS, DEFAULT_SEED, generate_corpus_with_truth
from conftest import FIXTURES, copy_project, snakemake

OUTPUTS = ("train", "validation", "test", "audit", "audit_table", "privacy")


@pytest.fixture(scope="module")
def secrets() -> dict[str, str]:
    truth = generate_corpus_with_truth(DEFAULT_SEED, DEFAULT_N_RECORDS)[1]
    return {rid: value for rid, (_kind, value) in truth["secrets"].items()}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return copy_project(tmp_path_factory.mktemp("split") / "project")


def run_split(
    capsys, project: Path, name: str, extra_in: tuple[str, ...] = (), **changes
) -> tuple[int, str, dict[str, Path]]:
    params = yaml.safe_load((FIXTURES / "tiny_params.yaml").read_text())
    for dotted, value in changes.items():
        node = params
        *head, last = dotted.split("__")
        for part in head:
            node = node[part]
        node[last] = value
    params["campaign"]["state_dir"] = f"state-{name}"
    (project / f"{name}.yaml").write_text(yaml.safe_dump(params))
    outputs = {o: project / "out" / name / o for o in OUTPUTS}
    argv = [
        "split",
        "--params",
        f"{name}.yaml",
        "--in",
        "sources=data/raw/demo.jsonl",
        *[x for i in extra_in for x in ("--in", i)],
        "--log",
        f"out/{name}.log",
    ]
    for o, path in outputs.items():
        argv += ["--out", f"{o}={path}"]
    import os

    cwd = os.getcwd()
    os.chdir(project)
    try:
        code = main(argv)
    finally:
        os.chdir(cwd)
    return code, capsys.readouterr().err, outputs


def all_output_bytes(outputs: dict[str, Path]) -> bytes:
    return b"".join(p.read_bytes() for p in outputs.values())


def test_report_counts_without_revealing(capsys, project, secrets):
    code, err, outputs = run_split(capsys, project, "report")
    assert code == 0, err
    report = json.loads(outputs["privacy"].read_text())
    assert sorted(report["flagged_ids"]) == sorted(secrets)
    blob = outputs["privacy"].read_bytes() + outputs["audit"].read_bytes()
    assert not [v for v in secrets.values() if v.encode() in blob]
    log = (project / "out" / "report.log").read_text()
    assert not [v for v in secrets.values() if v in log]
    # The split files keep the text under `report`.
    texts = {
        r["id"]: r["text"]
        for o in ("train", "validation", "test")
        for r in pq.read_table(outputs[o]).to_pylist()
    }
    assert all(secrets[i] in texts[i] for i in secrets)
    assert (
        sum(pq.read_metadata(outputs[o]).num_rows for o in ("train", "validation", "test")) == 3000
    )


def test_redact_masks_every_secret_in_the_split_files(capsys, project, secrets):
    code, err, outputs = run_split(capsys, project, "redact", data__privacy="redact")
    assert code == 0, err
    blob = all_output_bytes(outputs)
    assert not [v for v in secrets.values() if v.encode() in blob]
    texts = {
        r["id"]: r["text"]
        for o in ("train", "validation", "test")
        for r in pq.read_table(outputs[o]).to_pylist()
    }
    assert all("[REDACTED:" in texts[i] for i in secrets)


def test_fail_policy_stops_with_one_line_and_no_output(capsys, project, secrets):
    code, err, outputs = run_split(capsys, project, "fail", data__privacy="fail")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: data.privacy is 'fail' for api_key, credit_card, email")
    assert ": 15 records contain secrets" in lines[0]
    assert not any(p.exists() for p in outputs.values())


def test_audit_policy_violation_fails_and_the_log_keeps_the_audit(tmp_path):
    project = copy_project(tmp_path / "project")
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["split"]["stratify_tolerance"] = 0.01
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    proc = snakemake(project, check=False)
    assert proc.returncode != 0
    # One distinct error line (Snakemake also shows it again inside the failed job's log).
    errors = {line for line in proc.stderr.splitlines() if line.startswith("error: ")}
    assert len(errors) == 1 and "split.stratify_tolerance 0.01" in errors.pop(), proc.stderr
    assert not (project / "results" / "data" / "splits").exists() or not any(
        (project / "results" / "data" / "splits").iterdir()
    )
    log = (project / "logs" / "split" / "split.log").read_text()
    assert "max |share - overall|" in log  # the evidence stays in the stage log


def test_split_outputs_are_owner_only(capsys, project):
    code, err, outputs = run_split(capsys, project, "modes")
    assert code == 0, err
    for path in outputs.values():
        assert path.stat().st_mode & 0o077 == 0


def test_previous_split_gives_the_moved_record_report(capsys, project):
    """split.previous names an earlier run's split files: the audit then compares (params
    changed: the salt), and the split files carry the evaluation slice columns."""
    code, err, outputs = run_split(capsys, project, "before")
    assert code == 0, err
    previous = project / "previous-split"
    previous.mkdir()
    for name in ("train", "validation", "test"):
        (previous / f"{name}.parquet").write_bytes(outputs[name].read_bytes())
    code, err, outputs = run_split(
        capsys,
        project,
        "after",
        extra_in=("previous=previous-split",),
        split__previous="previous-split",
        split__salt="another",
        split__stratify_tolerance=1.0,
        split__size_tolerance=1.0,
    )
    assert code == 0, err
    audit = json.loads(outputs["audit"].read_text())
    assert audit["moved"]["compared"] == 3000 and audit["moved"]["by_reason"].keys() == {"params"}
    columns = pq.read_table(outputs["test"]).column_names
    assert columns == ["id", "text", "label", "group", "source", "unit", "duplicate_cluster"]
