"""Helpers for the phases' declarations: inputs that take one stage's outputs by their own
names, outputs that sit in one folder, each spelled once, and report sections rendered by
`render_<key>` of the phase's section module."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import PurePosixPath
from typing import Any

from campaign.core.stage import File, From, Input, ReportSection


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


def sections_by(module: str, figure: str | None = None) -> Callable[..., ReportSection]:
    """section(key, title, order, inputs, figure=...) -> the ReportSection rendered by
    `module`:render_<key> (a phase's section module names each renderer after its section),
    its figure filed under the phase's category `figure` unless the call names another (None:
    the section has no figure)."""

    def section(
        key: str, title: str, order: int, inputs: Mapping[str, Input], figure=figure
    ) -> ReportSection:
        return ReportSection(key, title, order, f"{module}:render_{key}", inputs, figure)

    return section


def tables_in(folder: str, *tables: str) -> dict[str, File]:
    """{<table>_csv: folder/<table>.csv, <table>_parquet: folder/<table>.parquet}: tables a
    stage writes both as CSV (for a person) and Parquet (for the stages that read them), in the
    order given, each table's CSV first."""
    return {
        f"{table}_{kind}": File(f"{folder}/{table}.{kind}")
        for table in tables
        for kind in ("csv", "parquet")
    }
