"""Helpers for the phases' stage declarations: inputs that take one stage's outputs by their own
names, and outputs that sit in one folder, each spelled once."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from campaign.core.stage import File, From


def files_in(folder: str, *files: str, **named: str) -> dict[str, File]:
    """{name: File(folder/file)}: a stage's outputs that sit in one folder, each file given by
    its name (`metrics.parquet` is the output `metrics`), then those named otherwise
    (`report_text="report.txt"`), in that order (the order of the rule's --out arguments)."""
    pairs = [(PurePosixPath(file).stem, file) for file in files] + list(named.items())
    return {name: File(f"{folder}/{file}") for name, file in pairs}


def outputs_of(stage: str, *names: str, each: type = From) -> dict[str, Any]:
    """{name: each(stage, name)}: inputs named as the outputs of `stage` they are, in the order
    given; `each` is the reference (From one job, EachRun one per run, ...)."""
    return {name: each(stage, name) for name in names}
