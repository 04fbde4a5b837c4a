"""Lint clean: ruff, snakefmt --check, and snakemake --lint; the rules' conda environment pins
the same libraries as pyproject.toml."""

import re
import subprocess

from conftest import BIN, REPO, env


def run_tool(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / cmd[0]), *cmd[1:]],
        cwd=REPO,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ruff():
    proc = run_tool("ruff", "check", ".")
    assert proc.returncode == 0, proc.stdout
    proc = run_tool("ruff", "format", "--check", ".")
    assert proc.returncode == 0, proc.stdout


def test_snakefmt():
    proc = run_tool("snakefmt", "--check", "Snakefile", "workflow/rules")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_snakemake_lint():
    proc = run_tool("snakemake", "--lint")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations, your workflow is in a good condition!" in proc.stdout + proc.stderr
    assert not re.findall(r"^Lints for ", proc.stdout + proc.stderr, flags=re.M)


def test_the_conda_environment_pins_what_pyproject_pins():
    import tomllib

    import yaml

    pins = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((REPO / "workflow" / "envs" / "campaign.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip == pins
    assert "python=3.11" in env["dependencies"]
