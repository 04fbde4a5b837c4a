"""`python -m campaign` (how every rule runs a stage) ends without the interpreter's teardown
(campaign.core.exiting): what a user or Snakemake reads of the process must be the same as with
sys.exit. Its exit code, every line it printed into a pipe (block-buffered), the exit handlers'
work, and a profiler's output file."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO


def run(*args: str, cwd=REPO, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow")}
    env.pop("CAMPAIGN_PARAMS", None)
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_a_command_prints_all_it_printed_and_exits_as_main_returned() -> None:
    fast = run("-m", "campaign", "plan")
    usual = run("-c", "import sys; from campaign.cli import main; sys.exit(main(['plan']))")
    assert fast.returncode == usual.returncode == 0
    assert fast.stdout == usual.stdout and "what the plan can estimate" in fast.stdout


def test_an_error_exits_2_with_its_one_line(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("campaign: [unclosed\n")
    got = run("-m", "campaign", "validate", extra_env={"CAMPAIGN_PARAMS": str(bad)})
    assert got.returncode == 2
    [line] = got.stderr.strip().splitlines()
    assert line.startswith("error: ") and "bad.yaml" in line


def test_exit_handlers_run_and_the_code_is_kept() -> None:
    code = (
        "import atexit\n"
        "atexit.register(lambda: print('handler ran'))\n"
        "from campaign.core.exiting import exit_without_teardown\n"
        "print('before')\n"
        "exit_without_teardown(3)\n"
        "print('not reached')\n"
    )
    got = run("-c", code)
    assert got.returncode == 3
    assert got.stdout.splitlines() == ["before", "handler ran"]


def test_under_a_profiler_the_profile_is_written(tmp_path) -> None:
    out = tmp_path / "plan.prof"
    got = run("-m", "cProfile", "-o", str(out), "-m", "campaign", "plan")
    assert got.returncode == 0, got.stderr
    assert out.stat().st_size > 0
