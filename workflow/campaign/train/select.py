"""Which step of a run is its model (train.select): the last step, or the step whose greedy
generations on the fixed validation subsample (model.generation.eval_items) scored best.

The choice reads only validation generations; the run's test scores, the evaluation's headline,
come from the chosen step's model, on items the choice never saw.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

SELECT_MODES = ("last", "best_generated")


def chosen_step(scores: Mapping[int, float], mode: str, last: int) -> int:
    """The step whose model the run keeps. scores: {step: mean generated score on the
    validation subsample} (NaN or absent where a step was not judged); last: the run's last
    step, always a candidate. `last` returns it; `best_generated` returns the step with the
    highest score, the latest of tied steps (the more trained model), and `last` when no step
    has a score."""
    if mode not in SELECT_MODES:
        raise ValueError(f"train.select: {mode!r} is not one of {', '.join(SELECT_MODES)}")
    if mode == "last":
        return last
    judged = [(s, float(v)) for s, v in scores.items() if v is not None and not math.isnan(v)]
    if not judged:
        return last
    best = max(v for _, v in judged)
    return max(s for s, v in judged if v == best)
