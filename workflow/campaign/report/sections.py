"""The report's sections, from a finished campaign's files: each section is a title, sentences,
tables and (for most) the data of one figure. Reading is strict: a missing file, a garbled one or
a missing column is one CampaignError naming the file and what was expected.
"""

from __future__ import annotations

from pathlib import Path

from campaign.budget import split_verdict
from campaign.core.io import read_text
from campaign.core.stage import Section
from campaign.evaluate import (
    ACT_PREFIX,
    NO_FINDINGS,
    VERDICT_TITLE,
    evaluation_verdict,
    finding_lines,
    verdict_block,
)


def verdict_section(summary_path: Path, decisions, findings: list[str]) -> Section:
    """The verdict block, first in the report: the budget's (with the costs), as its summary.txt
    opens with it (from a budget summary without one, the evaluation's `decisions`, records of
    campaign.evaluate.records), its
    findings replaced by `findings`, every finding the report's inputs hold (the budget's block
    knows the preflight's and the evaluation's; the data phase's privacy and leakage ones too)."""
    block = split_verdict(read_text(summary_path))[0]
    if not block:
        block = verdict_block(evaluation_verdict(decisions, [], "not measured"))
    cut = next(
        (i for i, line in enumerate(block) if line.strip().startswith((ACT_PREFIX, NO_FINDINGS))),
        len(block),
    )
    scope = block[0].removeprefix(VERDICT_TITLE).strip(" ()")
    lines = [scope[:1].upper() + scope[1:] + ".", *block[1:cut], *finding_lines(findings)]
    return Section([line.strip() for line in lines])
