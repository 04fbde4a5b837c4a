"""The preflight report: run the checks, collect their results, decide whether the campaign may
spend money, and write the report as text."""

from __future__ import annotations

import contextlib
import io
import math
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from campaign.core.errors import CampaignError
from campaign.core.fsutil import remove_tree
from campaign.preflight import checks
from campaign.preflight.bench import Bench, Hooks, Result
from campaign.preflight.config import check_config
from campaign.train import read_data

COULD_NOT_RUN = "could not run: "


def _jsonable(value: Any) -> Any:
    """Plain JSON types; non-finite floats become the strings "nan", "inf", "-inf"."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        v = float(value)
        return v if math.isfinite(v) else str(v)
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _run_one(name: str, bench: Bench, blocking: bool) -> dict:
    t0 = time.perf_counter()
    try:
        result = checks.load()[name].run(bench)
    except CampaignError as e:
        result = Result(False, f"{COULD_NOT_RUN}{e}", {"error": str(e)})
    except Exception as e:  # a crash inside a check is a failed check with its traceback
        result = Result(
            False,
            f"{COULD_NOT_RUN}{type(e).__name__}: {e}",
            {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=8)},
        )
    summary = " ".join(result.summary.split())
    return {
        "passed": bool(result.passed),
        "blocking": blocking,
        "summary": summary,
        "details": _jsonable(result.details),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def run_preflight(
    spec: dict,
    data: dict[str, list[Path]],
    cfg: dict,
    work_dir: Path,
    root: Path,
    *,
    only: Sequence[str] | None = None,
    hooks: Hooks | None = None,
    stream=None,
) -> dict:
    """Run the checks on the baseline run `spec` ({model, train, seed}) and its split files.

    data: {"train", "validation", "test": [Parquet paths]} (and "base_model" for a pretrained
    source). Returns {check: {passed, blocking, summary, details, seconds}, ..., "passed"}:
    "passed" is False when a blocking check failed. `only` runs a subset (in report order).
    """
    check_config(cfg)
    order = list(checks.load())
    unknown = [c for c in only or () if c not in order]
    if unknown:
        raise CampaignError(f"preflight: unknown check {unknown[0]!r} (known: {', '.join(order)})")
    base = data.get("base_model")
    bench = Bench(
        spec,
        read_data(data),
        cfg,
        work_dir,
        root,
        Path(base[0]) if base else None,
        hooks or Hooks(),
        io.StringIO() if stream is None else stream,
    )
    report: dict[str, Any] = {}
    try:
        for name in order:
            if only is None or name in only:
                report[name] = _run_one(name, bench, name in cfg["blocking"])
    finally:
        with contextlib.suppress(OSError):
            remove_tree(Path(work_dir) / "preflight")
    report["passed"] = not failed_blocking(report)
    return report


def split_report(report: dict) -> tuple[dict, dict]:
    """(stable, measurements): what the checks decided and found that is the same on every
    identical run (verdicts, exact byte counts, losses on the CPU), and what differs between two
    identical runs (timings, process memory peaks, free disk, host facts, summaries quoting them,
    tracebacks). A check names its varying detail keys in its module's `VOLATILE`."""
    loaded = checks.load()
    stable: dict[str, Any] = {"passed": report["passed"]}
    measured: dict[str, Any] = {}
    for name in loaded:
        if name not in report:
            continue
        check = report[name]
        volatile = {*getattr(loaded[name], "VOLATILE", ()), "traceback"}
        details = check["details"]
        stable[name] = {
            "passed": check["passed"],
            "blocking": check["blocking"],
            "details": {k: v for k, v in details.items() if k not in volatile},
        }
        measured[name] = {
            "summary": check["summary"],
            "seconds": check["seconds"],
            "details": {k: v for k, v in details.items() if k in volatile},
        }
    return stable, measured


def failed_blocking(report: dict) -> list[str]:
    return [
        n
        for n in checks.load()
        if n in report and report[n]["blocking"] and not report[n]["passed"]
    ]


def check_report(report: dict) -> None:
    """Raise CampaignError (one line: each failed blocking check and its summary), if any.

    Checks that could not run for the reason another one failed (a Trainer that cannot be built
    fails them all) are named once, after that reason.
    """
    failed = failed_blocking(report)
    if not failed:
        return
    groups: dict[str, list[str]] = {}
    for name in failed:
        reason = report[name]["summary"].removeprefix(COULD_NOT_RUN)
        groups.setdefault(reason, []).append(name)
    parts = []
    for names in groups.values():
        first, rest = names[0], names[1:]
        also = f" (so {', '.join(rest)} could not run)" if rest else ""
        summary = report[first]["summary"]
        parts.append(f"{first}: {summary}{also}")
    raise CampaignError(f"preflight failed ({len(failed)} blocking): {'; '.join(parts)}")


def format_report(report: dict) -> str:
    """The report as text: a verdict, one line per check, then each check's detail."""
    loaded = checks.load()
    names = [n for n in loaded if n in report]
    failed = failed_blocking(report)
    verdict = "PASSED" if not failed else f"FAILED ({', '.join(failed)})"
    width = max((len(n) for n in names), default=0)
    lines = [f"preflight: {verdict}"]
    for n in names:
        c = report[n]
        mark = "pass" if c["passed"] else ("FAIL" if c["blocking"] else "fail")
        lines.append(f"  {mark}  {n.ljust(width)}  {c['summary']}")
    for n in names:
        details = report[n]["details"]
        describe = getattr(loaded[n], "describe", None)
        body = describe(details) if describe is not None and "error" not in details else []
        body += details.get("traceback", "").rstrip().splitlines()
        if body:
            lines += ["", f"== {n} =="] + body
    return "\n".join(lines)
