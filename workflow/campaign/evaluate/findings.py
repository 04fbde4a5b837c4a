"""What the evaluation says a user must act on, for `campaign findings` and the report: the
lines words.evaluation_flags words (cells not shown above the floor, canaries not rejected,
skipped variants) from decisions.json's records."""

from __future__ import annotations

from campaign.evaluate.records import decisions_from_dict
from campaign.evaluate.words import evaluation_flags


def evaluation_findings(decisions: dict) -> list[str]:
    """`decisions`: decisions.json's object (the findings registry hands each phase its files'
    JSON), read through its records and worded by words.evaluation_flags."""
    return evaluation_flags(decisions_from_dict(decisions))
