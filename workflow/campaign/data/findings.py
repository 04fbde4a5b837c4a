"""What the data phase says a user must act on (`campaign findings`, the end of every run, the
report's verdict): privacy findings in the text and in what was made from it, leakage audit
problems. Light: JSON in, lines out.
"""

from __future__ import annotations

from campaign.core.registry import produced
from campaign.core.stage import From


def _path(stage: str, output: str) -> str:
    """Where a finding's report is, as its stage declares it."""
    return produced(From(stage, output)).path


def privacy_findings(report: dict) -> list[str]:
    """`privacy: 15 of 3000 records hold findings (api_key 11, email 4)`; nothing when clean."""
    kinds = {k: v.get("findings", 0) for k, v in report.get("kinds", {}).items()}
    found = {k: n for k, n in sorted(kinds.items()) if n}
    if not found and not report.get("n_flagged"):
        return []
    shown = ", ".join(f"{k} {n}" for k, n in found.items())
    return [
        f"privacy: {report.get('n_flagged', 0)} of {report.get('n_records', '?')} records hold "
        f"findings ({shown}); see {_path('split', 'privacy')}"
    ]


def artifact_findings(report: dict) -> list[str]:
    """`privacy: 2 of 9 artifacts hold findings (email 3)`: secrets that reached an output."""
    if not report.get("flagged"):
        return []
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.get("findings_by_kind", {}).items()))
    return [
        f"privacy: {report['flagged']} of {report.get('scanned', '?')} artifacts hold findings "
        f"({kinds}); see {_path('artifact_scan', 'findings')}"
    ]


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
