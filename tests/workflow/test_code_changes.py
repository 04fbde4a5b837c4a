"""A stage's code version is its import closure, docstrings and comments aside: an edit that
cannot change what the code does reruns nothing; a real edit reruns exactly the stages that run
that code, and `campaign gc` then drops the entries the old code made."""

from __future__ import annotations

import pytest

from conftest import campaign, events, planned_jobs, snakemake

pytestmark = pytest.mark.slow


def edit(path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_docstring_edit_reruns_nothing_code_edit_reruns_its_stage_and_gc_drops_old(
    finished_project,
):
    package = finished_project / "workflow" / "campaign"

    # Comments and docstrings in the training loop (part of every training job's code): nothing.
    loop = package / "train" / "loop.py"
    edit(loop, '"""The training loop:', '"""The training loop (docstring edited):')
    edit(loop, "\nimport functools\n", "\n# a comment added by the test\nimport functools\n")
    dry = snakemake(finished_project, "-n")
    assert planned_jobs(dry) == [], dry.stdout

    # A real edit of the metrics stage's module: that stage alone reruns (and `all`).
    metrics = package / "report" / "metrics.py"
    edit(metrics, "\ndef stage(ctx)", "\nEDITED = True\n\n\ndef stage(ctx)")
    dry = snakemake(finished_project, "-n")
    assert [rule for rule, _ in planned_jobs(dry)] == ["all", "metrics"], dry.stdout
    n_events = len(events(finished_project))
    snakemake(finished_project)
    new = events(finished_project)[n_events:]
    assert [(e["event"], e["stage"]) for e in new] == [("miss", "metrics"), ("commit", "metrics")]

    # The entry the old metrics code made can never be hit again: gc lists it, and only it.
    dry = campaign(finished_project, "gc", "--dry-run")
    assert "would remove 1 entries" in dry.stdout, dry.stdout
    assert "metrics" in next(line for line in dry.stdout.splitlines() if "would remove " in line)
