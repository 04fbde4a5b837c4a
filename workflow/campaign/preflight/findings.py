"""What the preflight says a user must act on: each failed check, FAILED when it blocks."""

from __future__ import annotations


def preflight_findings(report: dict, measured: dict | None) -> list[str]:
    """One line per failed check: FAILED (blocking) or warning (not blocking), with its summary."""
    out = []
    for name, check in report.items():
        if not isinstance(check, dict) or check.get("passed", True):
            continue
        summary = check.get("summary") or (measured or {}).get(name, {}).get("summary", "")
        kind = "FAILED" if check.get("blocking") else "warning"
        out.append(f"preflight {kind}: {name}" + (f": {summary}" if summary else ""))
    return out + special_token_findings(report)


def special_token_findings(report: dict) -> list[str]:
    """Records whose text spells a special token of the run's tokenizer, as the tokenization
    check found them in the whole data (campaign.data.control_tokens), under any policy."""
    from campaign.data.control_tokens import finding_lines

    details = (report.get("tokenization") or {}).get("details") or {}
    return finding_lines(details.get("special_tokens"))
