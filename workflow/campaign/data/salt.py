"""The salt search behind `campaign split-salt`: score thousands of salts at once and pick one
whose split passes the audit's balance checks (label shares, split sizes, every label in train).

Rerandomization (Morgan & Rubin 2012): re-drawing a random assignment until it is balanced on a
criterion fixed in advance looks at labels and sizes only, never at a model, so it leaks
nothing. Everything that does not depend on the salt is computed once: the leak units, each
unit's 64-bit key hash and its records per label, and under ``split.dedup.policy: drop`` the
duplicate components. A salt then costs one 64-bit mix per unit and a few matrix products, in
blocks of salts (``units.positions``), instead of one BLAKE3 call per unit and salt.

The scores are the audit's own numbers for that salt (the tests check them against
``make_splits``): the largest |label share in a split - overall share|, the largest |share of
records in a split - its fraction|, whether a split is empty, whether a label is absent from
train.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from campaign.core.errors import CampaignError
from campaign.data.settings import TRAIN, parse_cutoff
from campaign.data.units import (
    LeakUnits,
    key_hashes,
    latest_times,
    positions,
    prepare,
    salt_hash,
    split_edges,
)

if TYPE_CHECKING:
    import pandas as pd

SALTS_PER_BLOCK = 256  # (salts, units) arrays of this many rows: ~40 MB at 20,000 units


@dataclass(frozen=True)
class SaltChoice:
    """The salt to put in params, the audit numbers it gives, and how it was found."""

    salt: str
    label_deviation: float
    size_deviation: float
    kept: bool  # the current split.salt passed and is kept
    tried: int  # salts scored, the current one included


@dataclass(frozen=True)
class Scores:
    """Per salt (n_salts,): the audit's numbers and verdicts."""

    label_deviation: np.ndarray
    size_deviation: np.ndarray
    empty: np.ndarray  # some split got no record
    missing_from_train: np.ndarray  # some label has no record in train
    passes: np.ndarray
    score: np.ndarray  # what the search minimizes among passing salts


