"""How the plan names factors and effects in what it prints: short factor names, terms
("lr × max_length"), resolutions in roman numerals."""

from __future__ import annotations

from collections.abc import Sequence


def short_names(keys: Sequence[str]) -> dict[str, str]:
    """{dotted key: name}: the last part of each key (`train.lr` → `lr`), or the whole key where
    two factors share a last part (`train.dropout` and `model.config.dropout`)."""
    last = [k.rpartition(".")[2] for k in keys]
    return {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last, strict=True)}


def term_name(term: Sequence[str], names: dict[str, str]) -> str:
    """A main effect's factor name, or an interaction's names joined by ×."""
    return " × ".join(names[k] for k in term)


def roman(n: int) -> str:
    """3 → III (resolutions are small numbers)."""
    out = ""
    for value, text in ((10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while n >= value:
            out += text
            n -= value
    return out


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")
