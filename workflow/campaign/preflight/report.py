"""The preflight report: run the checks, collect their results, decide whether the campaign may
spend money, and write the report as text.

With workers > 1 (on a CPU) the checks run two at a time, the second in a spawned process that
takes the next check from the same queue; a check that times the training step (`ALONE` in its
module: throughput, whose rate feeds the forecast) runs last, after the other process has ended,
so it times a step with a training job's threads on otherwise idle cores. Each check builds its
own Trainer from the seeded sample, so the report is the same, byte for byte, either way.
"""

from __future__ import annotations

import contextlib
import io
import math
import multiprocessing
import queue
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from campaign.core.errors import CampaignError
from campaign.core.exiting import exit_without_teardown
from campaign.core.fsutil import remove_tree
from campaign.preflight import checks
from campaign.preflight.bench import Bench, Hooks, Result
from campaign.preflight.config import check_config
from campaign.preflight.tokenizer_folder import tokenizer_problem
from campaign.train import read_data

COULD_NOT_RUN = "could not run: "
# The order two processes take the checks in, longest first (CPU seconds on the demo: memory
# 20, overfit 13, resume 7, environment 4, disk 2, grad_accumulation 1, tokenization 1). The
# spawned process, which starts a few seconds late (its imports), takes the first; this one
# starts on the second. Checks not listed follow in report order. Results are keyed by check,
# so the order changes no byte of the report, only the time to it (28.6 s to about 26 s).
TWO_AT_A_TIME_ORDER = (
    "overfit",
    "memory",
    "resume",
    "environment",
    "disk",
    "grad_accumulation",
    "tokenization",
)
_WAIT_S = 1.0  # how often the main process looks whether the other one is still alive


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


def _run_one(name: str, bench: Bench, blocking: bool, process: int = 1) -> dict:
    """One check's entry of the report; `process`: which of the job's processes ran it."""
    t0, cpu0 = time.perf_counter(), time.process_time()
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
        "cpu_seconds": round(time.process_time() - cpu0, 3),  # of its process
        "process": process,
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
    workers: int = 1,
    execution: dict | None = None,
    builtin_generates: bool = False,
) -> dict:
    """Run the checks on the baseline run `spec` ({model, train, seed}) and its split files.

    data: {"train", "validation", "test": [Parquet paths]} (and "base_model" for a pretrained
    source). Returns {check: {passed, blocking, summary, details, seconds}, ..., "passed"}:
    "passed" is False when a blocking check failed. `only` runs a subset (in report order).
    workers: how many checks run at once (2 at most; 1 with test hooks or on CUDA, where the
    card is one); `execution`: the settings the second process pins (the job's);
    `builtin_generates`: a built-in run is planned beside a command baseline (the memory check
    then holds the optimizer state in the generate phase).
    """
    check_config(cfg)
    base = data.get("base_model")
    if base and (problem := tokenizer_problem(Path(base[0]))) is not None:
        raise CampaignError(f"model.source: {base[0]} {problem}")  # before any check runs
    loaded = checks.load()
    order = list(loaded)
    unknown = [c for c in only or () if c not in order]
    if unknown:
        raise CampaignError(f"preflight: unknown check {unknown[0]!r} (known: {', '.join(order)})")
    bench = Bench(
        spec,
        read_data(data),
        cfg,
        work_dir,
        root,
        Path(base[0]) if base else None,
        hooks or Hooks(),
        io.StringIO() if stream is None else stream,
        builtin_generates,
    )
    wanted = [n for n in order if only is None or n in only]
    alone = [n for n in wanted if getattr(loaded[n], "ALONE", False)]
    shared = [n for n in wanted if n not in alone]
    parallel = workers > 1 and hooks is None and bench.device.type == "cpu" and len(shared) > 1
    results: dict[str, dict] = {}
    try:
        if (refused := _refused_first(bench, wanted)) is not None:
            return refused
        if parallel:
            args = (spec, data, cfg, Path(work_dir), Path(root), execution, stream is sys.stderr,
                    builtin_generates)  # fmt: skip
            rank = {n: i for i, n in enumerate(TWO_AT_A_TIME_ORDER)}
            by_cost = sorted(shared, key=lambda n: rank.get(n, len(rank)))  # stable: report order
            results.update(_run_two_at_a_time(by_cost, bench, args))
        else:
            results.update({n: _run_one(n, bench, n in cfg["blocking"]) for n in shared})
        results.update({n: _run_one(n, bench, n in cfg["blocking"]) for n in alone})
    finally:
        with contextlib.suppress(OSError):
            remove_tree(Path(work_dir) / "preflight")
    report: dict[str, Any] = {n: results[n] for n in wanted}
    report["passed"] = not failed_blocking(report)
    return report


