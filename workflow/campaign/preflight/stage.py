"""The preflight stage: the checks on the baseline recipe, before any training job."""

from __future__ import annotations

import json
import sys

from campaign.core.fsutil import atomic_write_text
from campaign.preflight import execution
from campaign.preflight.report import check_report, format_report, run_preflight, split_report
from campaign.train import lease_from_env


def stage(ctx) -> None:
    """Stage entry (campaign.core.runner): ctx.spec = {run, preflight}; inputs train,
    validation, test (and base_model); outputs report (JSON: verdicts and exact findings),
    measurements (JSON: timings, memory peaks, free disk, host facts, the summaries) and
    report_text (both together, readable). The checks run as many at a time as the job holds
    cores (campaign.preflight.execution: workers), each on ctx.execution's threads.

    Every output is written and the text printed before a failed blocking check raises, so the
    stage log keeps the report of a failed preflight.
    """
    spec = ctx.spec
    lease = lease_from_env()  # a card by lock, like a training job; before CUDA starts
    try:
        report = run_preflight(
            spec["run"],
            ctx.inputs,
            spec["preflight"],
            ctx.work_dir,
            ctx.root,
            stream=sys.stderr,
            workers=execution.workers(),
            execution=ctx.execution,
            builtin_generates=spec.get("builtin_generates", False),
        )
    finally:
        lease.release()
    text = format_report(report)
    stable, measured = split_report(report)
    for name, value in (("report", stable), ("measurements", measured)):
        atomic_write_text(ctx.outputs[name], json.dumps(value, indent=2, sort_keys=True) + "\n")
    atomic_write_text(ctx.outputs["report_text"], text + "\n")
    print(text, flush=True)
    check_report(report)
