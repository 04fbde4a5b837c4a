"""fractional: a two-level fractional factorial 2^(k−p) (`ablation.fractional.p`), generators
chosen for the highest resolution, the control in the fraction.

Letters name the factors in params order (A is the first). The first k − p factors form a full
2^(k−p) factorial; each of the last p is set by a generator, a product of two or more of those
(D = AB: D is at its − level exactly when one of A and B is). The generators are, among all
candidate sets, the one whose defining relation has the fewest short words (minimum aberration,
which gives the highest resolution first), the first in order (shorter words, then letters)
among equals: 2^(5−2) takes D = AB, E = AC.

A factor's baseline value is its + level, so the fraction with every generator's sign + (the
principal fraction) holds the control, which the plan shares. A factor whose baseline value is
not one of its two levels counts its first level as +; the control is then an extra cell.
"""

from __future__ import annotations

import functools
from typing import Any

from campaign.core.errors import CampaignError
from campaign.plan.words import roman, short_names

# Candidate generator sets searched at most (2^(10−5) takes about 2,000, 2^(12−4) 120,000).
MAX_NODES = 200_000


def letter(i: int) -> str:
    return chr(ord("A") + i)


def word_text(mask: int) -> str:
    """ABD for the bits of A, B and D."""
    return "".join(letter(i) for i in range(mask.bit_length()) if mask >> i & 1)


def candidate_words(base: int) -> list[int]:
    """Products of two or more of the `base` first factors (bit masks), shortest first, then by
    letters: AB, AC, BC, ABC for three."""
    words = [m for m in range(1, 1 << base) if m.bit_count() >= 2]
    return sorted(words, key=lambda m: (m.bit_count(), word_text(m)))


def defining_words(k: int, generators: tuple[int, ...]) -> list[int]:
    """Every word of the defining relation (k-bit masks): the products of the generator words
    (each with its own factor's letter), sorted shortest first, then by letters."""
    base = k - len(generators)
    group: list[int] = []
    for j, g in enumerate(generators):
        word = g | 1 << (base + j)
        group += [word] + [w ^ word for w in group]
    return sorted(group, key=lambda m: (m.bit_count(), word_text(m)))


@functools.cache
def choose_generators(k: int, p: int) -> tuple[int, ...]:
    """The generator words (masks over the k − p base factors) of the minimum-aberration
    2^(k−p) design: the word length pattern (how many words of length 1, 2, 3, ...) smallest in
    lexicographic order, the first such set in candidate order.

    Branch and bound over sets in candidate order: adding a generator only adds words, so a
    partial set whose pattern is already not below the best can only end above it. Relabelling
    the base factors keeps a pattern, so the first set among equals starts with the first word
    of its length, and its second word is the first of its length and overlap with the first:
    only those are tried at the first two levels."""
    base = k - p
    candidates = candidate_words(base)
    best: list = []  # [generators, pattern]
    nodes = 0

    def tried(start: int, chosen: tuple[int, ...]) -> list[int]:
        stop = len(candidates) - (p - len(chosen)) + 1
        if len(chosen) > 1:
            return list(range(start, stop))
        seen, out = set(), []
        for i in range(start, stop):
            word = candidates[i]
            kind = (word.bit_count(), (word & chosen[0]).bit_count() if chosen else 0)
            if kind not in seen:
                seen.add(kind)
                out.append(i)
        return out

    def search(start: int, chosen: tuple[int, ...], group: list[int], pattern: list[int]):
        nonlocal nodes
        nodes += 1
        if nodes > MAX_NODES:
            raise CampaignError(
                f"ablation.fractional.p: the search for the generators of 2^({k}−{p}) went past "
                f"{MAX_NODES} candidate sets; vary fewer factors or use design explicit"
            )
        if len(chosen) == p:
            if not best or pattern < best[1]:
                best[:] = [chosen, pattern]
            return
        if best and pattern >= best[1]:
            return
        added = 1 << (base + len(chosen))
        for i in tried(start, chosen):
            word = candidates[i] | added
            new = [word] + [w ^ word for w in group]
            counts = pattern.copy()
            for w in new:
                counts[w.bit_count()] += 1
            search(i + 1, (*chosen, candidates[i]), group + new, counts)

    search(0, (), [], [0] * (k + 1))
    return tuple(best[0])


def resolution(words: list[int]) -> int | None:
    """The length of the shortest word of the defining relation (None: a full factorial)."""
    return min((w.bit_count() for w in words), default=None)


