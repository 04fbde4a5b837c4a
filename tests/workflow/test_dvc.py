"""DVC: the params dvc.yaml names exist, and a push → fresh clone → pull reruns nothing."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from conftest import (
    BIN,
    REPO,
    copy_project,
    events,
    planned_jobs,
    result_hashes,
    run,
    snakemake,
    warm_store,
)


def test_dvc_tracks_all_params_and_whole_output_folders():
    dvc = yaml.safe_load((REPO / "dvc.yaml").read_text())
    stage = dvc["stages"]["campaign"]
    # All of params.yaml: a change anywhere makes DVC see the stage stale, and a new section
    # needs no edit here.
    assert stage["params"] == [{"params.yaml": None}]
    outs = [next(iter(o)) for o in stage["outs"]]
    assert outs == ["results", ".campaign/store"]
    assert dvc["metrics"] == ["results/metrics.json"]
    for dep in stage["deps"]:
        assert (REPO / dep).exists(), dep


@pytest.fixture(autouse=True)
def _own_dvc_config(tmp_path, monkeypatch):
    """The machine's global and system DVC config (a cache link type, a remote) stay out of the
    test: the repository's .dvc/config is the whole configuration."""
    for name in ("DVC_GLOBAL_CONFIG_DIR", "DVC_SYSTEM_CONFIG_DIR"):
        folder = tmp_path / name.lower()
        folder.mkdir()
        monkeypatch.setenv(name, str(folder))


def diagnosis(clone, first) -> str:
    """What a failure needs to be understood: the first run's jobs, DVC's configuration, and
    inode, link count and mtime of the files the reruns were about."""
    listing = subprocess.run(
        "find results .campaign/store -type f -printf '%T@ %i %n %p\\n' | sort | tail -n 120",
        shell=True,
        cwd=clone,
        capture_output=True,
        text=True,
    ).stdout
    config = run([str(BIN / "dvc"), "config", "-l", "--show-origin"], clone, check=False)
    return (
        f"\n--- first run\n{first.stdout[-4000:]}\n{first.stderr[-6000:]}\n--- dvc config\n"
        f"{config.stdout}\n--- files by mtime\n{listing}\n--- env DVC\n"
        f"{ {k: v for k, v in os.environ.items() if k.startswith('DVC')} }"
    )


@pytest.mark.slow(minutes=4)
def test_the_readme_sharing_path_literally(tmp_path, finished_campaign):
    """demo.sh -> dvc remote add + dvc push -> commit -> fresh clone -> dvc pull -> snakemake
    --forceall with zero store misses -> snakemake -n has nothing to do; dvc status is clean
    throughout."""
    project = copy_project(tmp_path / "project")
    # demo.sh runs the tiny campaign (the project's params), with the session's run of it in the
    # store (conftest.warm_store) but for the data stages, which it computes: what is shared
    # and pulled is the store and the results either way, and the minutes of preflight and
    # training are hits.
    assert warm_store(project, finished_campaign, cold=frozenset({"manifest", "split"}))
    (project / ".venv").symlink_to(REPO / ".venv")  # setup.sh finds it installed
    dvc = str(BIN / "dvc")
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid"]
    run(["git", "init", "-q"], project)
    run([*git, "add", "-A"], project)
    run([*git, "commit", "-qm", "project"], project)

    demo = run(["bash", "scripts/demo.sh", "--cores", "2"], project, timeout=900)
    assert "recorded in dvc.lock" in demo.stdout
    assert sum(e["event"] == "miss" for e in events(project)) > 0
    status = run([dvc, "status"], project)
    assert "up to date" in status.stdout.lower(), status.stdout
    run([dvc, "remote", "add", "-d", "shared", str(tmp_path / "remote")], project)
    push = run([dvc, "push"], project)
    assert "pushed" in push.stdout.lower() and "0 files pushed" not in push.stdout.lower()
    run([*git, "add", "dvc.lock", ".dvc/config"], project)
    run([*git, "commit", "-qm", "campaign results"], project)
    assert run(["git", "status", "--porcelain"], project).stdout == ""

    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(project), str(clone)], tmp_path)
    assert not (clone / ".campaign" / "store").exists()
    run([dvc, "pull"], clone)
    assert (clone / ".campaign" / "store").is_dir()
    # This clone's own editable install (its metadata differs from the first checkout's, or is
    # absent there): not a dependency of the campaign stage (.dvcignore), so dvc status stays clean.
    egg = clone / "workflow" / "campaign.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: campaign\nVersion: 0+clone\n")
    first = snakemake(clone, "--forceall")  # docs/integrations.md: the step after a pull
    assert [e for e in events(clone) if e["event"] == "miss"] == []
    again = snakemake(clone, "-n")
    assert planned_jobs(again) == [], again.stdout + diagnosis(clone, first)
    assert result_hashes(clone) == result_hashes(project)
    status = run([dvc, "status"], clone)
    assert "up to date" in status.stdout.lower(), status.stdout
    # No job records in a pulled checkout: gc still keeps every entry its outputs came from.
    gc = run([str(BIN / "python"), "-m", "campaign", "gc", "--dry-run"], clone)
    assert "would remove 0 entries" in gc.stdout, gc.stdout