class SaltScorer:
    """Scores salts for one set of leak units and params ``split`` (cfg)."""

    def __init__(self, units: LeakUnits, cfg: dict, latest: dict[str, datetime] | None = None):
        self.cfg = cfg
        self.temporal = cfg["method"] == "temporal"
        keys = sorted(set(units.unit))
        row = {k: i for i, k in enumerate(keys)}
        classes = sorted(set(units.labels))
        col = {c: j for j, c in enumerate(classes)}
        rec_unit = np.array([row[k] for k in units.unit], dtype=np.int64)  # (n,)
        rec_label = np.array([col[c] for c in units.labels], dtype=np.int64)  # (n,)
        self.counts = np.zeros((len(keys), len(classes)))  # (n_units, n_classes)
        np.add.at(self.counts, (rec_unit, rec_label), 1.0)
        self.key_hashes = key_hashes(keys)
        self.names, self.edges = split_edges(cfg["fractions"])
        self.train = self.names.index(TRAIN)
        self.target = np.array([cfg["fractions"][n] for n in self.names])  # (n_splits,)
        if self.temporal:
            assert latest is not None
            cutoff = parse_cutoff(cfg["temporal_cutoff"])
            self.train_fixed = np.array([latest[k] < cutoff for k in keys])
            eval_names, self.eval_edges = split_edges(
                {k: v for k, v in cfg["fractions"].items() if k != TRAIN}
            )
            self.eval_index = np.array([self.names.index(n) for n in eval_names])
        self.drop = cfg["dedup"]["policy"] == "drop"
        if self.drop:
            # Records with duplicates, grouped by component; each component's representative.
            members = sorted(
                (rep, i) for i, rep in enumerate(units.duplicate_of) if rep >= 0
            )  # (m,) sorted by component
            reps = np.array([rep for rep, _ in members], dtype=np.int64)
            records = np.array([i for _, i in members], dtype=np.int64)
            self.starts = np.flatnonzero(np.r_[True, reps[1:] != reps[:-1]])  # (n_components,)
            self.component = np.cumsum(np.r_[False, reps[1:] != reps[:-1]])  # (m,)
            where = {r: p for p, r in enumerate(records.tolist())}
            self.rep_position = np.array([where[r] for r in reps[self.starts].tolist()])
            self.dup_unit = rec_unit[records]  # (m,)
            self.dup_onehot = np.zeros((len(records), len(classes)))  # (m, n_classes)
            self.dup_onehot[np.arange(len(records)), rec_label[records]] = 1.0

    def _splits(self, salts: list[str]) -> np.ndarray:
        """(n_salts, n_units) split index of each unit under each salt."""
        place = positions(np.array([salt_hash(s) for s in salts]), self.key_hashes)
        if not self.temporal:
            return np.searchsorted(self.edges, place, side="right")
        chosen = self.eval_index[np.searchsorted(self.eval_edges, place, side="right")]
        chosen[:, self.train_fixed] = self.train
        return chosen

    def score(self, salts: list[str]) -> Scores:
        idx = self._splits(salts)  # (b, n_units)
        n_splits = len(self.names)
        per_split = np.stack(
            [(idx == s).astype(np.float64) @ self.counts for s in range(n_splits)], axis=1
        )  # (b, n_splits, n_classes)
        if self.drop and len(self.dup_unit):
            where = idx[:, self.dup_unit]  # (b, m)
            in_train = where == self.train
            has_train = np.logical_or.reduceat(in_train, self.starts, axis=1)  # (b, n_comp)
            rep_split = where[:, self.rep_position]  # (b, n_comp)
            keep = in_train | (
                ~has_train[:, self.component] & (where == rep_split[:, self.component])
            )
            for s in range(n_splits):
                if s != self.train:
                    gone = ((where == s) & ~keep).astype(np.float64)
                    per_split[:, s, :] -= gone @ self.dup_onehot
        sizes = per_split.sum(axis=2)  # (b, n_splits)
        total = sizes.sum(axis=1)  # (b,)
        overall = per_split.sum(axis=1)  # (b, n_classes)
        with np.errstate(divide="ignore", invalid="ignore"):
            shares = per_split / sizes[:, :, None]
            deviation = np.abs(shares - (overall / total[:, None])[:, None, :])
        deviation = np.where(sizes[:, :, None] > 0, deviation, 0.0)
        label_deviation = deviation.max(axis=(1, 2))
        size_deviation = np.abs(sizes / total[:, None] - self.target).max(axis=1)
        empty = (sizes == 0).any(axis=1)
        missing = ((overall > 0) & (per_split[:, self.train, :] == 0)).any(axis=1)
        passes = ~empty & ~missing & (label_deviation <= self.cfg["stratify_tolerance"])
        if self.temporal:
            score = label_deviation
        else:
            passes &= size_deviation <= self.cfg["size_tolerance"]
            score = np.maximum(label_deviation, size_deviation)
        return Scores(label_deviation, size_deviation, empty, missing, passes, score)


def closest_salt(scorer: SaltScorer, salt: str, tries: int) -> str:
    """The salt among ``salt``, ``<salt>-0`` ... ``-<tries - 1>`` whose split passes with the
    smallest score, else the one with the smallest score (ties: the first): the split that
    ``split.assign: solve`` starts from."""
    best, best_key = salt, (True, math.inf)
    salts = [salt] + [f"{salt}-{i}" for i in range(tries)]
    for lo in range(0, len(salts), SALTS_PER_BLOCK):
        block = salts[lo : lo + SALTS_PER_BLOCK]
        s = scorer.score(block)
        keys = list(zip((~s.passes).tolist(), s.score.tolist(), strict=True))
        i = min(range(len(block)), key=keys.__getitem__)
        if keys[i] < best_key:
            best, best_key = block[i], keys[i]
    return best


