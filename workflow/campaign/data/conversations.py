"""Conversations as records: the `messages` field of a conversational dataset (a list of
{"role", "content"} whose last entry is the assistant's reference response, TRL's conversational
format), a prompt/response pair turned into one, their checks, and the text duplicate detection
compares. Pure: the data phase reads and splits conversations with it; the generation task
(campaign/tasks/generation/chat.py) formats and scores them.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from typing import Any

from campaign.core.errors import CampaignError

ROLES = ("system", "user", "assistant")


MESSAGE_KEYS = ("role", "content")


# The label of a conversation when data.fields.label names no column: one stratum, so the split
# balances sizes only (there is no label whose shares could be kept).
UNSTRATIFIED = "(all)"


# ------------------------------------------------------------------ records
def blank(value: str) -> bool:
    """No visible character: only whitespace and format characters (Unicode category Cf: zero-width
    space, joiners, word joiner, byte-order mark, soft hyphen), which str.strip keeps."""
    return all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in value)


def _message(entry: Any, where: str, index: int) -> dict[str, str]:
    at = f"{where}: messages[{index}]"
    if not isinstance(entry, dict):
        raise CampaignError(f"{at} must be an object with role and content, got {entry!r:.60}")
    extra = sorted(set(entry) - set(MESSAGE_KEYS))
    if extra:
        raise CampaignError(f"{at} has unknown key(s) {', '.join(extra)} (expected role, content)")
    role, content = entry.get("role"), entry.get("content")
    if role not in ROLES:
        raise CampaignError(f"{at}.role is {role!r}; expected one of {', '.join(ROLES)}")
    if not isinstance(content, str):
        raise CampaignError(f"{at}.content must be a non-empty string, got {content!r:.60}")
    if blank(content):
        raise CampaignError(f"{at}.content is empty (whitespace or invisible characters only)")
    return {"role": role, "content": content}


def parse_messages(value: Any, where: str) -> list[dict[str, str]]:
    """A conversation from a `messages` field (a JSON string or an already decoded list), checked.

    `where` names the file and record ("data/raw/chat.jsonl:12: field 'messages'"); every error is
    one line starting with it. Rules: a non-empty list of {role, content} with visible content;
    roles system, user, assistant; a system message only first; then user and assistant turns
    alternating, the user's first (what chat templates and TRL expect); the last message is the
    assistant's (the reference response).
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise CampaignError(f"{where}: not a JSON list of messages ({e})") from None
    if hasattr(value, "tolist"):  # a Parquet list column arrives as a numpy array
        value = value.tolist()
    if not isinstance(value, list) or not value:
        raise CampaignError(f"{where}: expected a non-empty list of messages, got {value!r:.60}")
    messages = [_message(entry, where, i) for i, entry in enumerate(value)]
    roles = [m["role"] for m in messages]
    if "system" in roles[1:]:
        raise CampaignError(
            f"{where}: messages[{roles.index('system', 1)}] is a system message "
            "after the first position"
        )
    if "user" not in roles:
        raise CampaignError(f"{where}: no user message (a prompt is needed)")
    _check_turns(roles, where)
    if roles[-1] != "assistant":
        raise CampaignError(
            f"{where}: the last message is the {roles[-1]}'s; it must be the assistant's "
            "(the reference response)"
        )
    return messages


def _check_turns(roles: Sequence[str], where: str) -> None:
    """After an optional system message: user, assistant, user, ... (one line naming the turn)."""
    start = 1 if roles[0] == "system" else 0
    for i in range(start, len(roles)):
        if i == start and roles[i] != "user":
            raise CampaignError(
                f"{where}: messages[{i}] is the {roles[i]}'s; the conversation must open with "
                "the user's (after an optional system message)"
            )
        if i > start and roles[i] == roles[i - 1]:
            raise CampaignError(
                f"{where}: messages[{i}] is the {roles[i]}'s after the {roles[i - 1]}'s; turns "
                "must alternate between user and assistant"
            )


def from_prompt_response(prompt: str, response: str, system: str | None = None) -> list[dict]:
    """The conversation of a prompt/response pair, after an optional system message."""
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": prompt}, {"role": "assistant", "content": response}]


def prompt_messages(messages: Sequence[dict]) -> list[dict]:
    """What the model is given at evaluation: every message before the last (assistant) one."""
    return list(messages[:-1])


def reference(messages: Sequence[dict]) -> str:
    """The reference response evaluation compares a generation against."""
    return messages[-1]["content"]


def dedup_text(messages: Sequence[dict]) -> str:
    """The text duplicate detection compares: prompt and response together, so two records with
    one prompt and different answers are not called copies, and a copied pair is."""
    return "\n".join(m["content"] for m in messages)


def dump_messages(messages: Sequence[dict]) -> str:
    """The split file's `messages` cell: JSON, keys sorted, non-ASCII kept."""
    return json.dumps(list(messages), ensure_ascii=False, sort_keys=True)
