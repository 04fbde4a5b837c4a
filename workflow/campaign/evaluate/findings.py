"""What the evaluation says a user must act on: cells not shown above the floor, skipped
variants."""

from __future__ import annotations

from campaign.core.registry import produced
from campaign.core.stage import From
from campaign.evaluate import decide
from campaign.evaluate.records import decisions_from_dict


def evaluation_findings(decisions: dict) -> list[str]:
    """Cells not shown to beat the reference floor; quantized variants that were skipped
    (`decisions`: decisions.json's object, read through its records)."""
    d = decisions_from_dict(decisions)
    out = []
    for flag in d.below_floor:
        out.append(
            f"evaluation: {flag.cell} {flag.verdict} ({flag.floor}: "
            f"{100 * (flag.estimate or 0):+.1f} points "
            f"[{100 * (flag.ci_low or 0):.1f}, {100 * (flag.ci_high or 0):.1f}])"
        )
    for row in d.decisions:
        if row.decision == decide.CANARY_MISSED:
            out.append(
                f"evaluation: the canary {row.subject} was not rejected: the "
                f"scores cannot tell its broken model from {row.reference}'s; do not trust "
                "their verdict on variants"
            )
    if d.skipped_variants:
        where = produced(From("evaluate", "decisions")).path
        out.append(
            f"evaluation: {len(d.skipped_variants)} quantized variant(s) skipped; see {where}"
        )
    return out
