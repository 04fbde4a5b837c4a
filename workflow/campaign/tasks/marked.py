"""The preflight's tokenization view of a formatted example: its tokens as text, with the tokens
the loss skips marked, so a reader sees at a glance what the loss covers."""

from __future__ import annotations

IGNORE = -100  # the label value cross-entropy skips (same as train/batches.py)


def show_example(tokenizer, example, limit: int = 400) -> str:
    """An example as text with the masked tokens marked: [prompt tokens] in brackets, targets
    bare, so a reader sees at a glance what the loss covers (the preflight's tokenization view)."""
    parts, masked = [], None
    for token, label in zip(example.input_ids, example.labels, strict=True):
        now = label == IGNORE
        if now != masked:
            parts.append("[" if now else "]" if masked else "")
            masked = now
        parts.append(tokenizer.decode([token]))
    if masked:
        parts.append("]")
    text = "".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"