def _refused_first(bench: Bench, wanted: list[str]) -> dict | None:
    """The report of a run whose generation passes the model's positions (the memory check's
    refusal, blocking whatever preflight.blocking says: no run could generate there), every
    other check not run; None when the bound holds. Asked before any check generates."""
    from campaign.preflight.checks.memory import positions_refusal

    t0 = time.perf_counter()
    try:
        refusal = positions_refusal(bench)
    except Exception:  # noqa: BLE001 - no Trainer, nothing generates: each check says why
        return None
    if refusal is None:
        return None
    summary, details = refusal
    entry = {"blocking": True, "seconds": round(time.perf_counter() - t0, 3), "process": 1}
    report: dict[str, Any] = {"memory": {**entry, "passed": False, "summary": summary,
                                         "details": _jsonable(details)}}  # fmt: skip
    for name in wanted:
        if name != "memory":
            report[name] = {
                "passed": False,
                "blocking": name in bench.cfg["blocking"],
                "summary": f"{COULD_NOT_RUN}{summary}",
                "details": {"error": summary},
                "seconds": 0.0,
                "process": 1,
            }
    report = {n: report[n] for n in checks.load() if n in report}
    report["passed"] = False
    return report


def _run_two_at_a_time(names: list[str], bench: Bench, args: tuple) -> dict[str, dict]:
    """{check: result} of `names`, run by this process and a spawned one (a fork would copy
    torch's thread pools: spawn starts clean). The spawned one runs the first check (this one
    starts on the second while it imports), then each takes the next name from one queue."""
    context = multiprocessing.get_context("spawn")
    tasks, done = context.Queue(), context.Queue()
    for name in names[1:]:
        tasks.put(name)
    for _ in range(2):
        tasks.put(None)  # one end mark for each process
    other = context.Process(target=_worker, args=(*args, names[0], tasks, done), daemon=True)
    other.start()
    results: dict[str, dict] = {}
    try:
        while (name := tasks.get()) is not None:
            results[name] = _run_one(name, bench, name in bench.cfg["blocking"])
        while len(results) < len(names):
            try:
                name, result = done.get(timeout=_WAIT_S)
                results[name] = result
            except queue.Empty:
                if other.is_alive():
                    continue
                with contextlib.suppress(queue.Empty):  # its last results may still be queued
                    while True:
                        name, result = done.get(timeout=_WAIT_S)
                        results[name] = result
                break
    finally:
        other.join(timeout=_WAIT_S)
        if other.is_alive():
            other.terminate()
            other.join()
    lost = [name for name in names if name not in results]
    if lost:  # the other process ended before its checks did: run them here, as if alone
        print(
            f"preflight: the second process exited (code {other.exitcode}) before "
            f"{', '.join(lost)}; running them in this process",
            file=sys.stderr,
            flush=True,
        )
    for name in lost:
        results[name] = _run_one(name, bench, name in bench.cfg["blocking"])
    return results


def _worker(spec, data, cfg, work_dir, root, execution, to_stderr, builtin, first, tasks, done):
    """The second process: pin the job's execution settings, build its own Bench (its scratch
    folders apart from the first process's), run `first`, then checks until the end mark."""
    if execution is not None:
        from campaign.preflight import execution as preflight_execution

        preflight_execution.pin(execution)
    base = data.get("base_model")
    bench = Bench(
        spec,
        read_data(data),
        cfg,
        work_dir / "preflight" / "second",
        root,
        Path(base[0]) if base else None,
        Hooks(),
        sys.stderr if to_stderr else io.StringIO(),
        builtin,
    )
    name = first
    while name is not None:
        done.put((name, _run_one(name, bench, name in cfg["blocking"], process=2)))
        name = tasks.get()
    # Its results flushed into the pipe, the process ends without the interpreter's teardown
    # (about 2 s of CPU after torch and transformers), which the first process would wait for
    # before it times the throughput check alone.
    done.close()
    done.join_thread()
    exit_without_teardown(0)


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
            "cpu_seconds": check.get("cpu_seconds"),
            "process": check.get("process", 1),
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
