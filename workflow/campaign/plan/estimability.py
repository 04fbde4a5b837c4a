"""What a set of cells can estimate: each main effect and two-factor interaction, in words.

Linear models over the distinct cells (seeds are replicates: they add precision, not rank):
    M1  intercept + every main effect
    M2  M1 + every two-factor interaction
A term is estimable in a model when dropping its columns drops the rank by as many columns
(each of its parameters lies in the row space). Main effects are effect coded (+1 for a level,
−1 for the control's), so a main effect is the average over the other factors' levels.

A main effect is
    clear        estimable in M2: clear of two-factor interactions (a full factorial, a fraction
                 of resolution IV or more)
    at_control   estimable in M2 only treatment coded: the effect at the control's values of the
                 other factors, not averaged over them (one_at_a_time)
    if_additive  estimable in M1 only: if two-factor interactions are negligible; aliased with
                 those whose addition to M1 breaks it (a resolution III fraction)
    none         not estimable even in M1
A two-factor interaction F × G is
    clear        estimable in M2
    if_additive  estimable in M1 + F × G only: if the other interactions are negligible;
                 aliased with those whose addition breaks it
    none         not estimable even then: no cell moves both, or aliased with main effects
Seeds per contrast: the most seeds s such that the term keeps its verdict using only the cells
run at s seeds or more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from campaign.plan.words import plural, term_name

Term = tuple[str, ...]  # (key,) for a main effect, (key, key) for an interaction
KINDS = ("clear", "at_control", "if_additive", "none")


@dataclass(frozen=True)
class Verdict:
    term: Term
    kind: str  # KINDS
    seeds: int  # seeds per contrast (0: not estimable)
    aliases: tuple[Term, ...] = ()
    reason: str = ""  # why not estimable, when no alias says it
    missing: tuple = ()  # levels of the plan's factor that no analysed cell has (main effects)


class Design:
    """Model columns of a set of distinct cells (each a sequence of levels in `keys` order)."""

    def __init__(self, cells: Sequence[Sequence[Any]], reference: Sequence[Any], others, levels):
        self.cells = cells
        self.reference = reference
        self.others = others  # per factor: the non-control levels that get a column
        self.levels = levels  # per factor: its levels in the whole plan
        self._cache: dict[tuple[Term, str], np.ndarray] = {}

    def complete(self, i: int) -> bool:
        """Whether the cells hold every level the plan gives factor i."""
        return all(any(c[i] == lv for c in self.cells) for lv in self.levels[i])

    def columns(self, term: Term | tuple[()], coding: str) -> np.ndarray:
        """(n_cells, m): the intercept for (), a factor's levels, or their pairwise products."""
        if (term, coding) not in self._cache:
            n = len(self.cells)
            if not term:
                out = np.ones((n, 1))
            elif len(term) == 1:
                i = term[0]
                out = np.zeros((n, len(self.others[i])))
                for r, cell in enumerate(self.cells):
                    if cell[i] == self.reference[i]:
                        out[r, :] = -1.0 if coding == "effect" else 0.0
                    elif cell[i] in self.others[i]:
                        out[r, self.others[i].index(cell[i])] = 1.0
            else:
                a, b = (self.columns((i,), coding) for i in term)
                out = (a[:, :, None] * b[:, None, :]).reshape(n, -1)
            self._cache[(term, coding)] = out
        return self._cache[(term, coding)]

    def rank(self, terms: Sequence, coding: str) -> int:
        mats = [self.columns(t, coding) for t in terms]
        mats = [m for m in mats if m.shape[1]]
        return int(np.linalg.matrix_rank(np.hstack(mats))) if mats and len(self.cells) else 0

    def estimable(self, term, model: Sequence, coding: str = "effect") -> bool:
        width = self.columns(term, coding).shape[1]
        if width == 0:
            return False
        with_it = [*model, term] if term not in model else list(model)
        without = [t for t in with_it if t != term]
        return self.rank(with_it, coding) - self.rank(without, coding) == width


def _main_kind(d: Design, f: tuple[int], mains: list, pairs: list) -> str:
    m1 = [(), *mains]
    if d.columns(f, "effect").shape[1] == 0:
        return "none"
    # Averaged over the other factors' levels only if the cells hold all of them (a cut can
    # leave a factor at the control's value alone: then the effect is the one at the control).
    averaged = all(d.complete(g[0]) for g in mains if g != f)
    if averaged and d.estimable(f, [*m1, *pairs], "effect"):
        return "clear"
    if d.estimable(f, [*m1, *pairs], "treatment"):
        return "at_control"
    return "if_additive" if d.estimable(f, m1) else "none"


def _pair_kind(d: Design, t: tuple[int, int], mains: list, pairs: list) -> str:
    if not d.columns(t, "treatment").any():
        return "none"
    if d.estimable(t, [(), *mains, *pairs]):
        return "clear"
    return "if_additive" if d.estimable(t, [(), *mains]) else "none"


def _main_why(d: Design, f: tuple[int], kind: str, mains: list, pairs: list):
    """(aliases, reason) of a main effect's verdict."""
    if kind == "if_additive":  # the interactions whose addition to M1 breaks it
        return [
            p
            for p in pairs
            if d.columns(p, "effect").shape[1] and not d.estimable(f, [(), *mains, p])
        ], ""
    if kind != "none":
        return [], ""
    if not d.others[f[0]]:
        return [], "no {cell} moves it"
    # the main effects without which it would be estimable
    aliases = [g for g in mains if g != f and d.estimable(f, [(), *(m for m in mains if m != g)])]
    return aliases, "" if aliases else "too few {cell}s to separate it from the others"