def alias_table(k: int, generators: tuple[int, ...]) -> dict[str, list[str]]:
    """{effect: the effects it is aliased with}, for every main effect and two-factor
    interaction in letters (A, AB), aliases of order two or less, mains first, then by letters."""
    words = defining_words(k, generators)
    effects = [1 << i for i in range(k)]
    effects += [1 << i | 1 << j for i in range(k) for j in range(i + 1, k)]
    table = {}
    for effect in effects:
        low = [a for a in {effect ^ w for w in words} if a.bit_count() <= 2]
        table[word_text(effect)] = [word_text(a) for a in sorted(low, key=_effect_order)]
    return table


def _effect_order(mask: int) -> tuple[int, str]:
    return (mask.bit_count(), word_text(mask))


def _settings(keys: list[str], levels: list[list[Any]], ablation: dict) -> int:
    p = ablation["fractional"]["p"]
    if p is None:
        raise CampaignError("ablation.fractional.p: design fractional needs p (2^(k−p) cells)")
    for key, lv in zip(keys, levels, strict=True):
        if len(lv) != 2:
            raise CampaignError(
                f"ablation.factors.{key}: design fractional needs exactly 2 levels per factor; "
                f"it has {len(lv)}"
            )
    k = len(keys)
    if p > max_p(k):
        raise CampaignError(
            f"ablation.fractional.p: {p} is too large for {k} two-level factors (at most "
            f"{max_p(k)}: each of the p factors needs its own product of two or more of the "
            f"other k − p)"
        )
    return p


def max_p(k: int) -> int:
    """The largest p with a 2^(k−p) design: p words of 2+ letters among the k − p others."""
    return max((q for q in range(k) if 2 ** (k - q) - (k - q) - 1 >= q), default=0)


def signs(levels: list[list[Any]], baseline: dict[str, Any], keys: list[str]) -> list[tuple]:
    """(+ level, − level) per factor: + is the baseline's value where it is a level."""
    out = []
    for key, (a, b) in zip(keys, levels, strict=True):
        out.append((b, a) if baseline[key] == b else (a, b))
    return out


def cells(
    keys: list[str], levels: list[list[Any]], baseline: dict[str, Any], ablation: dict
) -> list[tuple[tuple[str, Any], ...]]:
    p = _settings(keys, levels, ablation)
    if not keys:
        return []
    k = len(keys)
    base = k - p
    generators = choose_generators(k, p)
    plus_minus = signs(levels, baseline, keys)
    out = []
    for row in range(1 << base):  # standard order: A alternates fastest; a set bit is −
        minus = row
        for j, g in enumerate(generators):
            if (row & g).bit_count() % 2:  # an odd number of − among its letters: −
                minus |= 1 << (base + j)
        out.append(tuple((key, plus_minus[i][minus >> i & 1]) for i, key in enumerate(keys)))
    return out


def describe(
    keys: list[str], levels: list[list[Any]], baseline: dict[str, Any], ablation: dict
) -> list[str]:
    """The fraction as written: size, resolution, letters, generators, defining relation and
    the aliases among main effects and two-factor interactions."""
    p = _settings(keys, levels, ablation)
    k = len(keys)
    if k == 0:
        return []
    names = short_names(keys)
    generators = choose_generators(k, p)
    words = defining_words(k, generators)
    res = resolution(words)
    size = f"2^({k}−{p}) = {2 ** (k - p)} cells"
    lines = [
        f"fractional {size}, "
        + (f"resolution {roman(res)}" if res else "the full factorial: nothing aliased"),
        "letters: " + ", ".join(f"{letter(i)} {names[key]}" for i, key in enumerate(keys)),
    ]
    if not generators:
        return lines
    base = k - p
    lines.append(
        "generators: "
        + ", ".join(f"{letter(base + j)} = {word_text(g)}" for j, g in enumerate(generators))
    )
    lines.append("defining relation: I = " + " = ".join(word_text(w) for w in words))
    lines.append("aliases among main effects and two-factor interactions (higher orders left out):")
    shown: set[str] = set()
    for effect, aliases in alias_table(k, generators).items():
        if aliases and effect not in shown:
            shown.update([effect, *aliases])
            lines.append(f"  {' = '.join([effect, *aliases])}")
    clear = [e for e, a in alias_table(k, generators).items() if not a]
    if clear:
        lines.append(f"  aliased with none of them: {', '.join(clear)}")
    return lines
