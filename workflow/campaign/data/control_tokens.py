"""Control-token text in the data: a record whose text spells one of the tokenizer's special
tokens ('<|endoftext|>', '<|im_start|>') becomes that token when tokenized, not text: an EOS in
the middle of an answer (the model learns to stop there), a forged turn inside a prompt. This
module finds such records (record, turn, token) and applies data.special_tokens:
- refuse: one line naming the file, the record, the field and the token; nothing is trained;
- escape: the data's text tokenizes as text (campaign/tasks/generation/chat.py; the template's own
  control tokens stay real);
- keep: tokenized as the tokenizer does it (the token acts as the token), recorded as a finding.
Pure: the tokenizer is passed in (only its special-token strings are read).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from campaign.core.errors import CampaignError

POLICIES = ("refuse", "escape", "keep")
DEFAULT_POLICY = "refuse"

# The records a report shows by name; the counts cover all of them.
MAX_SHOWN = 20


@dataclass(frozen=True)
class Hit:
    """One field of one record that spells a special token: `where` names the file and record
    ("data/raw/chat.jsonl record r7"), `field` the turn ("messages[2].content")."""

    where: str
    field: str
    token: str


def special_strings(tokenizer) -> tuple[str, ...]:
    """The strings the tokenizer turns into special tokens: its named special tokens and every
    added token marked special; longest first (so '<|im_start|>' is named, not a prefix)."""
    found = {str(t) for t in getattr(tokenizer, "all_special_tokens", None) or ()}
    for token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        if getattr(token, "special", False):
            found.add(str(token))
    return tuple(sorted((s for s in found if s), key=lambda s: (-len(s), s)))


def pattern(strings: Sequence[str]) -> re.Pattern | None:
    """A regex matching any of `strings` (longest first), or None when there are none."""
    return re.compile("|".join(map(re.escape, strings))) if strings else None


def find(conversations: Iterable[tuple[str, Sequence[dict]]], strings: Sequence[str]) -> list:
    """Every (record, turn) whose content spells a special token, in order, naming the first
    token it holds. `conversations`: (where, messages) pairs."""
    regex = pattern(strings)
    if regex is None:
        return []
    hits = []
    for where, messages in conversations:
        for i, message in enumerate(messages):
            match = regex.search(message["content"])
            if match:
                hits.append(Hit(where, f"messages[{i}].content", match[0]))
    return hits


def refusal(hit: Hit) -> str:
    return (
        f"{hit.where}: field {hit.field} holds {hit.token!r}, a special token of the "
        "tokenizer: tokenized, it becomes that control token, not text; data.special_tokens: "
        "refuse (escape: tokenize the data's text as text; keep: let it act as the token)"
    )


def apply(hits: Sequence[Hit], policy: str) -> None:
    """Refuse (one line, the first hit) under data.special_tokens: refuse; else nothing."""
    if policy not in POLICIES:
        raise CampaignError(f"data.special_tokens: {policy!r} is not one of {', '.join(POLICIES)}")
    if hits and policy == "refuse":
        raise CampaignError(refusal(hits[0]))


def summary(hits: Sequence[Hit], n_records: int, policy: str) -> dict:
    """What a report records: the policy, how many records and fields spell a special token,
    per token, and the first MAX_SHOWN fields by name."""
    return {
        "policy": policy,
        "records_checked": n_records,
        "records": len({h.where for h in hits}),
        "fields": len(hits),
        "per_token": dict(sorted(Counter(h.token for h in hits).items())),
        "shown": [{"record": h.where, "field": h.field, "token": h.token} for h in hits][
            :MAX_SHOWN
        ],
    }


def split_conversations(split) -> list[tuple[str, list[dict]]]:
    """(where, messages) of a split's records (campaign.train.Split): where names the record's
    source file (the split file's source column) and its id."""
    from campaign.data.conversations import parse_messages

    sources = getattr(split, "sources", None) or [None] * len(split.ids)
    out = []
    for record_id, cell, source in zip(split.ids, split.messages, sources, strict=True):
        where = f"{source} record {record_id}" if source else f"record {record_id}"
        out.append((where, parse_messages(cell, where)))
    return out


def check_special_tokens(tokenizer, talks, policy: str) -> None:
    """Refuse `talks` ((where, messages) pairs) under data.special_tokens: refuse when one
    spells a special token of `tokenizer` (one line, the first); else nothing."""
    apply(find(talks, special_strings(tokenizer)), policy)


def scan_special_tokens(tokenizer, splits, policy: str) -> dict:
    """The summary (summary()) of every record of `splits` (the whole data) that spells a
    special token of `tokenizer`, under `policy`."""
    talks = [pair for split in splits if split.messages for pair in split_conversations(split)]
    return summary(find(talks, special_strings(tokenizer)), len(talks), policy)


def special_token_refusal(found: dict) -> str | None:
    """The refusal line of a scan's summary under refuse, or None (nothing spelled, or a policy
    that lets it through)."""
    if not found.get("records") or found["policy"] != "refuse":
        return None
    first = found["shown"][0]
    return refusal(Hit(first["record"], first["field"], first["token"]))


def escape_conversation(tokenizer, messages: Sequence[dict]):
    """(messages to render, tokenize function for rendered pieces) that keep the messages'
    special-token strings text (Escaped), or None when no message spells one."""
    escaped = Escaped.of(tokenizer, messages)
    return None if escaped is None else (escaped.messages, escaped.tokenize)


def special_token_findings(found: dict | None) -> list[str]:
    """`data: 3 of 120 records spell special tokens ('<|endoftext|>' 2, ...); data.special_tokens:
    keep (they act as control tokens); first: ...`; nothing when none do."""
    if not found or not found.get("records"):
        return []
    tokens = ", ".join(f"{t!r} {n}" for t, n in found["per_token"].items())
    effect = {
        "keep": "they act as control tokens",
        "escape": "tokenized as text",
        "refuse": "refused",
    }.get(found["policy"], found["policy"])
    first = found["shown"][0] if found.get("shown") else None
    return [
        f"data: {found['records']} of {found['records_checked']} records spell special tokens "
        f"({tokens}); data.special_tokens: {found['policy']} ({effect})"
        + (f"; first: {first['record']} field {first['field']}" if first else "")
    ]


# A special token's string that a message spells stands, while the template renders, as one
# code point of Supplementary Private Use Area-A (the k-th string: BASE + k), so the rendered
# text holds the template's own control tokens only and the data's stand apart.
_SENTINEL_BASE = 0xF0000


@dataclass(frozen=True)
class Escaped:
    """A conversation whose messages spell special tokens, ready to tokenize them as text: the
    messages with each such string as its sentinel, and a tokenizer of rendered pieces that
    keeps the template's control tokens real and tokenizes the rest, the data's strings put
    back, with split_special_tokens (the tokenizer's own way to read them as text)."""

    messages: list[dict]
    tokenize: Callable[[str], list[int]]

    @classmethod
    def of(cls, tokenizer, messages: Sequence[dict]) -> Escaped | None:
        strings = special_strings(tokenizer)
        regex = pattern(strings)
        if regex is None or not any(regex.search(m["content"]) for m in messages):
            return None  # nothing to escape: tokenized exactly as without escape
        sentinels = {s: chr(_SENTINEL_BASE + k) for k, s in enumerate(strings)}
        back = {v: k for k, v in sentinels.items()}
        if any(ch in back for m in messages for ch in m["content"]):
            raise CampaignError(
                "data.special_tokens: escape, but a message holds a private-use character "
                f"U+{_SENTINEL_BASE:X} or after, which escaping uses; use refuse or keep"
            )
        masked = [
            {**m, "content": regex.sub(lambda t: sentinels[t[0]], m["content"])} for m in messages
        ]
        restore = re.compile("|".join(map(re.escape, back)))

        def as_text(part: str) -> list[int]:
            part = restore.sub(lambda t: back[t[0]], part)
            ids = tokenizer(part, add_special_tokens=False, split_special_tokens=True)
            return list(ids["input_ids"])

        def tokenize(part: str) -> list[int]:
            ids, at = [], 0
            for token in regex.finditer(part):  # the template's own: real control tokens
                ids += as_text(part[at : token.start()]) if token.start() > at else []
                ids += tokenizer(token[0], add_special_tokens=False)["input_ids"]
                at = token.end()
            return ids + (as_text(part[at:]) if at < len(part) else [])

        return cls(masked, tokenize)
