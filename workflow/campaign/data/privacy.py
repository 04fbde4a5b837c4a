"""Privacy scanner: find secrets and personal data in text (and in the artifacts a campaign
writes), report where they are (never what they are), and redact them.

What counts as each kind is documented in ``campaign.data.detectors``. Overlapping findings are
resolved by kind (private_key > message_id > api_key > iban > credit_card > email > phone),
then by length, so every character is in at most one finding.

A finding holds positions only; the report holds kinds, counts and record ids. Neither ever holds
the matched text, so both can be written to logs and results. Policies are per kind:
``data.privacy`` for every kind, ``data.privacy_by_kind`` for the kinds named there (e.g.
``message_id: report``: a Message-ID is no mailbox, but says who wrote to whom and when).

Measured on real public text (tests/data/test_privacy_real.py, hand-labelled findings of a
sample of Debian's fortune files and package changelogs; the labels are committed, the text is
fetched by scripts/corpora): see that test for precision and recall per kind.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from campaign.core.errors import CampaignError
from campaign.data.detectors import (
    _cards,
    _emails,
    _ibans,
    _message_ids,
    _phones,
    _private_keys,
    _tokens,
    card_number_plausible,
    iban_valid,
    luhn_valid,
    phone_valid,
)

__all__ = [
    "KINDS",
    "POLICIES",
    "Finding",
    "PrivacyReport",
    "apply_policy",
    "card_number_plausible",
    "iban_valid",
    "luhn_valid",
    "phone_valid",
    "redact_text",
    "scan_records",
    "scan_text",
]

KINDS = ("api_key", "credit_card", "email", "iban", "message_id", "phone", "private_key")
POLICIES = ("report", "redact", "fail")
_PRIORITY = {
    "private_key": 0,
    "message_id": 1,
    "api_key": 2,
    "iban": 3,
    "credit_card": 4,
    "email": 5,
    "phone": 6,
}
_FAIL_IDS_SHOWN = 5


@dataclass(frozen=True)
class Finding:
    """One detected secret or piece of personal data: ``text[start:end]`` is of this kind."""

    kind: str
    start: int
    end: int


# --- scanning and redaction ------------------------------------------------------------------


def scan_text(text: str) -> list[Finding]:
    """Every secret and piece of personal data in ``text``, non-overlapping, sorted by start.

    Positions are indices into the ``str`` (code points), as ``text[start:end]`` uses them.
    """
    candidates = list(_private_keys(text))
    for _, start, end in candidates:
        # Blank the key out (same length, so positions hold) so its body is not scanned again.
        text = text[:start] + " " * (end - start) + text[end:]
    candidates += _tokens(text)
    n_digits = sum(map(text.count, "0123456789"))
    if n_digits >= 2:
        candidates += _ibans(text)
    if n_digits >= 13:
        candidates += _cards(text)
    if "@" in text:
        candidates += _emails(text)
        candidates += _message_ids(text)
    if n_digits >= 8:
        candidates += _phones(text)
    if not candidates:
        return []
    candidates.sort(key=lambda c: (_PRIORITY[c[0]], c[1] - c[2], c[1]))
    taken: list[tuple[int, int]] = []
    findings = []
    for kind, start, end in candidates:
        if all(end <= s or start >= e for s, e in taken):
            taken.append((start, end))
            findings.append(Finding(kind, start, end))
    findings.sort(key=lambda f: f.start)
    return findings


def redact_text(text: str, findings: Sequence[Finding] | None = None) -> str:
    """``text`` with each finding replaced by ``[REDACTED:<kind>]``.

    ``findings`` default to ``scan_text(text)``; overlapping ones are merged (the first one's
    kind names the merged span), so every character of every finding is removed.
    """
    if findings is None:
        findings = scan_text(text)
    if not findings:
        return text
    parts, pos = [], 0
    merged: list[list] = []
    for f in sorted(findings, key=lambda f: (f.start, -f.end)):
        if merged and f.start < merged[-1][2]:
            merged[-1][2] = max(merged[-1][2], f.end)
        else:
            merged.append([f.kind, f.start, f.end])
    for kind, start, end in merged:
        parts.append(text[pos:start])
        parts.append(f"[REDACTED:{kind}]")
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


@dataclass(frozen=True)
class PrivacyReport:
    """What a scan of many records found, by record and by kind; never the values.

    ``findings[i]`` are the findings in the record with id ``ids[i]``.
    """

    ids: tuple[str, ...]
    findings: tuple[tuple[Finding, ...], ...]

    @property
    def n_records(self) -> int:
        return len(self.ids)

    @cached_property
    def flagged_ids(self) -> list[str]:
        """Ids of the records with at least one finding, sorted."""
        return sorted({rid for rid, fs in zip(self.ids, self.findings, strict=True) if fs})

    @property
    def n_flagged(self) -> int:
        return len(self.flagged_ids)

    @cached_property
    def ids_by_kind(self) -> dict[str, list[str]]:
        """Kind -> sorted ids of the records with a finding of that kind (every kind present)."""
        by_kind: dict[str, set[str]] = {kind: set() for kind in KINDS}
        for rid, fs in zip(self.ids, self.findings, strict=True):
            for f in fs:
                by_kind[f.kind].add(rid)
        return {kind: sorted(ids) for kind, ids in by_kind.items()}

    @cached_property
    def findings_by_kind(self) -> dict[str, int]:
        """Kind -> number of findings (a record may hold several)."""
        counts = Counter(f.kind for fs in self.findings for f in fs)
        return {kind: counts.get(kind, 0) for kind in KINDS}

    def as_dict(self) -> dict:
        """JSON-able summary: counts and record ids per kind; no positions, no values."""
        return {
            "n_records": self.n_records,
            "n_flagged": self.n_flagged,
            "flagged_ids": self.flagged_ids,
            "kinds": {
                kind: {
                    "records": len(self.ids_by_kind[kind]),
                    "findings": self.findings_by_kind[kind],
                    "ids": self.ids_by_kind[kind],
                }
                for kind in KINDS
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, sort_keys=True) + "\n"


def scan_records(ids: Sequence[str], texts: Sequence[str]) -> PrivacyReport:
    """Scan record texts; ``ids[i]`` names ``texts[i]``."""
    if len(ids) != len(texts):
        raise ValueError(f"{len(ids)} ids but {len(texts)} texts")
    return PrivacyReport(tuple(ids), tuple(tuple(scan_text(t)) for t in texts))


def policies(policy: str | Mapping[str, str]) -> dict[str, str]:
    """kind -> policy for every kind: ``policy`` is ``data.privacy`` (one policy for all), or
    ``{"default": data.privacy, kind: policy, ...}`` (``data.privacy_by_kind`` over it).
    Raises CampaignError naming the key on an unknown policy or kind."""
    if isinstance(policy, str):
        policy = {"default": policy}
    default = policy.get("default")
    if default not in POLICIES:
        raise CampaignError(f"data.privacy must be one of {', '.join(POLICIES)}, got {default!r}")
    out = dict.fromkeys(KINDS, default)
    for kind, value in policy.items():
        if kind == "default":
            continue
        if kind not in KINDS:
            raise CampaignError(
                f"data.privacy_by_kind.{kind}: unknown kind; expected one of {', '.join(KINDS)}"
            )
        if value not in POLICIES:
            raise CampaignError(
                f"data.privacy_by_kind.{kind}: must be one of {', '.join(POLICIES)}, got {value!r}"
            )
        out[kind] = value
    return out


def failure_message(report: PrivacyReport, kinds: Sequence[str] = KINDS) -> str:
    """One line: how many records hold a finding of ``kinds``, counts per kind, the first ids."""
    by_kind = {k: ids for k, ids in report.ids_by_kind.items() if k in kinds and ids}
    flagged = sorted(set().union(*by_kind.values())) if by_kind else []
    counts = ", ".join(f"{kind}: {len(ids)}" for kind, ids in by_kind.items())
    shown = flagged[:_FAIL_IDS_SHOWN]
    more = ", ..." if len(flagged) > len(shown) else ""
    noun = "record contains" if len(flagged) == 1 else "records contain"
    what = (
        "data.privacy is 'fail'"
        if set(kinds) == set(KINDS)
        else (f"data.privacy is 'fail' for {', '.join(k for k in KINDS if k in kinds)}")
    )
    return (
        f"{what}: {len(flagged)} {noun} secrets or personal data "
        f"({counts}; first ids: {', '.join(shown)}{more})"
    )


def apply_policy(
    policy: str | Mapping[str, str], texts: Sequence[str], report: PrivacyReport
) -> list[str]:
    """The texts to use under the privacy policies (``policies``): a kind under ``report`` is
    kept, under ``redact`` masked, under ``fail`` raises CampaignError when found.

    ``report`` must be ``scan_records`` of these texts.
    """
    per_kind = policies(policy)
    if len(texts) != report.n_records:
        raise ValueError(f"{len(texts)} texts but the report covers {report.n_records} records")
    failing = [k for k in KINDS if per_kind[k] == "fail" and report.ids_by_kind[k]]
    if failing:
        fail_kinds = [k for k in KINDS if per_kind[k] == "fail"]
        raise CampaignError(failure_message(report, fail_kinds))
    masked = {k for k in KINDS if per_kind[k] == "redact"}
    if not masked:
        return list(texts)
    out = []
    for text, findings in zip(texts, report.findings, strict=True):
        chosen = [f for f in findings if f.kind in masked]
        out.append(redact_text(text, chosen) if chosen else text)
    return out
