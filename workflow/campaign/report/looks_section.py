"""The report's section on an adaptive campaign's looks (decisions.json adaptive_looks, the
evaluation's words for them): what each look found open, what it added or stopped and why, and
the runs and hours against the fixed design. Kept in its own module so the report's list of
sections gains it in one line."""

from __future__ import annotations

from campaign.report.sections import Section


def looks_section(decisions: dict) -> list[Section]:
    """[the section] for an adaptive campaign, [] for a fixed one."""
    lines = decisions.get("adaptive_looks") or []
    if not lines:
        return []
    return [Section("looks", "4. Evaluation: adaptive looks", pre="\n".join(lines))]
