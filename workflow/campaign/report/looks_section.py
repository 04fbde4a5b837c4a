"""The report's section on an adaptive campaign's looks (decisions.json adaptive_looks, the
evaluation's words for them): what each look found open, what it added or stopped and why, and
the runs and hours against the fixed design. The evaluate phase declares it (ReportSection
"looks"); a fixed campaign has no looks, and the report no such section."""

from __future__ import annotations

from campaign.core.stage import Section


def render_looks(inputs) -> Section | None:
    """The section for an adaptive campaign, None for a fixed one."""
    lines = inputs.decisions().get("adaptive_looks") or []
    if not lines:
        return None
    return Section(pre="\n".join(lines))
