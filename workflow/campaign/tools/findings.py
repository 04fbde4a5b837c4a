"""`campaign findings`: what a user must act on, in one short block at the end of a run.

Read from the phases' reports, whichever exist, as each phase declares them (`Phase.findings`:
the files, and the function in the phase's `findings.py` that words them): privacy findings by kind
(the data phase's privacy report and its scan of the produced artifacts), leakage audit
problems, failed preflight checks (blocking: failures; the others: warnings), evaluation flags
(cells not shown to beat the reference floor, variants skipped). The Snakefile's
onsuccess/onerror handlers run it; it only reads JSON and the phases' declarations (no heavy
imports), and a report it cannot read is one line in the block, never an error.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from campaign.core.io import read_json


def _read(path: Path) -> dict | None:
    """A phase's report, or None where the campaign has not written it yet."""
    return read_json(path) if path.exists() else None


STALE_AFTER_S = 3600.0


def _age(path: Path, now: float | None = None) -> str:
    """' (written N h ago)' for a report older than an hour: after a failed or partial run, a
    report the run did not rewrite may describe other params; the user sees how old it is."""
    import time

    try:
        age = (time.time() if now is None else now) - path.stat().st_mtime
    except OSError:
        return ""
    if age < STALE_AFTER_S:
        return ""
    return (
        f" (written {age / 3600:.0f} h ago)"
        if age < 86400 * 2
        else (f" (written {age / 86400:.0f} days ago)")
    )


def findings(root: Path = Path(".")) -> list[str]:
    """Every finding line, in DAG order; a report that cannot be read is a line too."""
    from campaign.core.io import resolve
    from campaign.core.registry import phases, produced

    lines: list[str] = []
    for declared in (f for phase in phases() for f in phase.findings):
        first, *rest = (produced(ref).path for ref in declared.reads.values())
        try:
            report = _read(root / first)
            if report is not None:
                others = [_read(root / rel) for rel in rest]
                described = resolve(declared.describe)(report, *others)
                lines += [line + _age(root / first) for line in described]
        except Exception as e:  # a finding about the report itself, never a crash
            lines.append(f"{first}: could not read ({type(e).__name__}: {e})")
    return lines


def findings_block(root: Path = Path(".")) -> str:
    lines = findings(root)
    if not lines:
        return "campaign findings: none to act on"
    body = "\n".join(f"  {line}" for line in lines)
    return f"campaign findings ({len(lines)} to act on):\n{body}"


def after_run(command: str, stream=None) -> None:
    """The Snakefile's onsuccess/onerror handler: run `<command> findings` (command: the shell
    line that runs `campaign`) and print its block. Never raises: a successful run must not fail
    for its epilogue, so any problem is one line."""
    stream = sys.stderr if stream is None else stream
    try:
        proc = subprocess.run(
            f"{command} findings", shell=True, capture_output=True, text=True, timeout=120
        )
        if proc.returncode == 0:
            print(proc.stdout.rstrip(), file=stream, flush=True)
        else:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            print(f"campaign findings: failed ({last})", file=stream, flush=True)
    except Exception as e:
        print(f"campaign findings: could not run ({type(e).__name__}: {e})", file=stream)
