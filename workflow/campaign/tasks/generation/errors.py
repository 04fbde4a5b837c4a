"""Error analysis of a generated-text campaign at the level the verdict speaks of: cells, not
single runs. A cell's score on an item is its seeds' mean (the same pooling the statistics use),
so an item one seed happened to get right is not hidden, nor one seed's slip made a pattern.

- worst_cell_rows: each cell's lowest-scored items pooled over its seeds, with the prompt, the
  reference and what the seed that did worst on the item generated.
- kept_change_rows: the items every seed moved by at least CHANGE_THRESHOLD between the control
  and the option the verdict keeps (a cell or a floor): what fine-tuning (or the kept level)
  fixed and what it broke, with both generations side by side.

Pure functions over arrays (`scores: (n_seeds, n_items)`, `texts: (n_seeds, n_items)`); the
scoring layer (evaluate/scoring.py) gives them the texts it read, the stage the decisions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# What counts as fixed or broken, and the files' columns: the evaluate phase's (its report
# section states the rule and shows the columns).
from campaign.evaluate import CHANGE_THRESHOLD


@dataclass(frozen=True)
class Option:
    """One option on one split as error analysis reads it: per-item scores and the generated
    texts of each of its runs (a floor: one row), in the split's item order."""

    name: str
    scores: np.ndarray  # (n_runs, n_items) in [0, 1]
    texts: Sequence[Sequence[str]]  # (n_runs, n_items)

    @property
    def pooled(self) -> np.ndarray:
        """(n_items,) the mean over runs (seeds): the cell's score on each item."""
        return np.asarray(self.scores, dtype=np.float64).mean(axis=0)

    def typical_text(self, i: int) -> str:
        """What the run that did worst on item i generated (ties: the first seed): the text
        that explains the pooled score, not a lucky seed's."""
        return str(self.texts[int(np.argmin(self.scores[:, i]))][i])


def worst_cell_rows(option: Option, split: str, ids, prompts, references, n: int) -> list[dict]:
    """The option's `n` lowest-scored items by its pooled score (ties: split order)."""
    pooled = option.pooled
    order = np.argsort(pooled, kind="stable")[:n]
    return [
        {
            "cell": option.name,
            "split": split,
            "id": str(ids[i]),
            "score": float(pooled[i]),
            "seeds": int(option.scores.shape[0]),
            "prompt": str(prompts[i]),
            "reference": str(references[i]),
            "prediction": option.typical_text(i),
        }
        for i in order
    ]


def change_of(kept: Option, control: Option, threshold: float = CHANGE_THRESHOLD) -> np.ndarray:
    """(n_items,) +1 fixed, -1 broken, 0 neither. Fixed: the kept option's lowest run on the
    item is at least `threshold` above the control's highest run; broken: the reverse. Pooled
    means would count one seed of two flipping (0/1 scores: [1, 0] against [0, 0] is a pooled
    +0.5) as a change; a change every seed agrees on is what a reader can act on."""
    kept_scores = np.asarray(kept.scores, dtype=np.float64)
    control_scores = np.asarray(control.scores, dtype=np.float64)
    eps = 1e-12  # a difference of exactly the threshold counts, whatever the rounding
    fixed = kept_scores.min(axis=0) - control_scores.max(axis=0) >= threshold - eps
    broken = control_scores.min(axis=0) - kept_scores.max(axis=0) >= threshold - eps
    return fixed.astype(int) - broken.astype(int)


def kept_change_rows(
    kept: Option, control: Option, split: str, ids, prompts, references,
    threshold: float = CHANGE_THRESHOLD,
) -> list[dict]:  # fmt: skip
    """Every item fixed or broken (change_of) from the control to the kept option, the
    largest pooled changes first; `delta` is the pooled (seed-mean) difference."""
    delta = kept.pooled - control.pooled
    change = change_of(kept, control, threshold)
    moved = np.flatnonzero(change != 0)
    moved = moved[np.argsort(-np.abs(delta[moved]), kind="stable")]
    return [
        {
            "split": split,
            "kept": kept.name,
            "control": control.name,
            "id": str(ids[i]),
            "change": "fixed" if change[i] > 0 else "broken",
            "kept_score": float(kept.pooled[i]),
            "control_score": float(control.pooled[i]),
            "delta": float(delta[i]),
            "prompt": str(prompts[i]),
            "reference": str(references[i]),
            "kept_prediction": kept.typical_text(i),
            "control_prediction": control.typical_text(i),
        }
        for i in moved
    ]


def prompt_text(messages: Sequence[dict]) -> str:
    """What a reader needs of the prompt: the last message before the reference (the question
    asked; a system message and earlier turns are the same for many items)."""
    asked = list(messages[:-1])
    return str(asked[-1]["content"]) if asked else ""
