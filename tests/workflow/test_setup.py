"""scripts/setup.sh: a wrong Python stops it in one line before anything is made, and a failed
install leaves no half-made .venv for the next run to reuse."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO


def setup_copy(tmp_path: Path, pyproject: str | None = None) -> Path:
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup.sh", project / "scripts" / "setup.sh")
    text = pyproject if pyproject is not None else (REPO / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text)
    return project


def run_setup(project: Path, python: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "scripts/setup.sh"],
        cwd=project,
        env={"PATH": "/usr/bin:/bin", "PYTHON": python, "HOME": str(project)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_wrong_python_stops_in_one_line_and_makes_nothing(tmp_path):
    project = setup_copy(tmp_path)
    fake = tmp_path / "python3.12"
    fake.write_text("#!/bin/sh\necho 3.12\n")  # answers the version question like Python 3.12
    fake.chmod(0o755)
    out = run_setup(project, str(fake))
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"setup: needs Python 3.11, but {fake} is Python 3.12; set PYTHON=python3.11"
    ]
    assert not (project / ".venv").exists()
    missing = run_setup(project, "python3.99")
    assert missing.returncode == 2 and "python3.99 not found" in missing.stderr


@pytest.mark.slow
def test_a_failed_install_removes_the_new_venv_and_an_unfinished_one_is_not_reused(tmp_path):
    broken = (
        (REPO / "pyproject.toml")
        .read_text()
        .replace('"torch==2.13.0"', '"campaign-no-such-package-on-any-index==0.0.1"')
    )
    project = setup_copy(tmp_path, broken)
    # An unfinished .venv from an earlier run: a venv without the stamp of a finished install.
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")], check=True
    )
    (project / ".venv" / "marker").write_text("left by an interrupted setup")
    out = run_setup(project, sys.executable, timeout=600)
    assert out.returncode != 0
    assert "removing an unfinished .venv" in out.stdout
    assert "removed the new .venv so the next run starts clean" in out.stderr
    assert not (project / ".venv").exists()
