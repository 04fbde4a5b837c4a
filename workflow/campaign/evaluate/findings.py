"""What the evaluation says a user must act on: cells not shown above the floor, skipped
variants."""

from __future__ import annotations

from campaign.core.registry import produced
from campaign.core.stage import From


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
        where = produced(From("evaluate", "decisions")).path
        out.append(f"evaluation: {len(skipped)} quantized variant(s) skipped; see {where}")
    return out
