"""What a run is judged on while it trains (model.generation.eval_items) and what train.select
needs: the fixed validation subsample the loop generates on at every evaluation, and the check
that best_generated has generated scores to choose by.
"""

from __future__ import annotations

from campaign.core.errors import CampaignError
from campaign.core.hashing import hash_value
from campaign.train.batches import Split

# The fixed validation subsample generated on during training: the eval_items records whose
# hash_value([JUDGED_SALT, id]) come first, kept in file order. It depends on the validation
# split's ids alone (not on a run's seed), so every run of a campaign is judged on the same items.
JUDGED_SALT = "eval_items"


def judged_positions(ids, n: int) -> list[int]:
    """The positions, in file order, of the n ids whose hash_value([JUDGED_SALT, id]) come first
    (all of them when n >= len(ids)): the judged items, by the same rule wherever asked (the
    loop generates on them; the evaluation leaves them out of the validation decisions)."""
    ids = [str(i) for i in ids]
    ranked = sorted(range(len(ids)), key=lambda i: hash_value([JUDGED_SALT, ids[i]]))
    return sorted(ranked[:n])


def judged_subsample(split: Split, n: int) -> Split:
    """The split's n records whose hash_value([JUDGED_SALT, id]) come first, in file order (all
    of them when n >= its size): the same records for every run with the same split."""
    keep = judged_positions(split.ids, n)

    def pick(values):
        return None if values is None else [values[i] for i in keep]

    return Split(
        ids=pick(split.ids),
        texts=pick(split.texts),
        labels=pick(split.labels),
        messages=pick(split.messages),
        sources=pick(split.sources),
    )


def check_select(select: str, eval_items: int | None) -> None:
    """train.select: best_generated chooses by generated scores, so it needs eval_items."""
    if select == "best_generated" and eval_items is None:
        raise CampaignError(
            "train.select: best_generated needs model.generation.eval_items (the validation "
            "items it chooses by); set eval_items, or select last"
        )
