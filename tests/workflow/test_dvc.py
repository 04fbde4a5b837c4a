"""DVC: the params dvc.yaml names exist, and a push → fresh clone → pull reruns nothing."""

from __future__ import annotations

import pytest
import yaml

from conftest import BIN, REPO, copy_project, events, result_hashes, run, snakemake


def test_every_param_key_dvc_names_exists_in_params():
    dvc = yaml.safe_load((REPO / "dvc.yaml").read_text())
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    for stage in dvc["stages"].values():
        for key in stage.get("params", []):
            node = params
            for part in key.split("."):
                assert part in node, f"dvc.yaml names params key {key!r}, absent from params.yaml"
                node = node[part]
    # Every section is declared, so a change anywhere in params.yaml makes DVC see the stage stale.
    declared = {k.split(".")[0] for s in dvc["stages"].values() for k in s.get("params", [])}
    assert declared == set(params)


def test_dvc_deps_and_outs_exist_in_the_repo_layout():
    dvc = yaml.safe_load((REPO / "dvc.yaml").read_text())
    for stage in dvc["stages"].values():
        for dep in stage["deps"]:
            assert (REPO / dep).exists(), dep


@pytest.mark.slow
def test_push_clone_pull_then_snakemake_has_zero_store_misses(tmp_path):
    project = copy_project(tmp_path / "project")
    dvc = str(BIN / "dvc")
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid"]
    run(["git", "init", "-q"], project)
    run([*git, "add", "-A"], project)
    run([*git, "commit", "-qm", "project"], project)
    run([dvc, "repro"], project, timeout=600)
    assert sum(e["event"] == "miss" for e in events(project)) > 0
    run([dvc, "remote", "add", "-d", "shared", str(tmp_path / "remote")], project)
    run([*git, "add", "-A"], project)
    run([*git, "commit", "-qm", "campaign results"], project)
    run([dvc, "push"], project)

    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(project), str(clone)], tmp_path)
    assert not (clone / ".campaign" / "store").exists()
    run([dvc, "pull"], clone)
    assert (clone / ".campaign" / "store").is_dir()
    snakemake(clone)
    assert [e for e in events(clone) if e["event"] == "miss"] == []
    assert result_hashes(clone) == result_hashes(project)
    # No job records in a pulled checkout: gc still keeps every entry its outputs came from.
    gc = run([str(BIN / "python"), "-m", "campaign", "gc", "--dry-run"], clone)
    assert "would remove 0 entries" in gc.stdout, gc.stdout
    status = run([dvc, "status"], clone)
    assert "up to date" in status.stdout.lower() or status.stdout.strip() == "", status.stdout
