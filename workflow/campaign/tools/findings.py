"""`campaign findings`: what a user must act on, in one short block at the end of a run.

Read from the phases' reports, whichever exist, as each phase declares them (`Phase.findings`:
the files, and the function here or in the phase that words them): privacy findings by kind
(the data phase's privacy report and its scan of the produced artifacts), leakage audit
problems, failed preflight checks (blocking: failures; the others: warnings), evaluation flags
(cells not shown to beat the reference floor, variants skipped). The Snakefile's
onsuccess/onerror handlers run it; it only reads JSON and the phases' declarations (no heavy
imports), and a report it cannot read is one line in the block, never an error.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# The reports the lines point to, relative to the project folder (the paths the stages declare).
PRIVACY = "results/data/privacy_report.json"
ARTIFACTS = "results/data/artifact_findings.json"
DECISIONS = "results/evaluation/decisions.json"


def _read(path: Path) -> dict | None:
    if not path.exists():
        return None
    value = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


def privacy_findings(report: dict) -> list[str]:
    """`privacy: 15 of 3000 records hold findings (api_key 11, email 4)`; nothing when clean."""
    kinds = {k: v.get("findings", 0) for k, v in report.get("kinds", {}).items()}
    found = {k: n for k, n in sorted(kinds.items()) if n}
    if not found and not report.get("n_flagged"):
        return []
    shown = ", ".join(f"{k} {n}" for k, n in found.items())
    return [
        f"privacy: {report.get('n_flagged', 0)} of {report.get('n_records', '?')} records hold "
        f"findings ({shown}); see {PRIVACY}"
    ]


def artifact_findings(report: dict) -> list[str]:
    """`privacy: 2 of 9 artifacts hold findings (email 3)`: secrets that reached an output."""
    if not report.get("flagged"):
        return []
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.get("findings_by_kind", {}).items()))
    return [
        f"privacy: {report['flagged']} of {report.get('scanned', '?')} artifacts hold findings "
        f"({kinds}); see {ARTIFACTS}"
    ]


def preflight_findings(report: dict, measured: dict | None) -> list[str]:
    """One line per failed check: FAILED (blocking) or warning (not blocking), with its summary."""
    out = []
    for name, check in report.items():
        if not isinstance(check, dict) or check.get("passed", True):
            continue
        summary = check.get("summary") or (measured or {}).get(name, {}).get("summary", "")
        kind = "FAILED" if check.get("blocking") else "warning"
        out.append(f"preflight {kind}: {name}" + (f": {summary}" if summary else ""))
    return out


def audit_findings(audit: dict) -> list[str]:
    """Leaks across splits, balance outside tolerance, labels absent from train."""
    leaks = audit.get("leaks", {})
    out = []
    groups = leaks.get("groups_in_several_splits", 0)
    if groups:
        out.append(f"leakage audit: {groups} group(s) are in more than one split")
    exact, near = leaks.get("cross_split_exact_pairs", 0), leaks.get("cross_split_near_pairs", 0)
    if exact or near:
        out.append(f"leakage audit: duplicate pairs across splits (exact {exact}, near {near})")
    labels, sizes = audit.get("labels", {}), audit.get("sizes", {})
    if labels.get("within_tolerance") is False:
        worst = labels.get("max_deviation", {})
        out.append(
            f"leakage audit: label {worst.get('label')!r} off its overall share in "
            f"{worst.get('split')} by {worst.get('value', 0):.3f} (outside tolerance)"
        )
    if sizes.get("within_tolerance") is False:
        worst = sizes.get("max_deviation", {})
        out.append(
            f"leakage audit: split {worst.get('split')!r} off its target size by "
            f"{worst.get('value', 0):.3f} (outside tolerance)"
        )
    if labels.get("missing_from_train"):
        out.append(f"leakage audit: label(s) absent from train: {labels['missing_from_train']}")
    return out


def evaluation_findings(decisions: dict) -> list[str]:
    """Cells not shown to beat the reference floor; quantized variants that were skipped."""
    out = []
    for flag in decisions.get("below_floor", []):
        out.append(
            f"evaluation: {flag.get('cell')} {flag.get('verdict', 'below the floor')} "
            f"({flag.get('floor')}: {100 * flag.get('estimate', 0):+.1f} points "
            f"[{100 * flag.get('ci_low', 0):.1f}, {100 * flag.get('ci_high', 0):.1f}])"
        )
    skipped = decisions.get("skipped_variants") or []
    if skipped:
        out.append(f"evaluation: {len(skipped)} quantized variant(s) skipped; see {DECISIONS}")
    return out


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