def impossible(units: LeakUnits, cfg: dict) -> list[str]:
    """Reasons no salt can pass, known before any is tried: a label more common than the
    tolerance whose records lie in fewer units than there are splits leaves some split without
    it, off by its whole share."""
    n_splits = len(cfg["fractions"])
    units_of: dict[str, set[str]] = {}
    for label, key in zip(units.labels, units.unit, strict=True):
        units_of.setdefault(label, set()).add(key)
    share = Counter(units.labels)
    n = len(units.labels)
    out = []
    for label in sorted(units_of):
        if len(units_of[label]) < n_splits and share[label] / n > cfg["stratify_tolerance"]:
            out.append(
                f"label {label!r} ({share[label] / n:.1%} of the records) lies in "
                f"{len(units_of[label])} unit(s), fewer than the {n_splits} splits, so a split "
                f"without it is off by {share[label] / n:.3f} > split.stratify_tolerance"
            )
    return out


def find_salt(records: pd.DataFrame, cfg: dict, *, seed: int, tries: int = 2000) -> SaltChoice:
    """The salt to use: the current ``split.salt`` when its split passes (label shares within
    ``split.stratify_tolerance``, sizes within ``split.size_tolerance``, no split empty, every
    label in train), else the passing salt among ``<split.salt>-0`` ... ``-<tries - 1>`` with
    the smallest ``max(label deviation, size deviation)`` (ties: the first), so a margin is
    left for the data to grow. Raises CampaignError, one line, when no salt can pass (a unit
    too large to place, a label in too few units) or none of the tries did, with the closest
    numbers reached."""
    if isinstance(tries, bool) or not isinstance(tries, int) or tries < 1:
        raise CampaignError(f"--tries: expected a positive number of salts, got {tries!r}")
    units, stamps = prepare(records, cfg, seed)  # refuses a unit too large to place
    reasons = impossible(units, cfg)
    if reasons:
        raise CampaignError("split-salt: no salt can pass: " + "; ".join(reasons))
    latest = latest_times(units, cfg, stamps) if stamps is not None else None
    scorer = SaltScorer(units, cfg, latest)
    current = scorer.score([cfg["salt"]])
    if current.passes[0]:
        return SaltChoice(
            cfg["salt"],
            float(current.label_deviation[0]),
            float(current.size_deviation[0]),
            kept=True,
            tried=1,
        )
    best, best_score = None, math.inf
    closest_label, closest_size, empty, missing = math.inf, math.inf, 0, 0
    for lo in range(0, tries, SALTS_PER_BLOCK):
        salts = [f"{cfg['salt']}-{i}" for i in range(lo, min(tries, lo + SALTS_PER_BLOCK))]
        s = scorer.score(salts)
        usable = ~s.empty & ~s.missing_from_train
        if usable.any():
            closest_label = min(closest_label, float(s.label_deviation[usable].min()))
            closest_size = min(closest_size, float(s.size_deviation[usable].min()))
        empty += int(s.empty.sum())
        missing += int((s.missing_from_train & ~s.empty).sum())
        if s.passes.any():
            i = int(np.flatnonzero(s.passes)[np.argmin(s.score[s.passes])])
            if s.score[i] < best_score:
                best_score = float(s.score[i])
                best = (salts[i], float(s.label_deviation[i]), float(s.size_deviation[i]))
    if best is None:
        what = (
            [
                f"closest label deviation {closest_label:.3f} (split.stratify_tolerance "
                f"{cfg['stratify_tolerance']})"
            ]
            if closest_label < math.inf
            else []
        )
        if closest_size < math.inf and not scorer.temporal:
            what.append(
                f"closest size deviation {closest_size:.3f} (split.size_tolerance "
                f"{cfg['size_tolerance']})"
            )
        if empty:
            what.append(f"{empty} left a split empty")
        if missing:
            what.append(f"{missing} left a label out of train")
        raise CampaignError(
            f"split-salt: none of the current salt {cfg['salt']!r} and {tries} salts "
            f"{cfg['salt']}-0..{tries - 1} passes ({'; '.join(what)}); the units are too few "
            "or too large for these tolerances: use split.assign: solve (it finds a split "
            "whenever one exists, or proves that none does), raise the tolerances, the "
            "evaluation fractions or --tries, or use split.dedup.policy: drop if duplicates "
            "join groups"
        )
    return SaltChoice(best[0], best[1], best[2], kept=False, tried=tries + 1)