def _pair_why(d: Design, t: tuple[int, int], kind: str, mains: list, pairs: list):
    """(aliases, reason) of an interaction's verdict."""
    if kind == "if_additive":
        return [p for p in pairs if p != t and not d.estimable(t, [(), *mains, p])], ""
    if kind != "none":
        return [], ""
    if not d.columns(t, "treatment").any():
        return [], "no {cell} moves both"
    aliases = [g for g in mains if d.estimable(t, [(), *(m for m in mains if m != g)])]
    return aliases, "" if aliases else "too few {cell}s to separate it from the others"


def analyse(
    cells: Sequence[tuple[Sequence[Any], int]],
    keys: Sequence[str],
    control: Sequence[Any],
    levels: Sequence[Sequence[Any]],
) -> list[Verdict]:
    """Verdicts for every main effect, then every interaction of two factors the plan varies.

    cells: (levels in keys order, seeds run) per distinct cell; control: the control's levels;
    levels: each factor's levels in the whole plan (what "missing" is measured against)."""
    n = len(keys)
    present = [[c[i] for c, _ in cells] for i in range(n)]
    others = [[lv for lv in levels[i] if lv != control[i] and lv in present[i]] for i in range(n)]
    varied = [any(lv != control[i] for lv in levels[i]) for i in range(n)]
    mains = [(i,) for i in range(n)]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if varied[i] and varied[j]]
    design = Design([c for c, _ in cells], control, others, levels)
    # Seeds per contrast: the same verdict from the cells run at s seeds or more, s largest.
    subsets = {
        s: Design([c for c, k in cells if k >= s], control, others, levels)
        for s in sorted({k for _, k in cells}, reverse=True)
    }

    def verdict(term, kind_of, why, missing=()) -> Verdict:
        kind = kind_of(design, term, mains, pairs)
        aliases, reason = why(design, term, kind, mains, pairs)
        seeds = 0
        if kind != "none":
            seeds = next(
                (s for s, d in subsets.items() if kind_of(d, term, mains, pairs) == kind), 0
            )
        named = tuple(_named(a, keys) for a in aliases)
        return Verdict(_named(term, keys), kind, seeds, named, reason, missing)

    out = []
    for f in mains:
        i = f[0]
        missing = tuple(lv for lv in levels[i] if lv != control[i] and lv not in present[i])
        out.append(verdict(f, _main_kind, _main_why, missing))
    out += [verdict(t, _pair_kind, _pair_why) for t in pairs]
    return out


def _named(term: tuple[int, ...], keys: Sequence[str]) -> Term:
    return tuple(keys[i] for i in term)


# ------------------------------------------------------------------ in words
_MAIN = {
    "clear": "estimable, clear of two-factor interactions",
    "at_control": "estimable at the control's values of the other factors, not averaged over them",
    "if_additive": "estimable only if two-factor interactions are negligible",
    "none": "not estimable",
}
_PAIR = {
    "clear": "estimable",
    "if_additive": "estimable only if the other two-factor interactions are negligible",
    "none": "not estimable",
}


def sentence(v: Verdict, names: dict[str, str], cell: str = "cell") -> str:
    """One line: `lr × max_length interaction: not estimable, aliased with warmup_steps`."""
    main = len(v.term) == 1
    head = term_name(v.term, names)
    what = "main effect" if main else "interaction"
    text = f"{head} {what}: {(_MAIN if main else _PAIR)[v.kind]}"
    if v.aliases:
        text += ", aliased with " + ", ".join(term_name(a, names) for a in v.aliases)
    elif v.reason:
        text += ": " + v.reason.format(cell=cell)
    if v.seeds:
        text += f" ({plural(v.seeds, 'seed')} per contrast)"
    if v.missing:
        shown = ", ".join(f"{lv:g}" if isinstance(lv, float) else str(lv) for lv in v.missing)
        text += f"; {head} = {shown} not run"
    return text


def cut_costs(before: list[Verdict], after: list[Verdict], names: dict[str, str]) -> list[str]:
    """What a cut takes away, in words: first the main effects it makes not estimable, then each
    term whose verdict, seeds or levels changed, before → after."""
    lost = [
        term_name(b.term, names)
        for b, a in zip(before, after, strict=True)
        if len(b.term) == 1 and b.kind != "none" and a.kind == "none"
    ]
    lines = [f"main effects no longer estimable: {', '.join(lost)}"] if lost else []
    for b, a in zip(before, after, strict=True):
        if (b.kind, b.missing, b.aliases) == (a.kind, a.missing, a.aliases):
            if b.seeds != a.seeds:
                what = "main effect" if len(b.term) == 1 else "interaction"
                lines.append(
                    f"{term_name(b.term, names)} {what}: {b.seeds} → "
                    f"{plural(a.seeds, 'seed')} per contrast"
                )
            continue
        lines.append(f"{sentence(b, names)}  →  {_tail(sentence(a, names, 'kept cell'))}")
    return lines


def _tail(text: str) -> str:
    """The part of a sentence after the term's name."""
    return text.split(": ", 1)[1] if ": " in text else text
