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
    return out + _spelled_special_tokens(report)


def _spelled_special_tokens(report: dict) -> list[str]:
    """Records whose text spells a special token of the run's tokenizer, as the tokenization
    check found them in the whole data (campaign.data.control_tokens), under any policy."""
    from campaign.data import special_token_findings

    details = (report.get("tokenization") or {}).get("details") or {}
    return special_token_findings(details.get("special_tokens"))
